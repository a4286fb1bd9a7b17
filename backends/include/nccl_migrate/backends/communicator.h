// The communicator interface every backend policy runs ops on. A communicator is one real
// transport context over a fixed set of ranks: its own NCCL communicator (nccl/) or its own Gloo
// context with its own connections (cpu/). Counts and costs of communicators are therefore real
// on both implementations.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "nccl_migrate/backends/reduction.h"
#include "nccl_migrate/backends/torch_compat.h"

namespace nccl_migrate::backends {

// The one error an op's wait raises when its time ran out, whatever the transport.
class OpTimedOut : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// When a future of a device op is complete, which differs between torch's behaviours: legacy
// completes it in the communicator's stream order and never touches the caller's stream (DDP's
// comm hooks overlap on that); nccl2 makes the caller's stream wait at getFuture().
enum class FutureOrder { CommunicatorStream, CallerStreamWaits };

// An op a communicator has issued. Completion is observed, never assumed.
class InFlight {
 public:
  virtual ~InFlight() = default;
  // Non-blocking: true once the op finished (successfully or not). For CUDA ops: once the
  // communicator's stream has passed the op.
  virtual bool isDone() = 0;
  // Non-blocking: the op's error once one is known (NCCL's asynchronous error, Gloo's failure).
  virtual std::exception_ptr failure() = 0;
  // Blocks the host until done or `timeout` passes; throws on failure, OpTimedOut on timeout.
  // For device ops it also makes the caller's current stream wait for the op.
  virtual void wait(std::chrono::milliseconds timeout) = 0;
  // torch's wait() without a timeout: for device ops, the caller's current stream waits for the
  // op and the host goes on (true). Host ops have no stream to order (false): the caller waits
  // on the host instead.
  virtual bool waitOnDevice() { return false; }
  // Whether the op runs on a device stream (NCCL) rather than on the host (Gloo).
  virtual bool onDevice() const { return false; }
  // The engine failed the op (an error or a timeout): its transport must not wait for it later,
  // when it frees what the op used.
  virtual void giveUp() {}
  // Runs `callback` once the result may be used, with the error (nullptr on success), possibly
  // on another thread. Device ops complete it in stream order, as torch's CUDA futures are, by
  // the communicator's FutureOrder.
  virtual void onDone(std::function<void(std::exception_ptr)> callback) = 0;
};

// How long an abort of a group waits for its communicators' aborts (Communicator::abort)
// before it reports those still running and lets them finish in the background. Like
// CommHandle's teardown bound: the aborting thread may be the watchdog every group needs.
inline constexpr std::chrono::milliseconds kAbortWait{2000};

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

// List forms a transport's library runs with a completion of its own, used instead of the
// engine's lowering. Gloo's gather, scatter and all-to-all complete through futures, while its
// send and receive complete only inside a wait(): lowered onto those, such ops could be neither
// watched nor completed until someone waited.
class NativeListOps {
 public:
  virtual ~NativeListOps() = default;
  // outputs (one per rank) is filled on the root only.
  virtual std::unique_ptr<InFlight> gather(std::vector<at::Tensor>& outputs, at::Tensor& input, int root) = 0;
  // inputs (one per rank) is read on the root only.
  virtual std::unique_ptr<InFlight> scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) = 0;
  virtual std::unique_ptr<InFlight> allToAll(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs) = 0;
};

// The primitives a transport implements; the engine lowers every other form onto them (list
// forms, uneven lists, gather, scatter, barrier, reduce ops). Ranks in these calls are
// communicator ranks (positions in CommunicatorInfo::groupRanks). Tensors arrive validated and
// as the transport carries them (bool as bytes, complex as real pairs). Inside a batch every
// primitive returns nullptr: the batch's InFlight, from endBatch, answers for it.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual const CommunicatorInfo& info() const = 0;

  virtual std::unique_ptr<InFlight> allReduce(at::Tensor& tensor, const Reduction& reduction) = 0;
  virtual std::unique_ptr<InFlight> broadcast(at::Tensor& tensor, int root) = 0;
  // Only the root's tensor receives the result; the others keep theirs.
  virtual std::unique_ptr<InFlight> reduce(at::Tensor& tensor, int root, const Reduction& reduction) = 0;
  // output is size() inputs laid end to end, rank order.
  virtual std::unique_ptr<InFlight> allGather(at::Tensor& output, at::Tensor& input) = 0;
  // input is size() outputs laid end to end; rank i receives the i-th part, reduced.
  virtual std::unique_ptr<InFlight> reduceScatter(at::Tensor& output, at::Tensor& input,
                                                  const Reduction& reduction) = 0;
  // Split sizes count rows (first dimension); empty means equal parts.
  virtual std::unique_ptr<InFlight> allToAll(at::Tensor& output, at::Tensor& input,
                                             const std::vector<int64_t>& outputSplits,
                                             const std::vector<int64_t>& inputSplits) = 0;
  virtual std::unique_ptr<InFlight> send(at::Tensor& tensor, int peer) = 0;
  virtual std::unique_ptr<InFlight> recv(at::Tensor& tensor, int peer) = 0;

  // Ops issued between beginBatch and endBatch form one launch (an NCCL group), so batched
  // sends and receives cannot deadlock on each other. The InFlight endBatch returns covers
  // every op of the batch.
  virtual void beginBatch() = 0;
  // Inside a batch: copies `from` into `to` after the batch's ops, before its InFlight is done
  // (in the communicator's stream order on a device). How lowered forms fill the job's tensors
  // from staging buffers and from this rank's own input.
  virtual void copyAfterBatch(const at::Tensor& to, const at::Tensor& from) = 0;
  virtual std::unique_ptr<InFlight> endBatch() = 0;

  // Stops outstanding ops and frees the transport; later ops fail. Never throws; idempotent, and
  // may be called from several threads at once. May block: NCCL's abort waits for every kernel
  // the communicator launched, and one queued behind another communicator's stuck op waits until
  // that one is aborted too. The engine therefore aborts a group's communicators together, each
  // on a thread of its own, and waits for them at most kAbortWait.
  virtual void abort() = 0;

  // The transport's own list forms, where it has them; null: the engine lowers them.
  virtual NativeListOps* nativeListOps() { return nullptr; }
};

// What a group asks of its NCCL communicators: torch's ProcessGroupNCCL.Options (its config and
// stream priority) and TORCH_NCCL_USE_COMM_NONBLOCKING. Unset fields keep NCCL's defaults.
struct DeviceCommOptions {
  std::optional<int> blocking;  // 0: NCCL's nonblocking mode (init and ops may return ncclInProgress)
  std::optional<int> maxCtas;
  std::optional<int> minCtas;
  std::optional<int> cgaClusterSize;
  std::optional<int> splitShare;
  bool highPriorityStream = false;
};

// What a policy asks for when it needs a communicator; CommunicatorFactory makes it real.
struct CommunicatorRequest {
  std::string key;
  std::string purpose;
  c10::Device device{c10::kCPU};
  std::vector<int> groupRanks;  // members, group-local, ascending
  int myGroupRank = 0;
  // Names the rendezvous: the same on every member, never device-dependent (members of one
  // communicator may sit on different devices): "collective", "p2p:1:3".
  std::string rendezvousKey;
  FutureOrder futureOrder = FutureOrder::CallerStreamWaits;
};

// Makes communicators over the group's store. All members must ask for the same key in the
// same order; the factory derives store prefixes from the key so rendezvous cannot cross.
class CommunicatorFactory {
 public:
  virtual ~CommunicatorFactory() = default;
  virtual std::unique_ptr<Communicator> create(const CommunicatorRequest& request) = 0;
};

}  // namespace nccl_migrate::backends
