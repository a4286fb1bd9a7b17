// meet, meetMembers: see member_meeting.h.
#include "member_meeting.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
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

// The store's own wait, in slices of this at most: between slices the meeting reads its places'
// verdicts (a member that left turns it away) and whether its caller abandoned it.
constexpr std::chrono::milliseconds kWaitSlice{1000};

constexpr char kMet[] = "met";

std::vector<uint8_t> bytesOf(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

// A try's verdict as its members read it.
struct Verdict {
  bool met = false;
  int leaver = -1;       // the group rank that left; -1 where the value does not read as one
  bool aborted = false;  // it left because its communicator was aborted, not after waiting in vain
};

std::string leftVerdict(int leaver, bool aborted) {
  return "left " + std::to_string(leaver) + (aborted ? " aborted" : " waited");
}

Verdict verdictOf(const std::vector<uint8_t>& value) {
  std::string text(value.begin(), value.end());
  Verdict verdict;
  if (text == kMet) {
    verdict.met = true;
    return verdict;
  }
  std::istringstream words(text);
  std::string left, why;
  long groupRank = -1;
  if (words >> left >> groupRank >> why && left == "left" && groupRank >= 0) {
    verdict.leaver = static_cast<int>(groupRank);
    verdict.aborted = why == "aborted";
  }
  return verdict;
}

std::string keyAt(const std::string& placePrefix, int attempt, const std::string& name) {
  return placePrefix + "/try-" + std::to_string(attempt) + "/" + name;
}

// The try of `place` this member meets at: the first without a verdict, or with one it did not
// take part in (a member arriving late learns the verdict there), or one met with it (meeting
// again at once). A try it took part in that failed is passed by: its own key there says it
// took part, and every other member of that try passes it by too.
int tryOf(c10d::Store& store, const MeetingPlace& place) {
  for (int attempt = 0;; ++attempt) {
    std::string verdictKey = verdictKeyOf(place.prefix, attempt);
    if (!store.check({verdictKey})) return attempt;
    if (!store.check({keyAt(place.prefix, attempt, place.self)})) return attempt;
    if (verdictOf(store.get(verdictKey)).met) return attempt;
  }
}

// A place as this member meets it: at one try, its verdict once read.
struct PlaceAtTry {
  const MeetingPlace* place;
  int attempt;
  std::optional<Verdict> verdict;

  std::string ownKey() const { return keyAt(place->prefix, attempt, place->self); }
  std::string verdictKey() const { return verdictKeyOf(place->prefix, attempt); }
  std::vector<std::string> awaitedKeys() const {
    std::vector<std::string> keys;
    for (const auto& [name, groupRank] : place->awaited) keys.push_back(keyAt(place->prefix, attempt, name));
    return keys;
  }
};

// The verdict of `at`, written by this member unless one is there: the first write is the one
// every member reads.
Verdict decide(c10d::Store& store, PlaceAtTry& at, const std::string& proposal) {
  at.verdict = verdictOf(store.compareSet(at.verdictKey(), {}, bytesOf(proposal)));
  return *at.verdict;
}

// A "left" verdict among the places' written so far, reading those not yet read.
std::optional<Verdict> leftAmong(c10d::Store& store, std::vector<PlaceAtTry>& places) {
  for (PlaceAtTry& at : places) {
    if (!at.verdict && store.check({at.verdictKey()})) at.verdict = verdictOf(store.get(at.verdictKey()));
    if (at.verdict && !at.verdict->met) return at.verdict;
  }
  return std::nullopt;
}

// Giving up: "left" written on every place still open, naming `leaver` (this member, or the
// one whose leaving turned it away, passed on so that each member learns who gave up first).
// The verdict stands whatever the store does now: a store that fails here fails the others too.
void leave(c10d::Store& store, const Meeting& meeting, std::vector<PlaceAtTry>& places, int leaver, bool aborted) {
  try {
    for (PlaceAtTry& at : places) {
      if (!at.verdict) decide(store, at, leftVerdict(leaver, aborted));
    }
  } catch (const c10::Error& error) {
    LOG(WARNING) << "[nccl_migrate] " << meeting.who << " could not leave its verdict in the group's store after "
                 << "giving up: " << error.what_without_backtrace();
  }
}

[[noreturn]] void throwTurnedAway(const Meeting& meeting, const Verdict& left) {
  std::string who = left.leaver >= 0 ? "group rank " + std::to_string(left.leaver) : "a member";
  std::string why = left.aborted ? "its communicator was aborted" : "a member it waited for never came";
  C10_THROW_ERROR(DistBackendError, meeting.who + ": " + who + " had already given up waiting " + meeting.purpose +
                                        " (" + why + "), so it cannot meet now");
}

// Whether every key of `keys` came within `waitFor`, by the store's own wait.
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

// How the wait for the others ended.
enum class Wait { kArrived, kRanOut, kAbandoned };

// Waits until every key of `keys` is in the store, by `deadline` where there is one, reading the
// places' verdicts between its slices: one that says "left" turns this member away at once.
Wait waitForOthers(c10d::Store& store, const Meeting& meeting, std::vector<PlaceAtTry>& places,
                   const std::vector<std::string>& keys,
                   const std::optional<std::chrono::steady_clock::time_point>& deadline,
                   const std::atomic<bool>& abandoned) {
  std::chrono::milliseconds pause = kFirstAsk;
  while (true) {
    if (std::optional<Verdict> left = leftAmong(store, places)) {
      leave(store, meeting, places, left->leaver, left->aborted);  // passes on who gave up first
      throwTurnedAway(meeting, *left);
    }
    if (abandoned) return Wait::kAbandoned;
    if (!deadline) {  // the job asked for no bound: the store's own wait, however long
      if (cameWithin(store, keys, kWaitSlice)) return Wait::kArrived;
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= *deadline) return Wait::kRanOut;
    auto beforeAsking = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now) - kAskedStretch;
    if (beforeAsking > std::chrono::milliseconds(0)) {
      if (cameWithin(store, keys, std::min(beforeAsking, kWaitSlice))) return Wait::kArrived;
      continue;
    }
    if (store.check(keys)) return Wait::kArrived;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, *deadline - now));
    pause = std::min(pause * 2, kLongestPause);
  }
}

// Every place decided: "met" where all came at every place (a member goes on only if it met at
// all of them), else "left" by this member, which waited in vain. A verdict another member
// wrote first stands: one that left turns this member away, one that met lets it go on. Throws
// naming the absent (this member gave up) or the one that left first; returns if all met.
void decideEveryPlace(c10d::Store& store, const Meeting& meeting, std::vector<PlaceAtTry>& places,
                      const std::vector<bool>& allCame, std::chrono::milliseconds timeout) {
  bool everyPlace = std::all_of(allCame.begin(), allCame.end(), [](bool came) { return came; });
  std::optional<Verdict> turnedAway;
  std::vector<size_t> givenUp;  // the places this member's "left" decided
  for (size_t i = 0; i < places.size(); ++i) {
    PlaceAtTry& at = places[i];
    bool mine = !at.verdict;
    std::string proposal = everyPlace && !turnedAway ? kMet
                           : turnedAway              ? leftVerdict(turnedAway->leaver, turnedAway->aborted)
                                                     : leftVerdict(meeting.self, false);
    Verdict verdict = at.verdict ? *at.verdict : decide(store, at, proposal);
    if (verdict.met) continue;
    if (mine && !turnedAway && !everyPlace && verdict.leaver == meeting.self && !verdict.aborted) {
      givenUp.push_back(i);
    } else if (!turnedAway && givenUp.empty()) {
      turnedAway = verdict;
    }
  }
  if (givenUp.empty()) {
    if (turnedAway) throwTurnedAway(meeting, *turnedAway);
    return;
  }
  // The group ranks whose keys are not in the store, each named once, asked key by key within
  // half the grace (a group of thousands is asked as long as that allows).
  auto until = std::chrono::steady_clock::now() + kMeetingAnswerGrace / 2;
  std::set<int> absent;
  size_t unasked = 0;
  for (size_t i : givenUp) {
    const PlaceAtTry& at = places[i];
    for (const auto& [name, groupRank] : at.place->awaited) {
      if (std::chrono::steady_clock::now() >= until) {
        ++unasked;
      } else if (!absent.count(groupRank) && !store.check({keyAt(at.place->prefix, at.attempt, name)})) {
        absent.insert(groupRank);
      }
    }
  }
  std::string missing;
  for (int groupRank : absent) missing += (missing.empty() ? "" : ", ") + std::to_string(groupRank);
  if (unasked) {
    missing += (missing.empty() ? "among the " : ", and maybe among the ") + std::to_string(unasked) +
               " not asked in time";
  }
  if (missing.empty()) {  // they came in the moment between its last look and its verdict
    C10_THROW_ERROR(DistBackendError, meeting.who + ": its members came only as it gave up waiting " +
                                          meeting.purpose + " at its timeout of " + std::to_string(timeout.count()) +
                                          " ms");
  }
  C10_THROW_ERROR(DistBackendError, meeting.who + ": group rank(s) " + missing + " did not arrive within " +
                                        std::to_string(timeout.count()) + " ms " + meeting.purpose +
                                        " (dead, or not running this op)");
}

// The meeting itself, through `store`: bounded by `timeout` as long as the store answers.
// `waitRanOut` is set once the wait for the others timed out (the check of who came follows).
void meetThroughStore(c10d::Store& store, const Meeting& meeting, std::chrono::milliseconds timeout,
                      std::atomic<bool>& waitRanOut, const std::atomic<bool>& abandoned) {
  // The meeting's time runs from its start: its caller gives it `timeout` and the grace, all told.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (timeout != c10d::Store::kNoTimeout) deadline = std::chrono::steady_clock::now() + timeout;
  try {
    std::vector<PlaceAtTry> places;
    for (const MeetingPlace& place : meeting.places) places.push_back({&place, tryOf(store, place), std::nullopt});
    if (abandoned) {  // aborted before it came: it leaves without a key, so no one takes it for present
      leave(store, meeting, places, meeting.self, /*aborted=*/true);
      return;
    }
    std::vector<std::string> keys;
    for (const PlaceAtTry& at : places) {
      store.set(at.ownKey(), std::vector<uint8_t>{1});
      for (std::string& key : at.awaitedKeys()) keys.push_back(std::move(key));
    }
    switch (waitForOthers(store, meeting, places, keys, deadline, abandoned)) {
      case Wait::kArrived:
        decideEveryPlace(store, meeting, places, std::vector<bool>(places.size(), true), timeout);
        return;
      case Wait::kAbandoned:
        leave(store, meeting, places, meeting.self, /*aborted=*/true);
        return;
      case Wait::kRanOut:
        break;
    }
    waitRanOut = true;
    std::vector<bool> allCame;
    for (const PlaceAtTry& at : places) allCame.push_back(at.verdict.has_value() || store.check(at.awaitedKeys()));
    decideEveryPlace(store, meeting, places, allCame, timeout);
  } catch (const c10::DistBackendError&) {
    throw;  // the meeting's own verdict
  } catch (const c10::Error& error) {
    // Its host is gone, or it failed: asking it again would only fail again.
    C10_THROW_ERROR(DistBackendError, meeting.who + " could not meet its members: the group's store cannot be reached (" +
                                          error.what_without_backtrace() + ")");
  }
}

[[noreturn]] void throwAbandoned(const Meeting& meeting) {
  C10_THROW_ERROR(DistBackendError, meeting.who + " stopped waiting for its members " + meeting.purpose +
                                        ": it was aborted meanwhile (after a failed op of its group, or by the job)");
}

}  // namespace

std::string verdictKeyOf(const std::string& placePrefix, int attempt) {
  return keyAt(placePrefix, attempt, "verdict");
}

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
  struct Outcome {
    std::mutex mutex;
    std::condition_variable reached;
    bool done = false;
    std::exception_ptr error;
    std::atomic<bool> waitRanOut{false};
    std::atomic<bool> abandoned{false};  // the caller stopped waiting: the meeting leaves
  };
  auto outcome = std::make_shared<Outcome>();
  auto shared = std::make_shared<const Meeting>(std::move(meeting));
  // Aborted before it began: the meeting still leaves its places (on its thread), so that the
  // peers arriving there fail at once instead of waiting out their timeout for this member.
  bool abandonedBeforeStart = abandoned && abandoned();
  outcome->abandoned = abandonedBeforeStart;
  std::thread([store, shared, timeout, outcome] {
    std::exception_ptr error;
    try {
      meetThroughStore(*store, *shared, timeout, outcome->waitRanOut, outcome->abandoned);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(outcome->mutex);
    outcome->done = true;
    outcome->error = error;
    outcome->reached.notify_all();
  }).detach();
  if (abandonedBeforeStart) throwAbandoned(*shared);
  std::unique_lock<std::mutex> lock(outcome->mutex);
  auto decided = [&] { return outcome->done; };
  bool bounded = timeout != c10d::Store::kNoTimeout;  // else the job asked for no bound
  auto bound = std::chrono::steady_clock::now() + (bounded ? timeout + kMeetingAnswerGrace : std::chrono::milliseconds(0));
  while (!decided()) {
    if (abandoned && abandoned()) {
      outcome->abandoned = true;
      throwAbandoned(*shared);
    }
    auto now = std::chrono::steady_clock::now();
    if (bounded && now >= bound) {
      outcome->abandoned = true;  // a meeting still waiting leaves once the store answers
      std::string limit = std::to_string((timeout + kMeetingAnswerGrace).count()) + " ms";
      if (outcome->waitRanOut) {
        C10_THROW_ERROR(DistBackendError, shared->who + ": its members did not all arrive within " +
                                              std::to_string(timeout.count()) +
                                              " ms, and the group's store did not say which within " + limit);
      }
      C10_THROW_ERROR(DistBackendError, shared->who +
                                            " could not meet its members: the group's store did not answer within " +
                                            limit + " (its host is gone, or unreachable)");
    }
    auto until = now + kAbandonedPoll;
    outcome->reached.wait_until(lock, bounded ? std::min(bound, until) : until, decided);
  }
  if (outcome->error) std::rethrow_exception(outcome->error);
}

MeetingPlace everyMemberAt(const std::string& prefix, const CommunicatorInfo& info) {
  MeetingPlace place{prefix, std::to_string(info.rank), {}};
  for (int r = 0; r < info.size; ++r) {
    if (r != info.rank) place.awaited.emplace_back(std::to_string(r), groupRankOf(info, r));
  }
  return place;
}

void meetMembers(const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix, const CommunicatorInfo& info,
                 const std::string& groupName, std::chrono::milliseconds timeout) {
  // The prefix is used once (the factory numbers every creation of a key), so keys left from
  // an earlier meeting are never mistaken for members arriving now.
  Meeting meeting{communicatorNamed(info, groupName), "to create it", {everyMemberAt(prefix + "/member", info)},
                  groupRankOf(info, info.rank)};
  meet(store, std::move(meeting), timeout);
}

}  // namespace nccl_migrate::backends
