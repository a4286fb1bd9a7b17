// The communicator interface every backend policy runs ops on. A communicator is one real
// transport context over a fixed set of ranks: its own NCCL communicator (nccl/) or its own Gloo
// context with its own connections (cpu/). Counts and costs of communicators are therefore real
// on both implementations.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace nccl_migrate::backends {

// An op a communicator has issued. Completion is observed, never assumed.
class InFlight {
 public:
  virtual ~InFlight() = default;
  // Non-blocking: true once the op finished (successfully or not).
  virtual bool isDone() = 0;
  // Blocks until done or `timeout` passes; throws on failure or timeout. For CUDA ops it also
  // makes the caller's current stream wait for the op.
  virtual void wait(std::chrono::milliseconds timeout) = 0;
  // Runs `callback` once the op is done (nullptr on success), possibly on another thread.
  virtual void onDone(std::function<void(std::exception_ptr)> callback) = 0;
};

// What a communicator is, for introspection: which policy made it and why.
struct CommunicatorInfo {
  std::string key;           // the policy's key: "cuda:0", "p2p:0:1", "cpu"
  std::string purpose;       // "collective" or "p2p"
  c10::Device device{c10::kCPU};
  int rank = 0;              // this process's rank in the communicator
  int size = 0;
  std::vector<int> groupRanks;  // group-local ranks the communicator spans, in its rank order
  std::chrono::system_clock::time_point createdAt;
  std::chrono::microseconds creationTime{0};
  std::optional<uint64_t> deviceMemoryBytes;  // when NCCL or CUDA can tell
  std::string implementation;  // "nccl" or "gloo"
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual const CommunicatorInfo& info() const = 0;
  virtual std::unique_ptr<InFlight> allReduce(at::Tensor& tensor, const c10d::ReduceOp& op) = 0;
  // Stops outstanding ops and frees the transport; later ops fail.
  virtual void abort() = 0;
};

// What a policy asks for when it needs a communicator; CommunicatorFactory makes it real.
struct CommunicatorRequest {
  std::string key;
  std::string purpose;
  c10::Device device{c10::kCPU};
  std::vector<int> groupRanks;  // members, group-local, ascending
  int myGroupRank = 0;
};

// Makes communicators over the group's store. All members must ask for the same key in the
// same order; the factory derives store prefixes from the key so rendezvous cannot cross.
class CommunicatorFactory {
 public:
  virtual ~CommunicatorFactory() = default;
  virtual std::unique_ptr<Communicator> create(const CommunicatorRequest& request) = 0;
};

}  // namespace nccl_migrate::backends
