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

// One set of members that meet together (all of a communicator's, or the two ends of one p2p
// direction). Its members meet at a try of it, `<prefix>/try-N`, where each sets its key and the
// first to decide writes the try's verdict with compareSet, so all of them read the same one:
// "met" (set by a member that found every key there) or "left" (set by a member that gave up,
// naming its group rank, why, and the members it waited for in vain). A member that finds
// "left" fails at once, naming the one that left, instead of waiting a timeout of its own for a
// member that is gone; one that gave up and finds "met" written first goes on, as the others
// did. A member that took part in a failed try meets at the next one when its op is tried
// again (a group left standing after a failed op); a try's keys and verdict are never taken
// back, so each member finds its try in the store alone. A member arriving late at a failed
// try learns its verdict there (and meets the others at the next try when it tries again),
// unless the one that left already waits at the next try: then it meets it there.
struct MeetingPlace {
  std::string prefix;
  std::string self;                                   // this member's key name within a try
  std::vector<std::pair<std::string, int>> awaited;  // the others' key names, each with its group rank
};

// One meeting: the places a member meets at together (an op's new p2p directions), all or none.
struct Meeting {
  std::string who;      // "communicator cuda:0 of group 'pg'"
  std::string purpose;  // "to create it": why the others were awaited, for the error
  std::vector<MeetingPlace> places;
  int self = -1;  // this member's group rank, written in a verdict it leaves
};

// The key of the verdict of a place's try `attempt`.
std::string verdictKeyOf(const std::string& placePrefix, int attempt);

// Throws DistBackendError naming the group ranks that did not arrive within `timeout`, the one
// that had already left one of its places (at once, or within a slice of the store's wait when
// it left meanwhile), or the store that could not be reached; returns or throws within
// `timeout` + kMeetingAnswerGrace whatever the store does (a `timeout` of
// c10d::Store::kNoTimeout waits as long as it takes, and still fails when a member leaves).
// Once `abandoned` (when given) says so, before the meeting or during it, the caller stops
// waiting and throws at once: the communicator was aborted, so no op of it can run; the
// meeting then leaves its places ("left", never "met") on a thread of its own, as it does when
// the caller stops waiting for a store that does not answer.
void meet(const c10::intrusive_ptr<c10d::Store>& store, Meeting meeting, std::chrono::milliseconds timeout,
          const std::function<bool()>& abandoned = nullptr);

// The meeting of every member of a communicator before it is created, under `prefix`.
void meetMembers(const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix, const CommunicatorInfo& info,
                 const std::string& groupName, std::chrono::milliseconds timeout);

// The place where every member of a communicator meets, under `prefix`, keyed by communicator rank.
MeetingPlace everyMemberAt(const std::string& prefix, const CommunicatorInfo& info);

// How a communicator is named in errors: "communicator cuda:0 of group 'pg'".
std::string communicatorNamed(const CommunicatorInfo& info, const std::string& groupName);

// The group rank of a communicator's rank `commRank`.
int groupRankOf(const CommunicatorInfo& info, int commRank);

}  // namespace nccl_migrate::backends
