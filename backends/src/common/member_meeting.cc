// meet, meetMembers: see member_meeting.h.
#include "member_meeting.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <limits>
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

// While the last stretch asks for the keys, how often it also reads the places' verdicts.
constexpr std::chrono::milliseconds kVerdictPoll{200};
// How many absent group ranks a verdict names (the error of the member that wrote it names all).
constexpr size_t kAbsentNamedInVerdict = 64;

constexpr char kMet[] = "met";

std::vector<uint8_t> bytesOf(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

// Why a member stopped waiting before its meeting decided: its communicator was aborted, or
// its caller gave up on a store that did not answer in time.
enum class Abandon : int { kNo, kAborted, kUnanswered };

// A try's verdict as its members read it: "met", or "left <group rank> <reason> [<absent>]",
// the reason one of "waited" (its wait ran out; the absent group ranks follow), "aborted",
// "unanswered" (its store did not answer in time).
struct Verdict {
  bool met = false;
  bool left = false;
  int leaver = -1;  // -1 where the value does not name one
  std::string reason;
  std::string absent;  // "2,5"

  static Verdict leftBy(int leaver, std::string reason, std::string absent = "") {
    Verdict verdict;
    verdict.left = true;
    verdict.leaver = leaver;
    verdict.reason = std::move(reason);
    verdict.absent = std::move(absent);
    return verdict;
  }
  std::string text() const {
    if (met) return kMet;
    return "left " + std::to_string(leaver) + " " + reason + (absent.empty() ? "" : " " + absent);
  }
};

Verdict verdictOf(const std::vector<uint8_t>& value) {
  std::string text(value.begin(), value.end());
  Verdict verdict;
  if (text == kMet) {
    verdict.met = true;
    return verdict;
  }
  std::istringstream words(text);
  std::string left;
  words >> left;
  verdict.left = left == "left";  // anything else is no verdict (a store that answers every key)
  long groupRank = -1;
  if (verdict.left && words >> groupRank && groupRank >= 0) {
    verdict.leaver = static_cast<int>(groupRank);
    words >> verdict.reason >> verdict.absent;
  }
  return verdict;
}

Abandon abandonOf(const std::atomic<int>& abandoned) { return static_cast<Abandon>(abandoned.load()); }

Verdict leftByAbandoning(const Meeting& meeting, Abandon why) {
  return Verdict::leftBy(meeting.self, why == Abandon::kAborted ? "aborted" : "unanswered");
}

std::string keyAt(const std::string& placePrefix, int attempt, const std::string& name) {
  return placePrefix + "/try-" + std::to_string(attempt) + "/" + name;
}

// The key name of the member of `place` with group rank `groupRank`, if it is one.
std::optional<std::string> nameOf(const MeetingPlace& place, int groupRank) {
  for (const auto& [name, rank] : place.awaited) {
    if (rank == groupRank) return name;
  }
  return std::nullopt;
}

// The try of `place` this member meets at: the first without a verdict, or one met with it
// (meeting again at once), or one that failed without it (arriving late, it learns the verdict
// there, unless the member that left already waits at the next try: then it meets it there).
// A try it took part in that failed is passed by: its own key there, or the verdict naming it,
// says it took part, and every other member of that try passes it by too.
int tryOf(c10d::Store& store, const MeetingPlace& place, int self) {
  for (int attempt = 0;; ++attempt) {
    std::string verdictKey = verdictKeyOf(place.prefix, attempt);
    if (!store.check({verdictKey})) return attempt;
    Verdict verdict = verdictOf(store.get(verdictKey));
    if (!verdict.left) return attempt;
    bool tookPart = verdict.leaver == self || store.check({keyAt(place.prefix, attempt, place.self)});
    if (tookPart) continue;
    std::optional<std::string> leaver = nameOf(place, verdict.leaver);
    if (!leaver || !store.check({keyAt(place.prefix, attempt + 1, *leaver)})) return attempt;
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
Verdict decide(c10d::Store& store, PlaceAtTry& at, const Verdict& proposal) {
  at.verdict = verdictOf(store.compareSet(at.verdictKey(), {}, bytesOf(proposal.text())));
  return *at.verdict;
}

// A verdict other than "met" among the places' written so far, reading those not yet read.
std::optional<Verdict> leftAmong(c10d::Store& store, std::vector<PlaceAtTry>& places) {
  for (PlaceAtTry& at : places) {
    if (!at.verdict && store.check({at.verdictKey()})) at.verdict = verdictOf(store.get(at.verdictKey()));
    if (at.verdict && !at.verdict->met) return at.verdict;
  }
  return std::nullopt;
}

// Giving up: `left` written on every place still open (this member's own verdict, or that of
// the one whose leaving turned it away, passed on so that each member learns who gave up
// first). The verdict stands whatever the store does now: a store that fails here fails the
// others too.
void leave(c10d::Store& store, const Meeting& meeting, std::vector<PlaceAtTry>& places, const Verdict& left) {
  try {
    for (PlaceAtTry& at : places) {
      if (!at.verdict) decide(store, at, left);
    }
  } catch (const c10::Error& error) {
    LOG(WARNING) << "[nccl_migrate] " << meeting.who << " could not leave its verdict in the group's store after "
                 << "giving up: " << error.what_without_backtrace();
  }
}

[[noreturn]] void throwTurnedAway(const Meeting& meeting, const Verdict& left) {
  std::string who = left.leaver >= 0 ? "group rank " + std::to_string(left.leaver) : "a member";
  std::string absent;
  for (char c : left.absent) absent += c == ',' ? std::string(", ") : std::string(1, c);
  std::string why = left.reason == "aborted"    ? "its communicator was aborted"
                    : left.reason == "unanswered" ? "the group's store did not answer it in time"
                    : left.reason != "waited"     ? "for a reason it did not say"
                    : absent.empty()              ? "its wait for the others ran out"
                                                  : "it waited in vain for group rank(s) " + absent;
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
                   const std::atomic<int>& abandoned) {
  std::chrono::milliseconds pause = kFirstAsk;
  std::chrono::steady_clock::time_point nextRead;  // of the verdicts: at once
  while (true) {
    auto now = std::chrono::steady_clock::now();
    if (now >= nextRead) {
      if (std::optional<Verdict> left = leftAmong(store, places)) {
        leave(store, meeting, places, *left);  // passes on who gave up first
        throwTurnedAway(meeting, *left);
      }
      nextRead = now + kVerdictPoll;
    }
    if (abandonOf(abandoned) != Abandon::kNo) return Wait::kAbandoned;
    if (!deadline) {  // the job asked for no bound: the store's own wait, however long
      if (cameWithin(store, keys, kWaitSlice)) return Wait::kArrived;
      continue;
    }
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

// How the places were decided for this member.
struct Decision {
  bool gaveUp = false;                // its own "left" decided at least one place
  std::optional<Verdict> turnedAway;  // else: another member's "left" decided one
};

// Every place decided: "met" if all came at every place (`allCame`: a member goes on only if it
// met at all of them) and its caller still waits, else `ownLeft`. A verdict another member wrote first
// stands: one that left turns this member away, one that met lets it go on.
Decision decideEveryPlace(c10d::Store& store, std::vector<PlaceAtTry>& places, bool allCame, const Verdict& ownLeft,
                          bool abandoned) {
  bool everyPlace = allCame && !abandoned;
  Decision decision;
  for (PlaceAtTry& at : places) {
    if (at.verdict && at.verdict->met) continue;  // met before it came (a place met again)
    const Verdict proposal = decision.turnedAway ? *decision.turnedAway : everyPlace ? Verdict{true} : ownLeft;
    Verdict verdict = decide(store, at, proposal);
    if (verdict.met) continue;
    if (!decision.turnedAway && verdict.text() == ownLeft.text()) {
      decision.gaveUp = true;
    } else if (!decision.turnedAway && !decision.gaveUp) {
      decision.turnedAway = verdict;
    }
  }
  return decision;
}

// The group ranks whose keys at `at` are not in the store, asked key by key until `until` (a
// group of thousands is asked as long as that allows); `unasked` counts the keys left.
void addAbsent(c10d::Store& store, const PlaceAtTry& at, std::chrono::steady_clock::time_point until,
               std::set<int>& absent, size_t& unasked) {
  for (const auto& [name, groupRank] : at.place->awaited) {
    if (std::chrono::steady_clock::now() >= until) {
      ++unasked;
    } else if (!absent.count(groupRank) && !store.check({keyAt(at.place->prefix, at.attempt, name)})) {
      absent.insert(groupRank);
    }
  }
}

// The first `most` of `groupRanks`, joined by `separator`.
std::string joined(const std::set<int>& groupRanks, const std::string& separator,
                   size_t most = std::numeric_limits<size_t>::max()) {
  std::string text;
  size_t count = 0;
  for (int groupRank : groupRanks) {
    if (count++ == most) break;
    text += (text.empty() ? "" : separator) + std::to_string(groupRank);
  }
  return text;
}

[[noreturn]] void throwAbsent(const Meeting& meeting, const std::set<int>& absent, size_t unasked,
                              std::chrono::milliseconds timeout) {
  std::string missing = joined(absent, ", ");
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
                      std::atomic<bool>& waitRanOut, const std::atomic<int>& abandoned) {
  // The meeting's time runs from its start: its caller gives it `timeout` and the grace, all told.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (timeout != c10d::Store::kNoTimeout) deadline = std::chrono::steady_clock::now() + timeout;
  try {
    std::vector<PlaceAtTry> places;
    for (const MeetingPlace& place : meeting.places) {
      places.push_back({&place, tryOf(store, place, meeting.self), std::nullopt});
    }
    // Abandoned before it came: it leaves without a key, so no one takes it for present.
    if (abandonOf(abandoned) != Abandon::kNo) {
      leave(store, meeting, places, leftByAbandoning(meeting, abandonOf(abandoned)));
      return;
    }
    std::vector<std::string> keys;
    for (const PlaceAtTry& at : places) {
      store.set(at.ownKey(), std::vector<uint8_t>{1});
      for (std::string& key : at.awaitedKeys()) keys.push_back(std::move(key));
    }
    Wait wait = waitForOthers(store, meeting, places, keys, deadline, abandoned);
    bool allCame = true;
    std::set<int> absent;
    size_t unasked = 0;
    Verdict ownLeft = Verdict::leftBy(meeting.self, "waited");
    if (wait == Wait::kRanOut) {
      waitRanOut = true;
      auto until = std::chrono::steady_clock::now() + kMeetingAnswerGrace / 2;
      for (const PlaceAtTry& at : places) {
        if (at.verdict || store.check(at.awaitedKeys())) continue;
        allCame = false;
        addAbsent(store, at, until, absent, unasked);
      }
      ownLeft.absent = joined(absent, ",", kAbsentNamedInVerdict);
    }
    Abandon why = abandonOf(abandoned);
    if (why != Abandon::kNo) ownLeft = leftByAbandoning(meeting, why);  // its caller has gone: never "met"
    Decision decision = decideEveryPlace(store, places, allCame, ownLeft, why != Abandon::kNo);
    if (why != Abandon::kNo) return;  // no one waits for its error
    if (decision.gaveUp) throwAbsent(meeting, absent, unasked, timeout);
    if (decision.turnedAway) throwTurnedAway(meeting, *decision.turnedAway);
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
    std::atomic<int> abandoned{static_cast<int>(Abandon::kNo)};  // the caller stopped waiting: the meeting leaves
  };
  auto outcome = std::make_shared<Outcome>();
  auto shared = std::make_shared<const Meeting>(std::move(meeting));
  // Aborted before it began: the meeting still leaves its places (on its thread), so that the
  // peers arriving there fail at once instead of waiting out their timeout for this member.
  bool abandonedBeforeStart = abandoned && abandoned();
  if (abandonedBeforeStart) outcome->abandoned = static_cast<int>(Abandon::kAborted);
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
      outcome->abandoned = static_cast<int>(Abandon::kAborted);
      throwAbandoned(*shared);
    }
    auto now = std::chrono::steady_clock::now();
    if (bounded && now >= bound) {
      // A meeting still waiting leaves once the store answers.
      outcome->abandoned = static_cast<int>(Abandon::kUnanswered);
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
