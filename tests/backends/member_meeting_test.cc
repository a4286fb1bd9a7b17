// Meetings in the group's store (common/member_meeting.h), on torch's HashStore: what a member
// sees of the others, and how long it waits.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "common/member_meeting.h"

namespace nccl_migrate::backends {
namespace {

using std::chrono::milliseconds;

// Communicator rank `rank` of a two-member group whose group ranks are 4 and 7, so that a
// message naming a communicator rank instead of a group rank shows.
CommunicatorInfo memberOfTwo(int rank) {
  CommunicatorInfo info;
  info.key = "cpu:" + std::to_string(rank);
  info.rank = rank;
  info.size = 2;
  info.groupRanks = {4, 7};
  return info;
}

std::string failureOf(const c10::intrusive_ptr<c10d::Store>& store, int rank, milliseconds timeout) {
  try {
    meetMembers(store, "pg/1", memberOfTwo(rank), "pg", timeout);
  } catch (const c10::DistBackendError& e) {
    return e.what_without_backtrace();
  }
  return "";
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(MemberMeeting, MembersThatBothComeMeet) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::string first;
  std::thread other([&] { first = failureOf(store, 1, milliseconds(5000)); });
  EXPECT_EQ(failureOf(store, 0, milliseconds(5000)), "");
  other.join();
  EXPECT_EQ(first, "");
}

TEST(MemberMeeting, AMemberAloneGivesUpAtItsTimeoutNamingTheAbsentOne) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto started = std::chrono::steady_clock::now();
  std::string error = failureOf(store, 1, milliseconds(300));
  EXPECT_NE(error.find("group rank(s) 4 did not arrive within 300 ms to create it"), std::string::npos) << error;
  EXPECT_GE(secondsSince(started), 0.3);
  EXPECT_LT(secondsSince(started), 0.3 + std::chrono::duration<double>(kMeetingAnswerGrace).count());
}

// The campaign's finding: in a ring of single sends and receives, each rank meets one
// direction's peer, then the other's. A rank that gave up on its first meeting (its peer there
// was dead) left its second peer waiting, and that peer, arriving a moment after, waited a
// whole timeout more for a member that was gone: two timeouts for one op. A member that gave up
// now leaves its place's verdict, and a later one fails at once, naming it.
TEST(MemberMeeting, AMemberArrivingAfterAnotherGaveUpFailsAtOnceNamingIt) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  ASSERT_NE(failureOf(store, 1, milliseconds(200)), "");
  auto started = std::chrono::steady_clock::now();
  std::string error = failureOf(store, 0, milliseconds(3000));
  EXPECT_LT(secondsSince(started), 1.0) << "the later member waited for one that had given up";
  EXPECT_NE(error.find("communicator cpu:0 of group 'pg': group rank 7 had already given up waiting to create it"),
            std::string::npos)
      << error;
}

// A meeting at places of the test's own making, each member's key its group rank.
Meeting memberAt(int groupRank, std::vector<std::pair<std::string, int>> peerAtPlace) {
  Meeting meeting{"member " + std::to_string(groupRank), "to connect", {}, groupRank};
  for (const auto& [place, peer] : peerAtPlace) {
    meeting.places.push_back(MeetingPlace{place, std::to_string(groupRank), {{std::to_string(peer), peer}}});
  }
  return meeting;
}

std::string failureOfMeeting(const c10::intrusive_ptr<c10d::Store>& store, Meeting meeting, milliseconds timeout,
                             const std::function<bool()>& abandoned = nullptr) {
  try {
    meet(store, std::move(meeting), timeout, abandoned);
  } catch (const c10::DistBackendError& e) {
    return e.what_without_backtrace();
  }
  return "";
}

// A member's key at a place's first try (member_meeting.cc's layout: `<place>/try-N/<name>`).
std::string keyAtTryZero(const std::string& place, const std::string& name) { return place + "/try-0/" + name; }

std::string verdictAt(const c10::intrusive_ptr<c10d::Store>& store, const std::string& place, int attempt) {
  auto value = store->get(verdictKeyOf(place, attempt));
  return std::string(value.begin(), value.end());
}

// A member turned away passes on the name of the one that gave up first, to every place it
// leaves: in a chain A, B, C, where B meets A at one place and C at another, C is told that A
// gave up, not B (which waited for no one).
TEST(MemberMeeting, AMarkPassedOnNamesTheMemberThatGaveUpFirst) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  // A (group rank 3) waits for B at place X and gives up; B (5) meets A at X and C at Y; C (8) meets B at Y.
  ASSERT_NE(failureOfMeeting(store, memberAt(3, {{"X", 5}}), milliseconds(200)), "");
  std::string b = failureOfMeeting(store, memberAt(5, {{"X", 3}, {"Y", 8}}), milliseconds(3000));
  EXPECT_NE(b.find("group rank 3 had already given up"), std::string::npos) << b;
  auto started = std::chrono::steady_clock::now();
  std::string c = failureOfMeeting(store, memberAt(8, {{"Y", 5}}), milliseconds(3000));
  EXPECT_LT(secondsSince(started), 1.0) << "C waited for B, which had left";
  EXPECT_NE(c.find("member 8: group rank 3 had already given up"), std::string::npos) << c;
  // The first verdict stands: B's leaving did not rename the one that gave up at X.
  EXPECT_EQ(verdictAt(store, "X", 0), "left 3 waited 5");
}

// A store that runs `hook` once, just before the first compareSet (the moment a member writes
// its verdict), and `waitHook` once, before the first wait (a member between setting its key and
// finding the others').
class StoreWithAHook final : public c10d::HashStore {
 public:
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    if (hook && !fired.exchange(true)) hook();
    return c10d::HashStore::compareSet(key, expected, desired);
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    if (waitHook && !waitFired.exchange(true)) waitHook();
    c10d::HashStore::wait(keys, timeout);
  }
  std::function<void()> hook;
  std::function<void()> waitHook;
  std::atomic<bool> fired{false};
  std::atomic<bool> waitFired{false};
};

// Waits up to `bound` for `key` to be in the store.
bool inStoreWithin(c10d::Store& store, const std::string& key, milliseconds bound) {
  auto giveUp = std::chrono::steady_clock::now() + bound;
  while (!store.check({key})) {
    if (std::chrono::steady_clock::now() >= giveUp) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

// The review's finding: a meeting whose caller had stopped waiting (its communicator aborted)
// found its peer's key and wrote "met", so the peer went on into NCCL while this member had
// failed. Once its caller has gone, a meeting only leaves.
TEST(MemberMeeting, AMeetingWhoseCallerWasAbortedNeverWritesMet) {
  auto store = c10::make_intrusive<StoreWithAHook>();
  std::atomic<bool> aborted{false};
  std::promise<void> callerGone;
  auto gone = callerGone.get_future().share();
  store->waitHook = [&aborted, gone] {
    aborted = true;  // the communicator is aborted while the meeting is between its key and its wait
    gone.wait();
  };
  store->set(keyAtTryZero("X", "5"), std::vector<uint8_t>{1});  // the peer is there
  std::string error = failureOfMeeting(store, memberAt(3, {{"X", 5}}), milliseconds(3000), [&] { return aborted.load(); });
  callerGone.set_value();
  EXPECT_NE(error.find("it was aborted meanwhile"), std::string::npos) << error;
  ASSERT_TRUE(inStoreWithin(*store, verdictKeyOf("X", 0), milliseconds(3000))) << "the meeting never left";
  EXPECT_EQ(verdictAt(store, "X", 0), "left 3 aborted");
}

// The review's finding: a member whose wait ran out (its peer absent at its last look) gave up,
// while its peer, arriving in that moment, found its key and went on into NCCL: one side failed
// and the other blocked, and a retry of the failed side met at a place its peer never came to.
// Both now read the one verdict the first of them wrote: here the peer's "met", so both go on.
TEST(MemberMeeting, AMemberWhoseWaitRanOutAsItsPeerCameGoesOnWithIt) {
  auto store = c10::make_intrusive<StoreWithAHook>();
  std::string peer = "not run";
  store->hook = [&] { peer = failureOfMeeting(store, memberAt(5, {{"X", 3}}), milliseconds(3000)); };
  std::string first = failureOfMeeting(store, memberAt(3, {{"X", 5}}), milliseconds(200));
  EXPECT_EQ(peer, "") << "the peer arriving as the wait ran out did not go on";
  EXPECT_EQ(first, "") << "the member whose wait ran out failed while its peer went on";
  EXPECT_EQ(verdictAt(store, "X", 0), "met");
}

// The review's finding: a member meeting two peers at once (a batch's sends to ranks 1 and 2)
// met one of them, which went on, and gave up on the other. Its retry then met both places
// afresh, where the one that had gone on never came. Now the place that met stays met, the
// retry meets at the failed place's next try, and the late peer, turned away from the failed
// try, meets it there on its own retry.
TEST(MemberMeeting, ARetryAfterMeetingOnePeerOfTwoMeetsTheMissingOneAtTheNextTry) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::string one = "not run";
  std::thread first([&] { one = failureOfMeeting(store, memberAt(1, {{"0-1", 0}}), milliseconds(3000)); });
  std::string zero = failureOfMeeting(store, memberAt(0, {{"0-1", 1}, {"0-2", 2}}), milliseconds(1500));
  first.join();
  EXPECT_EQ(one, "") << "the peer that came did not meet";
  EXPECT_NE(zero.find("group rank(s) 2 did not arrive"), std::string::npos) << zero;
  EXPECT_EQ(verdictAt(store, "0-1", 0), "met");
  EXPECT_EQ(verdictAt(store, "0-2", 0), "left 0 waited 2");
  // The late peer is turned away from the failed try, then both try again.
  std::string late = failureOfMeeting(store, memberAt(2, {{"0-2", 0}}), milliseconds(3000));
  EXPECT_NE(late.find("group rank 0 had already given up"), std::string::npos) << late;
  std::string two = "not run";
  std::thread lateRetry([&] { two = failureOfMeeting(store, memberAt(2, {{"0-2", 0}}), milliseconds(3000)); });
  std::string retry = failureOfMeeting(store, memberAt(0, {{"0-1", 1}, {"0-2", 2}}), milliseconds(3000));
  lateRetry.join();
  EXPECT_EQ(retry, "") << "the retry did not meet both peers";
  EXPECT_EQ(two, "") << "the late peer's retry did not meet";
  EXPECT_EQ(verdictAt(store, "0-2", 1), "met");
}

// A member arriving for the first time at a try its peer gave up on, while that peer already
// waits at the next try (its op tried again), meets it there instead of being turned away.
TEST(MemberMeeting, ALateMemberMeetsItsPeerAlreadyWaitingAtTheNextTry) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  ASSERT_NE(failureOfMeeting(store, memberAt(3, {{"X", 5}}), milliseconds(200)), "");
  std::string retry = "not run";
  std::thread retrying([&] { retry = failureOfMeeting(store, memberAt(3, {{"X", 5}}), milliseconds(5000)); });
  ASSERT_TRUE(inStoreWithin(*store, "X/try-1/3", milliseconds(3000)));
  std::string late = failureOfMeeting(store, memberAt(5, {{"X", 3}}), milliseconds(5000));
  retrying.join();
  EXPECT_EQ(late, "") << "the late member was turned away though its peer waited at the next try";
  EXPECT_EQ(retry, "");
}

// A member that leaves while another still waits turns it away at once, not at its own timeout:
// in a meeting of three where one never comes, the second learns that the first gave up.
TEST(MemberMeeting, AMemberLeavingWhileAnotherWaitsTurnsItAwaySoon) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto memberOfThree = [](int rank) {
    CommunicatorInfo info;
    info.key = "cpu:" + std::to_string(rank);
    info.rank = rank;
    info.size = 3;
    return Meeting{"member " + std::to_string(rank), "to create it", {everyMemberAt("pg/3", info)}, rank};
  };
  // The second member is there before the first's short wait begins, however loaded the machine.
  std::string second;
  auto started = std::chrono::steady_clock::now();
  std::thread waits([&] { second = failureOfMeeting(store, memberOfThree(1), milliseconds(8000)); });
  ASSERT_TRUE(inStoreWithin(*store, "pg/3/try-0/1", milliseconds(5000))) << "the second member never came";
  std::string first = failureOfMeeting(store, memberOfThree(0), milliseconds(300));
  waits.join();
  EXPECT_NE(first.find("group rank(s) 2 did not arrive"), std::string::npos) << first;
  EXPECT_NE(second.find("group rank 0 had already given up"), std::string::npos) << second;
  EXPECT_NE(second.find("it waited in vain for group rank(s) 2"), std::string::npos)
      << "the member turned away was not told who never came: " << second;
  EXPECT_LT(secondsSince(started), 3.5) << "the second member waited on after the first had left";
}

// A member that waits without a bound (the job's timeout is kNoTimeout) still fails at once where
// another has left: it would otherwise wait forever for a member that is gone.
TEST(MemberMeeting, AnUnboundedMemberArrivingAfterAnotherGaveUpFailsAtOnce) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  ASSERT_NE(failureOfMeeting(store, memberAt(3, {{"X", 5}}), milliseconds(200)), "");
  auto result = std::make_shared<std::promise<std::string>>();
  std::thread([store, result] {
    result->set_value(failureOfMeeting(store, memberAt(5, {{"X", 3}}), c10d::Store::kNoTimeout));
  }).detach();  // on a failure of this test it would wait forever
  auto answer = result->get_future();
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(3)), std::future_status::ready)
      << "the unbounded member waited on for one that had given up";
  EXPECT_NE(answer.get().find("group rank 3 had already given up"), std::string::npos);
}

// A member aborted before its meeting began leaves it all the same: a peer arriving there fails
// at once, told why, instead of waiting out its timeout for a member that will never come.
TEST(MemberMeeting, AMemberAbortedBeforeItsMeetingLeavesItForThePeers) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::string aborted = failureOfMeeting(store, memberAt(3, {{"X", 5}}), milliseconds(3000), [] { return true; });
  EXPECT_NE(aborted.find("it was aborted meanwhile"), std::string::npos) << aborted;
  auto started = std::chrono::steady_clock::now();
  std::string peer = failureOfMeeting(store, memberAt(5, {{"X", 3}}), milliseconds(8000));
  EXPECT_NE(peer.find("group rank 3 had already given up waiting to connect (its communicator was aborted)"),
            std::string::npos)
      << peer;
  EXPECT_LT(secondsSince(started), 3.0) << "the peer waited for a member aborted before it came";
}

// A verdict is its meeting's own: a member of another meeting (another prefix) is not turned away.
TEST(MemberMeeting, AVerdictOnOneMeetingTurnsNoOneAwayFromAnother) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  ASSERT_NE(failureOf(store, 1, milliseconds(200)), "");
  std::string second;
  std::thread other([&] {
    try {
      meetMembers(store, "pg/2", memberOfTwo(1), "pg", milliseconds(5000));
    } catch (const c10::DistBackendError& e) {
      second = e.what_without_backtrace();
    }
  });
  std::string error;
  try {
    meetMembers(store, "pg/2", memberOfTwo(0), "pg", milliseconds(5000));
  } catch (const c10::DistBackendError& e) {
    error = e.what_without_backtrace();
  }
  other.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(second, "");
}

}  // namespace
}  // namespace nccl_migrate::backends
