// Engine pieces shared by its source files (not part of the public header).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/in_flight_sets.h"
#include "nccl_migrate/backends/migrate_backend.h"

namespace nccl_migrate::backends {

// What one backend call issues.
struct MigrateBackend::Op {
  std::string name;  // torch's flight-recorder op name: "all_reduce", "send", ...
  c10d::OpType type;
  c10::Device device;
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> outputs;
  bool isP2P = false;
  int peer = -1;  // group rank, for p2p
  // The op's own timeout (torch's per-op options, barrier(timeout=) in Python); unset: the group's.
  std::chrono::milliseconds timeout = c10d::kUnsetTimeout;
};

// The open coalescing batch: the communicator it runs on, and the slot its members and the
// endCoalescing work share.
struct MigrateBackend::Batch {
  Communicator* communicator = nullptr;
  std::string key;
  DeferredInFlight::Slot slot = std::make_shared<std::shared_ptr<InFlight>>();
  std::vector<at::Tensor> inputs, outputs;
  size_t ops = 0;
};

}  // namespace nccl_migrate::backends
