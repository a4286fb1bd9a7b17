// meet, meetMembers: see member_meeting.h.
#include "member_meeting.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

namespace nccl_migrate::backends {
namespace {

// The last stretch of a meeting asks the store instead of waiting on it: a store's own wait may
// overrun its timeout (FileStore's returns on the next whole second past it, so a wait of
// 1000 ms takes 2 s), past the grace the meeting's caller gives it. Before that stretch the
// store's wait serves (a TCPStore answers it when the keys come, at no cost to its server).
constexpr std::chrono::milliseconds kAskedStretch{1000};
// How often that stretch asks: soon at first, then at most this often (torch's own store
// barrier asks every 10 ms).
constexpr std::chrono::milliseconds kFirstAsk{1};
constexpr std::chrono::milliseconds kLongestPause{50};
// How often the caller of a meeting asks whether its communicator was aborted meanwhile.
constexpr std::chrono::milliseconds kAbandonedPoll{20};

// The store's own wait, in slices of this at most, so that a meeting its caller abandoned ends
// soon (and leaves, see leave()) instead of holding its keys up until its deadline.
constexpr std::chrono::milliseconds kWaitSlice{1000};

// Whether the store's wait for `keys` ended with them there within `waitFor`.
bool cameWithin(c10d::Store& store, const std::vector<std::string>& keys, std::chrono::milliseconds waitFor) {
  auto started = std::chrono::steady_clock::now();
  try {
    store.wait(keys, waitFor);
    return true;
  } catch (const c10::DistNetworkError&) {
    throw;  // its host is gone
  } catch (const c10::Error&) {
    // Timed out (FileStore says so in a plain c10::Error, never before the time), unless it came
    // sooner: then the store failed (a file it cannot open or lock), and waiting again would spin.
    if (std::chrono::steady_clock::now() - started < waitFor) throw;
    return false;
  }
}

// Whether every key of `keys` is in the store by `deadline` (false as soon as `abandoned`).
bool arrivedBy(c10d::Store& store, const std::vector<std::string>& keys,
               std::chrono::steady_clock::time_point deadline, const std::atomic<bool>& abandoned) {
  while (!abandoned) {
    auto waitFor = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()) -
                   kAskedStretch;
    if (waitFor <= std::chrono::milliseconds(0)) break;  // the last stretch decides
    if (cameWithin(store, keys, std::min(waitFor, kWaitSlice))) return true;
  }
  std::chrono::milliseconds pause = kFirstAsk;
  while (!store.check(keys)) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline || abandoned) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, kLongestPause);
  }
  return true;
}

// The group ranks whose keys are not in the store, each named once, asked key by key within
// half the grace (a group of thousands is asked as long as that allows); `unasked` counts the
// keys left when it ran out.
std::set<int> absentMembers(c10d::Store& store, const Meeting& meeting, size_t& unasked) {
  auto until = std::chrono::steady_clock::now() + kMeetingAnswerGrace / 2;
  std::set<int> absent;
  unasked = 0;
  for (const auto& [key, groupRank] : meeting.awaited) {
    if (std::chrono::steady_clock::now() >= until) {
      ++unasked;
    } else if (!absent.count(groupRank) && !store.check({key})) {
      absent.insert(groupRank);
    }
  }
  return absent;
}

// The group rank that left a mark on one of the meeting's places, if any has (-1 when the mark
// does not read as one: some member gave up, which one is unknown).
std::optional<int> leaverOf(c10d::Store& store, const Meeting& meeting) {
  for (const std::string& place : meeting.places) {
    std::string mark = leftMarkOf(place);
    if (!store.check({mark})) continue;
    std::vector<uint8_t> value = store.get(mark);
    std::string text(value.begin(), value.end());
    char* end = nullptr;
    long groupRank = std::strtol(text.c_str(), &end, 10);
    return !text.empty() && *end == '\0' && groupRank >= 0 ? static_cast<int>(groupRank) : -1;
  }
  return std::nullopt;
}

// Giving up: the marks first, so a member arriving from now on fails at once, then this member's
// keys, so one that arrives anyway waits for it (and fails) instead of taking it for present and
// blocking in NCCL on a member that left. A mark names `leaver`, the member that gave up first:
// one already there stays (a member turned away by it passes it on to its other places rather
// than naming itself, which waited for no one). A member that set its keys in the moment before
// the marks and found this one's keys still there is not helped: it takes this member for
// present and goes on into the transport, where only the watchdog bounds it, as before marks.
// The verdict stands whatever the store does now: a store that fails here fails the others too.
void leave(c10d::Store& store, const Meeting& meeting, int leaver) {
  std::string name = std::to_string(leaver);
  try {
    for (const std::string& place : meeting.places) {
      store.compareSet(leftMarkOf(place), {}, std::vector<uint8_t>(name.begin(), name.end()));  // set only if absent
    }
    for (const std::string& key : meeting.own) store.deleteKey(key);
  } catch (const c10::Error& error) {
    LOG(WARNING) << "[nccl_migrate] " << meeting.who << " could not leave its marks in the group's store after giving up: "
                 << error.what_without_backtrace();
  }
}

// The meeting itself, through `store`: bounded by `timeout` as long as the store answers.
// `waitRanOut` is set once the wait for the others timed out (the check of who came follows).
void meetThroughStore(c10d::Store& store, const Meeting& meeting, std::chrono::milliseconds timeout,
                      std::atomic<bool>& waitRanOut, const std::atomic<bool>& abandoned) {
  auto unreachable = [&](const c10::Error& error) {
    C10_THROW_ERROR(DistBackendError, meeting.who + " could not meet its members: the group's store cannot be reached (" +
                                          error.what_without_backtrace() + ")");
  };
  std::vector<std::string> keys;
  for (const auto& [key, groupRank] : meeting.awaited) keys.push_back(key);
  std::set<int> absent;
  size_t unasked = 0;
  std::optional<int> leaver;
  // The meeting's time runs from its start: its caller gives it `timeout` and the grace, all told.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  try {
    for (const std::string& key : meeting.own) store.set(key, std::vector<uint8_t>{1});
    if (timeout == c10d::Store::kNoTimeout) {
      // The job asked for no bound: the store's own wait, however long, until its caller leaves.
      while (!abandoned) {
        if (cameWithin(store, keys, kWaitSlice)) return;
      }
      leave(store, meeting, meeting.self);
      return;
    }
    leaver = leaverOf(store, meeting);  // after setting its keys: see leave()
    if (!leaver) {
      if (arrivedBy(store, keys, deadline, abandoned)) return;
      if (abandoned) {
        leave(store, meeting, meeting.self);  // the caller has gone: a peer arriving now fails at once
        return;
      }
      waitRanOut = true;
      absent = absentMembers(store, meeting, unasked);
      if (absent.empty() && unasked == 0) return;  // the last of them came as the wait ran out: they all met
    }
  } catch (const c10::Error& error) {
    unreachable(error);  // its host is gone, or it failed: asking it again would only fail again
  }
  leave(store, meeting, leaver.value_or(meeting.self));
  if (leaver) {
    std::string who = *leaver >= 0 ? "group rank " + std::to_string(*leaver) : "a member";
    C10_THROW_ERROR(DistBackendError, meeting.who + ": " + who + " had already given up waiting " + meeting.purpose +
                                          " (a member it waited for never came), so it cannot meet now");
  }
  std::string missing;
  for (int groupRank : absent) missing += (missing.empty() ? "" : ", ") + std::to_string(groupRank);
  if (unasked) {
    missing += (missing.empty() ? "among the " : ", and maybe among the ") + std::to_string(unasked) +
               " not asked in time";
  }
  C10_THROW_ERROR(DistBackendError, meeting.who + ": group rank(s) " + missing + " did not arrive within " +
                                        std::to_string(timeout.count()) + " ms " + meeting.purpose +
                                        " (dead, or not running this op)");
}

[[noreturn]] void throwAbandoned(const Meeting& meeting) {
  C10_THROW_ERROR(DistBackendError, meeting.who + " stopped waiting for its members " + meeting.purpose +
                                        ": it was aborted meanwhile (after a failed op of its group, or by the job)");
}

}  // namespace

std::string leftMarkOf(const std::string& place) { return place + "/left"; }

std::string communicatorNamed(const CommunicatorInfo& info, const std::string& groupName) {
  return "communicator " + info.key + " of group '" + groupName + "'";
}

int groupRankOf(const CommunicatorInfo& info, int commRank) {
  return commRank < static_cast<int>(info.groupRanks.size()) ? info.groupRanks[commRank] : commRank;
}

void meet(const c10::intrusive_ptr<c10d::Store>& store, Meeting meeting, std::chrono::milliseconds timeout,
          const std::function<bool()>& abandoned) {
  // A store call can outlast any timeout given to it: torch's TCPStore names the peer of a failed
  // call by a reverse DNS lookup, which takes the resolver's own timeout (5 s by default) where
  // no resolver answers. So the meeting runs on a thread of its own, which ends on its own, and
  // the caller waits for it only as long as a meeting may take.
  struct Verdict {
    std::mutex mutex;
    std::condition_variable reached;
    bool done = false;
    std::exception_ptr error;
    std::atomic<bool> waitRanOut{false};
    std::atomic<bool> abandoned{false};  // the caller stopped waiting: the meeting leaves
  };
  if (abandoned && abandoned()) throwAbandoned(meeting);  // aborted before it began: no key is set
  auto verdict = std::make_shared<Verdict>();
  auto shared = std::make_shared<const Meeting>(std::move(meeting));
  std::thread([store, shared, timeout, verdict] {
    std::exception_ptr error;
    try {
      meetThroughStore(*store, *shared, timeout, verdict->waitRanOut, verdict->abandoned);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(verdict->mutex);
    verdict->done = true;
    verdict->error = error;
    verdict->reached.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(verdict->mutex);
  auto decided = [&] { return verdict->done; };
  bool bounded = timeout != c10d::Store::kNoTimeout;  // else the job asked for no bound
  auto bound = std::chrono::steady_clock::now() + (bounded ? timeout + kMeetingAnswerGrace : std::chrono::milliseconds(0));
  while (!decided()) {
    if (abandoned && abandoned()) {
      verdict->abandoned = true;
      throwAbandoned(*shared);
    }
    auto now = std::chrono::steady_clock::now();
    if (bounded && now >= bound) {
      std::string limit = std::to_string((timeout + kMeetingAnswerGrace).count()) + " ms";
      if (verdict->waitRanOut) {
        C10_THROW_ERROR(DistBackendError, shared->who + ": its members did not all arrive within " +
                                              std::to_string(timeout.count()) +
                                              " ms, and the group's store did not say which within " + limit);
      }
      C10_THROW_ERROR(DistBackendError, shared->who +
                                            " could not meet its members: the group's store did not answer within " +
                                            limit + " (its host is gone, or unreachable)");
    }
    auto until = now + kAbandonedPoll;
    verdict->reached.wait_until(lock, bounded ? std::min(bound, until) : until, decided);
  }
  if (verdict->error) std::rethrow_exception(verdict->error);
}

void meetMembers(const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix, const CommunicatorInfo& info,
                 const std::string& groupName, std::chrono::milliseconds timeout) {
  // The prefix is used once (the factory numbers every creation of a key), so keys left from
  // an earlier meeting are never mistaken for members arriving now.
  Meeting meeting{communicatorNamed(info, groupName), "to create it", {}, {}, {prefix + "/member"},
                  groupRankOf(info, info.rank)};
  for (int r = 0; r < info.size; ++r) {
    std::string key = prefix + "/member/" + std::to_string(r);
    if (r == info.rank) meeting.own.push_back(key);
    meeting.awaited.emplace_back(key, groupRankOf(info, r));
  }
  meet(store, std::move(meeting), timeout);
}

}  // namespace nccl_migrate::backends
