// Meetings in the group's store (common/member_meeting.h), on torch's HashStore: what a member
// sees of the others, and how long it waits.
#include <gtest/gtest.h>

#include <chrono>
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
// now leaves a mark, and a later one fails at once, naming it.
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

// A member turned away by a mark passes on the name of the one that gave up first, to every place
// it leaves: in a chain A, B, C, where B meets A at one place and C at another, C is told that A
// gave up, not B (which waited for no one).
TEST(MemberMeeting, AMarkPassedOnNamesTheMemberThatGaveUpFirst) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto memberAt = [](int groupRank, std::vector<std::string> places, std::vector<std::pair<std::string, int>> awaited) {
    Meeting meeting{"member " + std::to_string(groupRank), "to connect", {}, std::move(awaited), places, groupRank};
    for (const std::string& place : places) meeting.own.push_back(place + "/" + std::to_string(groupRank));
    return meeting;
  };
  auto failureOfMeeting = [&](Meeting meeting, milliseconds timeout) -> std::string {
    try {
      meet(store, std::move(meeting), timeout);
    } catch (const c10::DistBackendError& e) {
      return e.what_without_backtrace();
    }
    return "";
  };
  // A (group rank 3) waits for B at place X and gives up; B (5) meets A at X and C at Y; C (8) meets B at Y.
  ASSERT_NE(failureOfMeeting(memberAt(3, {"X"}, {{"X/5", 5}}), milliseconds(200)), "");
  std::string b = failureOfMeeting(memberAt(5, {"X", "Y"}, {{"X/3", 3}, {"Y/8", 8}}), milliseconds(3000));
  EXPECT_NE(b.find("group rank 3 had already given up"), std::string::npos) << b;
  auto started = std::chrono::steady_clock::now();
  std::string c = failureOfMeeting(memberAt(8, {"Y"}, {{"Y/5", 5}}), milliseconds(3000));
  EXPECT_LT(secondsSince(started), 1.0) << "C waited for B, which had left";
  EXPECT_NE(c.find("member 8: group rank 3 had already given up"), std::string::npos) << c;
  // A mark already there stays: B's leaving did not rename the one that gave up at X.
  auto mark = store->get(leftMarkOf("X"));
  EXPECT_EQ(std::string(mark.begin(), mark.end()), "3");
}

// The mark is the meeting's own: a member of another meeting (another prefix) is not turned away.
TEST(MemberMeeting, AMarkLeftOnOneMeetingTurnsNoOneAwayFromAnother) {
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
