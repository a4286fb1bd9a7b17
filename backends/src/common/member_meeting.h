// Meetings in the group's store before a transport blocks on its peers: every member sets its
// key and waits for the others' within the group's timeout. NCCL's init and its connect on first
// use, and Gloo's connect, would otherwise block on a dead member (NCCL forever) or fail in the
// transport's own words; a meeting names the members that never came.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

// Beyond the meeting's timeout, how long the store's last calls (the member's own key, the
// check of who came) may take before the caller stops waiting for them.
inline constexpr std::chrono::milliseconds kMeetingAnswerGrace{1000};

// One meeting: the keys this member sets, and the keys it waits for, each with the group rank
// that sets it (named when it does not come). Keys are used once.
//
// A member that gives up marks each of the meeting's places (`places`: one per set of keys
// met together, such as one p2p direction) as left, with its group rank (`self`): a member
// arriving later fails at once, naming it, instead of waiting a whole timeout of its own for a
// member that is gone. Marks stay: a place met again after a failed meeting is a new one. Without the mark, ops that meet one after another (a ring's send, then
// its receive) add a timeout per meeting behind a member that gave up on an earlier one.
struct Meeting {
  std::string who;      // "communicator cuda:0 of group 'pg'"
  std::string purpose;  // "to create it": why the others were awaited, for the error
  std::vector<std::string> own;
  std::vector<std::pair<std::string, int>> awaited;
  std::vector<std::string> places;  // each place's key prefix; its mark is leftMarkOf(place)
  int self = -1;                    // this member's group rank, written in the marks it leaves
};

// The key a member that gave up on a meeting's place sets, its group rank the value.
std::string leftMarkOf(const std::string& place);

// Throws DistBackendError naming the group ranks that did not arrive within `timeout`, the one
// that had already given up on one of its places (at once, without waiting), or the store that
// could not be reached; returns or throws within `timeout` + kMeetingAnswerGrace
// whatever the store does (a `timeout` of c10d::Store::kNoTimeout waits as long as it takes).
// Once `abandoned` (when given) says so, the caller stops waiting and throws at once: the
// communicator was aborted, so no op of it can run, and waiting out the meeting would only hold
// the job's call (the meeting itself ends on its own thread).
void meet(const c10::intrusive_ptr<c10d::Store>& store, Meeting meeting, std::chrono::milliseconds timeout,
          const std::function<bool()>& abandoned = nullptr);

// The meeting of every member of a communicator before it is created, under `prefix`.
void meetMembers(const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix, const CommunicatorInfo& info,
                 const std::string& groupName, std::chrono::milliseconds timeout);

// How a communicator is named in errors: "communicator cuda:0 of group 'pg'".
std::string communicatorNamed(const CommunicatorInfo& info, const std::string& groupName);

// The group rank of a communicator's rank `commRank`.
int groupRankOf(const CommunicatorInfo& info, int commRank);

}  // namespace nccl_migrate::backends
