// meet, meetMembers: see member_meeting.h.
#include "member_meeting.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <c10/util/Exception.h>

namespace nccl_migrate::backends {
namespace {

// How often a meeting asks the store whether the others came: soon at first (members usually
// arrive together), then at most this often (torch's own store barrier asks every 10 ms).
constexpr std::chrono::milliseconds kFirstAsk{1};
constexpr std::chrono::milliseconds kLongestPause{50};

// Whether every key of `keys` is in the store by `deadline`. The store is asked, not waited on:
// a store's own wait may overrun its timeout (FileStore's returns on a whole second past it: a
// wait of 1000 ms takes 2 s), past the grace the meeting's caller gives it.
bool arrivedBy(c10d::Store& store, const std::vector<std::string>& keys,
               std::chrono::steady_clock::time_point deadline) {
  std::chrono::milliseconds pause = kFirstAsk;
  while (!store.check(keys)) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, kLongestPause);
  }
  return true;
}

// The meeting itself, through `store`: bounded by `timeout` as long as the store answers.
// `waitRanOut` is set once the wait for the others timed out (the check of who came follows).
void meetThroughStore(c10d::Store& store, const Meeting& meeting, std::chrono::milliseconds timeout,
                      std::atomic<bool>& waitRanOut) {
  auto unreachable = [&](const c10::Error& error) {
    C10_THROW_ERROR(DistBackendError, meeting.who + " could not meet its members: the group's store cannot be reached (" +
                                          error.what_without_backtrace() + ")");
  };
  std::vector<std::string> keys;
  for (const auto& [key, groupRank] : meeting.awaited) keys.push_back(key);
  std::string missing;
  try {
    for (const std::string& key : meeting.own) store.set(key, std::vector<uint8_t>{1});
    if (timeout == c10d::Store::kNoTimeout) {
      store.wait(keys, timeout);  // the job asked for no bound: the store's own wait, however long
      return;
    }
    if (arrivedBy(store, keys, std::chrono::steady_clock::now() + timeout)) return;
    waitRanOut = true;
    std::set<int> absent;  // a peer awaited for several connections is named once
    for (const auto& [key, groupRank] : meeting.awaited) {
      if (!absent.count(groupRank) && !store.check({key})) absent.insert(groupRank);
    }
    for (int groupRank : absent) missing += (missing.empty() ? "" : ", ") + std::to_string(groupRank);
  } catch (const c10::Error& error) {
    unreachable(error);  // its host is gone, or it failed: asking it again would only fail again
  }
  if (missing.empty()) return;  // the last of them came as the wait ran out: they all met
  C10_THROW_ERROR(DistBackendError, meeting.who + ": group rank(s) " + missing + " did not arrive within " +
                                        std::to_string(timeout.count()) + " ms " + meeting.purpose +
                                        " (dead, or not running this op)");
}

}  // namespace

std::string communicatorNamed(const CommunicatorInfo& info, const std::string& groupName) {
  return "communicator " + info.key + " of group '" + groupName + "'";
}

int groupRankOf(const CommunicatorInfo& info, int commRank) {
  return commRank < static_cast<int>(info.groupRanks.size()) ? info.groupRanks[commRank] : commRank;
}

void meet(const c10::intrusive_ptr<c10d::Store>& store, Meeting meeting, std::chrono::milliseconds timeout) {
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
  };
  auto verdict = std::make_shared<Verdict>();
  auto shared = std::make_shared<const Meeting>(std::move(meeting));
  std::thread([store, shared, timeout, verdict] {
    std::exception_ptr error;
    try {
      meetThroughStore(*store, *shared, timeout, verdict->waitRanOut);
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
  if (timeout == c10d::Store::kNoTimeout) {
    verdict->reached.wait(lock, decided);  // the job asked for no bound
  } else if (!verdict->reached.wait_for(lock, timeout + kMeetingAnswerGrace, decided)) {
    std::string bound = std::to_string((timeout + kMeetingAnswerGrace).count()) + " ms";
    if (verdict->waitRanOut) {
      C10_THROW_ERROR(DistBackendError, shared->who + ": its members did not all arrive within " +
                                            std::to_string(timeout.count()) +
                                            " ms, and the group's store did not say which within " + bound);
    }
    C10_THROW_ERROR(DistBackendError, shared->who +
                                          " could not meet its members: the group's store did not answer within " +
                                          bound + " (its host is gone, or unreachable)");
  }
  if (verdict->error) std::rethrow_exception(verdict->error);
}

void meetMembers(const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix, const CommunicatorInfo& info,
                 const std::string& groupName, std::chrono::milliseconds timeout) {
  // The prefix is used once (the factory numbers every creation of a key), so keys left from
  // an earlier meeting are never mistaken for members arriving now.
  Meeting meeting{communicatorNamed(info, groupName), "to create it", {}, {}};
  for (int r = 0; r < info.size; ++r) {
    std::string key = prefix + "/member/" + std::to_string(r);
    if (r == info.rank) meeting.own.push_back(key);
    meeting.awaited.emplace_back(key, groupRankOf(info, r));
  }
  meet(store, std::move(meeting), timeout);
}

}  // namespace nccl_migrate::backends
