// Meetings in the group's store (common/member_meeting.h), on torch's HashStore: what a member
// sees of the others, and how long it waits.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

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
