// Observers of the ops a toolkit backend issues: the flight recorder is one, and anything else
// that wants every op, whether Python or C++ (DDP's reducer, FSDP) issued it, can be another.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace nccl_migrate::backends {

// One op as the engine issued it, described once for every observer.
struct IssuedOp {
  std::string backendName;  // torch's name of the behaviour: "nccl2", "nccl"
  std::string groupName, groupDesc;
  std::string name;  // torch's flight-recorder op name: "all_reduce", "send", "coalesced"
  c10d::OpType type = c10d::OpType::UNKNOWN;
  uint64_t collectiveSeq = 0, p2pSeq = 0, opId = 0;
  bool isP2P = false;
  int rank = 0;   // group rank of this process
  int peer = -1;  // group rank of the other side, for p2p
  // A member of the job's coalescing batch; the batch itself is issued as "coalesced" when it ends.
  bool inBatch = false;
  std::chrono::milliseconds timeout{0};
  std::vector<at::Tensor> inputs, outputs;
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // On the issuing thread, before the op runs. A token means "tell me when it settles".
  virtual std::optional<uint64_t> onIssued(const IssuedOp& op) = 0;
  // Once, when an op this observer took a token for completed (error null) or failed; possibly
  // on another thread.
  virtual void onSettled(uint64_t token, const std::exception_ptr& error) = 0;
};

// The observers that asked to hear when an op settles, each with its token.
using SettleListeners = std::vector<std::pair<std::shared_ptr<OpObserver>, uint64_t>>;

// Tells each listener once; an observer that throws is logged, never allowed to stop the op or
// the thread that settles it (often the watchdog, which every group of the process needs).
void notifySettled(const SettleListeners& listeners, const std::exception_ptr& error) noexcept;

}  // namespace nccl_migrate::backends
