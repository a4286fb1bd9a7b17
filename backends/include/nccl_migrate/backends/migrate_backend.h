// The engine: one c10d::Backend for every behaviour. It owns Work objects, sequence numbers,
// timeouts, error state, coalescing and the flight recorder; a CommunicatorPolicy decides which
// communicator an op runs on and a CommunicatorFactory makes communicators real (NCCL for
// CUDA, Gloo for CPU). The engine never asks which behaviour it runs.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "nccl_migrate/backends/communicator.h"
#include "nccl_migrate/backends/communicator_policy.h"
#include "nccl_migrate/backends/engine_services.h"

// `override` only where this torch declares the method (cmake/TorchFeatures.cmake).
#if NCCL_MIGRATE_TORCH_HAS_ABORT_HOOKS
#define NCCL_MIGRATE_OVERRIDES_IF_ABORT_HOOKS override
#else
#define NCCL_MIGRATE_OVERRIDES_IF_ABORT_HOOKS
#endif
#if NCCL_MIGRATE_TORCH_HAS_SHRINK
#define NCCL_MIGRATE_OVERRIDES_IF_SHRINK override
#else
#define NCCL_MIGRATE_OVERRIDES_IF_SHRINK
#endif
#if NCCL_MIGRATE_TORCH_HAS_SINGLE_COLLECTIVE_NAMES
#define NCCL_MIGRATE_OVERRIDES_IF_SINGLE_NAMES override
#else
#define NCCL_MIGRATE_OVERRIDES_IF_SINGLE_NAMES
#endif
#if NCCL_MIGRATE_TORCH_HAS_GATHER_SINGLE
#define NCCL_MIGRATE_OVERRIDES_IF_GATHER_SINGLE override
#else
#define NCCL_MIGRATE_OVERRIDES_IF_GATHER_SINGLE
#endif

namespace nccl_migrate::backends {

struct GroupOptions {
  std::string groupName;
  std::string groupDesc;
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  std::vector<uint64_t> globalRanks;       // empty: the group is the world, in rank order
  std::optional<c10::Device> boundDevice;  // explicit device_id (or the policy's fallback)
  // torch's enable_reconfigure: no communicator and no op until reconfigure() names the members.
  bool enableReconfigure = false;
  // TORCH_NCCL_BLOCKING_WAIT: wait() blocks the host until the op ends.
  bool blockingWait = false;
  // TORCH_NCCL_ASYNC_ERROR_HANDLING other than 0: an op that fails (NCCL's asynchronous error,
  // a transport that lost its peer, a communicator that could not meet its peers) aborts the
  // group's communicators, as a timeout does, so no other op of the group waits on a dead peer.
  bool abortOnFailure = true;
  // pg_options (ProcessGroupNCCL.Options) and TORCH_NCCL_USE_COMM_NONBLOCKING.
  DeviceCommOptions deviceComms;
  // How long a communicator being created waits for its members: the group's timeout, unless
  // its members are known to come at different times (a shrunk group, see shrink()).
  std::optional<std::chrono::milliseconds> connectTimeoutOverride;
  std::chrono::milliseconds connectTimeout() const { return connectTimeoutOverride.value_or(timeout); }
};

// Applies torch's NCCL environment (parsed by the shim) to a group's options; throws ValueError
// naming a variable torch would not take.
void applyNcclEnvironment(GroupOptions& options);

// Makes the policy of a new group (split children get a fresh one of the same behaviour).
using PolicyMaker = std::function<std::unique_ptr<CommunicatorPolicy>(int groupRank, int groupSize)>;
// Makes the communicator factory of a new group over its store.
using FactoryMaker = std::function<std::shared_ptr<CommunicatorFactory>(const c10::intrusive_ptr<c10d::Store>& store,
                                                                        const GroupOptions& options)>;

class EngineWork;
namespace lowering {
struct Target;  // engine/lowering.h
}

class MigrateBackend final : public c10d::Backend {
 public:
  MigrateBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, GroupOptions options,
                 PolicyMaker makePolicy, FactoryMaker makeFactory,
                 std::shared_ptr<EngineServices> services = EngineServices::process());
  ~MigrateBackend() override;
  // Runs when the last strong reference goes, on that thread (usually the job's, holding the
  // GIL): frees communicators and the Python callables behind them there, not later on the
  // watchdog thread that may hold the last weak reference.
  void release_resources() override;

  const std::string getBackendName() const override { return backendName_; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
  uint64_t getSequenceNumberForGroup() override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  c10d::ErrorType getError() override;

  bool supportsSplitting() const override { return true; }
  bool supportsCoalescing() const override { return true; }
  // Older torch (2.11) lacks some of these (cmake/TorchFeatures.cmake): the engine's own
  // implementation stays, it only cannot override what torch does not declare.
#if NCCL_MIGRATE_TORCH_HAS_ABORT_HOOKS
  bool supportsAbortHooks() const override { return true; }
#endif
#if NCCL_MIGRATE_TORCH_HAS_SHRINK
  bool supportsShrinking() const override { return true; }
#endif
#if NCCL_MIGRATE_TORCH_HAS_RECONFIGURE
  bool supportsReconfigure() const override { return true; }
#endif

  // Abort hooks run (on the watchdog thread) when an op of this group times out or fails,
  // before the flight recorder is dumped and the group aborted; torch's HealthCheckHook uses
  // them to mark the backend unhealthy.
  void registerAbortHook(int64_t hookId, c10d::AbortHook hook) NCCL_MIGRATE_OVERRIDES_IF_ABORT_HOOKS;
  void unregisterAbortHook(int64_t hookId) NCCL_MIGRATE_OVERRIDES_IF_ABORT_HOOKS;

  // Membership changes (membership.cc). shrink: a new backend over the surviving ranks, with
  // torch nccl2's preconditions and error texts; only survivors call it, so it works with the
  // excluded ranks dead. reconfigure: this backend re-formed over the ranks whose handles are
  // given, in a fresh rendezvous namespace per uuid.
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
                                           const c10::intrusive_ptr<c10d::Backend::Options>& optsOverride)
      NCCL_MIGRATE_OVERRIDES_IF_SHRINK;
#if NCCL_MIGRATE_TORCH_HAS_RECONFIGURE
  c10d::ReconfigureHandle get_reconfigure_handle() const override;
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions& opts) override;
#endif

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts)
      NCCL_MIGRATE_OVERRIDES_IF_SINGLE_NAMES;
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions& opts)
      NCCL_MIGRATE_OVERRIDES_IF_SINGLE_NAMES;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather_single(at::Tensor& output, at::Tensor& input,
                                               const c10d::GatherOptions& opts)
      NCCL_MIGRATE_OVERRIDES_IF_GATHER_SINGLE;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(at::Tensor& output, at::Tensor& input,
                                                       const c10d::ReduceScatterOptions& opts)
      NCCL_MIGRATE_OVERRIDES_IF_SINGLE_NAMES;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts)
      NCCL_MIGRATE_OVERRIDES_IF_SINGLE_NAMES;
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& outputSplits,
                                                   std::vector<int64_t>& inputSplits,
                                                   const c10d::AllToAllOptions& opts)
      NCCL_MIGRATE_OVERRIDES_IF_SINGLE_NAMES;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
#if !NCCL_MIGRATE_TORCH_HAS_SINGLE_COLLECTIVE_NAMES
  // An older torch calls these names for the ops above.
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    return all_gather_single(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override {
    return all_gather_single_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_single(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_single_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override {
    return all_to_all_single(output, input, outputSplits, inputSplits, opts);
  }
#endif
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;
  void eagerConnectSingleDevice(at::Device device) override;
  // Marks the group aborted (its ops are refused from here on) and aborts its communicators
  // together, off mutex_, each on a thread of its own; waits for them at most kAbortWait and,
  // past it, logs an error naming those still aborting, which go on in the background
  // (docs/backends.md, "Abort").
  void abort() override;
  void shutdown() override;

  // Live communicators of this group, in creation order.
  std::vector<CommunicatorInfo> communicators() const;
  std::string policyName() const;
  const GroupOptions& groupOptions() const { return options_; }
  const std::string& groupName() const { return options_.groupName; }
  uint64_t globalRank() const;

  // Called when an op of this group timed out or failed: records the error now, then on the
  // watchdog thread runs the abort hooks, dumps the flight recorder once, and aborts the group's
  // communicators (on timeout; on any failure unless TORCH_NCCL_ASYNC_ERROR_HANDLING=0) so that
  // every other pending op fails too instead of hanging. `generation`: the membership the op
  // failed in (the caller checked it was current when the op settled, before anyone could see
  // the failure): its hooks and dump run once per generation; the error state and the abort
  // only while that membership is still the group's (the abort may keep a later failure's
  // report waiting behind it, kAbortWait at most).
  void onOpFailure(bool timedOut, const std::string& what, uint64_t generation);
  uint64_t generation() const { return generation_.load(); }

 private:
  struct Op;  // what one call issues: name, type, tensors, peer
  using Run = std::function<std::unique_ptr<InFlight>(Communicator&, const CommunicatorRequest&)>;

  c10::intrusive_ptr<c10d::Work> issue(Op op, const CommunicatorRequest& where, const Run& run);
  static Op timed(Op op, std::chrono::milliseconds timeout);
  // Issues `count` ops (issueNth(0..count-1)) as one coalescing batch and returns its work.
  using IssueNth = std::function<c10::intrusive_ptr<c10d::Work>(size_t)>;
  c10::intrusive_ptr<c10d::Work> asOneBatch(size_t count, const IssueNth& issueNth);
  void abandonBatch(const std::exception_ptr& error);
  // all_gather and reduce_scatter whose lists differ in size between ranks.
  c10::intrusive_ptr<c10d::Work> allGatherUneven(std::vector<at::Tensor>& outputs, const at::Tensor& input);
  c10::intrusive_ptr<c10d::Work> reduceScatterUneven(at::Tensor& output, std::vector<at::Tensor>& inputs,
                                                     const c10d::ReduceScatterOptions& opts);
  Communicator& communicatorFor(const CommunicatorRequest& request);
  // Where an op lowered onto primitives (engine/lowering.h) runs: on `comm`, inside the job's
  // batch when one is open.
  lowering::Target onto(Communicator& comm) const;
  c10::Device barrierDevice(const c10d::BarrierOptions& opts) const;
  std::string describeOp(const std::string& op, uint64_t seq) const;
  IssuedOp describeIssued(std::string name, c10d::OpType type, uint64_t seq, std::chrono::milliseconds timeout) const;
  // Tells every observer of the services about `issued`; returns those to tell when it settles.
  SettleListeners notifyIssued(const IssuedOp& issued) const;
  void checkUsable() const;
  // mutex_, once checkUsable passed; refused at once, without waiting for the lock, once the
  // group is aborted.
  std::unique_lock<std::mutex> lockUsable() const;
  // Aborts every communicator so pending ops fail, and forgets them; the backend stays usable
  // once new communicators are made.
  void dropCommunicators();
  // Creates what the policy wants at group creation (eager policies).
  void connectEagerly();
  void registerWithFlightRecorder();
  void runAbortHooks();
  void handleFailure(bool timedOut, const std::string& what, uint64_t generation);
  // abort(), unless a reconfigure replaced `generation` meanwhile.
  void abortIfGeneration(uint64_t generation);
  // mutex_ held: marks the group aborted and returns its communicators, for abortTogether.
  std::vector<std::shared_ptr<Communicator>> markAbortedLocked();
  // Aborts `comms` on threads of their own, all started before any is waited for (NCCL's abort
  // of one may wait for a kernel that only another's abort ends), within kAbortWait; mutex_ not held.
  void abortTogether(std::vector<std::shared_ptr<Communicator>> comms) const;
  void requireReachableStore() const;

  std::shared_ptr<EngineServices> services_;  // first: what the ops below report to outlives them
  c10::intrusive_ptr<c10d::Store> store_;
  GroupOptions options_;
  PolicyMaker makePolicy_;
  FactoryMaker makeFactory_;
  std::unique_ptr<CommunicatorPolicy> policy_;
  std::shared_ptr<CommunicatorFactory> factory_;
  std::string backendName_;
  // host:pid:n, unique to this backend instance; reconfigure handles are built from it.
  std::string instanceTag_;

  mutable std::mutex mutex_;
  // Shared with the threads that abort them, which may outlive the map's hold (abortTogether).
  std::map<std::string, std::shared_ptr<Communicator>> communicators_;
  std::vector<std::string> creationOrder_;
  uint64_t collectiveSeq_ = 0;
  uint64_t p2pSeq_ = 0;
  uint64_t opId_ = 0;
  // Set under mutex_, read without it by a caller that finds the lock held (lockUsable).
  std::atomic<bool> aborted_{false};
  std::atomic<bool> awaitingReconfigure_{false};
  std::set<int64_t> usedReconfigureUuids_;
  int shrinkCount_ = 0;
  // Ops issued and not yet settled (shrink without SHRINK_ABORT requires none).
  std::shared_ptr<std::atomic<int64_t>> unsettled_ = std::make_shared<std::atomic<int64_t>>(0);
  std::mutex hooksMutex_;
  std::map<int64_t, c10d::AbortHook> abortHooks_;
  std::atomic<int> error_{0};  // c10d::ErrorType
  // The membership generation, bumped by each reconfigure (under generationMutex_, which also
  // orders the error state a failure of one generation sets; its abort checks it under mutex_).
  std::mutex generationMutex_;
  std::atomic<uint64_t> generation_{0};
  // The last generation whose failure ran the abort hooks and the dump (watchdog thread only):
  // once per failure, as torch; a reconfigure's new generation gets its own.
  int64_t handledGeneration_ = -1;
  int splitCount_ = 0;

  // The open coalescing batch, if any.
  struct Batch;
  std::unique_ptr<Batch> batch_;
};

}  // namespace nccl_migrate::backends
