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

// Throws DistBackendError naming the group ranks that did not arrive within `timeout`.
void meetMembers(c10d::Store& store, const std::string& prefix, const CommunicatorInfo& info,
                 const std::string& groupName, std::chrono::milliseconds timeout);

}  // namespace nccl_migrate::backends
