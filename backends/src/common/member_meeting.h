// The meeting before a communicator is created: every member sets its key in the group's store
// and waits for the others' within the connect timeout. NCCL's init and Gloo's connect would
// otherwise block on a dead member (NCCL forever) or fail in the transport's own words; this
// names the members that never came.
#pragma once

#include <chrono>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

// Beyond the meeting's timeout, how long the store's last calls (the member's own key, the
// check of who came) may take before the caller stops waiting for them.
inline constexpr std::chrono::milliseconds kMeetingAnswerGrace{1000};

// Throws DistBackendError naming the group ranks that did not arrive within `timeout`, or the
// store that could not be reached; returns or throws within `timeout` + kMeetingAnswerGrace
// whatever the store does (a `timeout` of c10d::Store::kNoTimeout waits as long as it takes).
void meetMembers(const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix, const CommunicatorInfo& info,
                 const std::string& groupName, std::chrono::milliseconds timeout);

}  // namespace nccl_migrate::backends
