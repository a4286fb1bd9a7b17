// The simulated NCCL: an NcclApi over the simulated device, for tests. A test double, never a
// backend users can select. Ranks are real processes; a communicator's members meet through a
// c10d Store (the unique id names the rendezvous, so ranks holding different ids wait for each
// other until the store times out, as NCCL hangs). Ops run on their stream's worker when it
// reaches them and complete when every participant's contribution has arrived; calls between
// groupStart and groupEnd are deferred to groupEnd and progress together, so grouped sends and
// receives cannot deadlock while a lone send waits for its receiver, as in NCCL; a one-rank
// communicator's collectives are queued when called, as NCCL launches them. A launch first
// connects what NCCL connects on first use (each collective algorithm, each p2p direction) and
// waits there, on the calling thread, for the peers to connect too; ranks that posted collectives
// of different shapes for one op wait for each other until aborted, as NCCL's kernels do.
// ncclCommDestroy returns once the stream has passed the communicator's ops (or at once, freeing
// nothing, when the communicator holds an error or is not ready), and so does ncclCommAbort,
// after setting only its own communicator's abort flag. NCCL_COMM_BLOCKING is read as NCCL reads
// it: through NCCL's config files too, once per process. A call before a nonblocking
// communicator is ready answers ncclInvalidArgument and leaves it failed. Each behaviour and the
// NCCL source it follows: docs/simulated-nccl.md. Using a
// communicator after ncclCommAbort or ncclCommDestroy, or calling it while another thread is
// inside a call on it, ends the process with a message.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "nccl/nccl_api.h"
#include "nccl/nccl_communicator.h"
#include "sim_device.h"

namespace nccl_migrate::sim {

// Faults to inject, per process (read from the environment by faultsFromEnvironment()).
struct Faults {
  // The n-th collective (1-based, per communicator) this rank runs never finishes...
  std::optional<uint64_t> stallAt;
  // ...or finishes never and raises ncclRemoteError as NCCL's asynchronous error.
  std::optional<uint64_t> asyncErrorAt;
  // The first call of this name ("ncclSend") fails with ncclInternalError when it is made.
  std::optional<std::string> failCall;
  // A peer fails just as a communicator is destroyed: NCCL holds this error from the start of
  // ncclCommDestroy, after every earlier ncclCommGetAsyncError answered none.
  std::optional<ncclResult_t> errorAtDestroy;
};
// NCCL_MIGRATE_SIM_STALL_AT, NCCL_MIGRATE_SIM_ASYNC_ERROR_AT.
Faults faultsFromEnvironment();

struct SimComm;

// Tasks it queues on a stream hold it (shared_from_this): a stream may still run one after the
// last communicator let the API go.
class SimNcclApi final : public backends::nccl::NcclApi, public std::enable_shared_from_this<SimNcclApi> {
 public:
  SimNcclApi(c10::intrusive_ptr<c10d::Store> store, std::shared_ptr<SimRuntime> runtime, Faults faults = {});

  const char* errorString(ncclResult_t result) override;
  ncclResult_t getUniqueId(ncclUniqueId* id) override;
  ncclResult_t commInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                  ncclConfig_t* config) override;
  ncclResult_t commGetAsyncError(ncclComm_t comm, ncclResult_t* state) override;
  ncclResult_t commAbort(ncclComm_t comm) override;
  ncclResult_t commDestroy(ncclComm_t comm) override;
  ncclResult_t allReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                         ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                         cudaStream_t stream) override;
  ncclResult_t reduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                      ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t allGather(const void* send, void* recv, size_t sendCount, ncclDataType_t type, ncclComm_t comm,
                         cudaStream_t stream) override;
  ncclResult_t reduceScatter(const void* send, void* recv, size_t recvCount, ncclDataType_t type, ncclRedOp_t op,
                             ncclComm_t comm, cudaStream_t stream) override;
  ncclResult_t send(const void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                    cudaStream_t stream) override;
  ncclResult_t recv(void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                    cudaStream_t stream) override;
  ncclResult_t groupStart() override;
  ncclResult_t groupEnd() override;
  ncclResult_t redOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type,
                                    ncclScalarResidence_t residence, ncclComm_t comm) override;
  ncclResult_t redOpDestroy(ncclRedOp_t op, ncclComm_t comm) override;

  // For tests: the calls made, in order ("ncclAllReduce", ...), and PREMUL_SUM ops alive.
  std::vector<std::string> calls();
  int livePreMulSumOps() const { return livePreMulSums_.load(); }
  // How often a nonblocking communicator answered a call with ncclInProgress (its group's
  // launch still running).
  int inProgressReturns() const { return inProgressReturns_.load(); }
  // Communicators made and not freed yet (by ncclCommAbort or ncclCommDestroy).
  int liveCommunicators() const { return liveCommunicators_.load(); }
  // Every live communicator without an error gets `error` as NCCL's asynchronous error, as
  // NCCL's proxy reports a peer's failure (ncclCommGetAsyncError reads proxyState->asyncResult,
  // src/init.cc 2711 / 3455) while no op is pending.
  void failWhileIdle(ncclResult_t error);

  struct Op;

 private:
  SimComm* live(ncclComm_t comm, const char* call);
  // An op of `kind` on `comm`, checked live; `root` is the peer of a send or recv.
  Op opOf(int kind, const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t redOp, int root,
          ncclComm_t comm, cudaStream_t stream, const char* call);
  static bool launchesWhenCalled(const Op& op);
  ncclResult_t submit(Op op);
  // NCCL's group launch: connects what the ops need first, then queues them on their streams; in
  // nonblocking mode on a thread of its own, answering ncclInProgress.
  ncclResult_t launch(std::vector<Op> ops);
  // Says in the store that this rank's bootstrap listener for `sim` is closed.
  void closeListener(const SimComm& sim);
  // commReclaim: waits until the stream passed the communicator's ops, then frees it (once).
  void reclaim(SimComm& sim);
  ncclResult_t connectAndQueue(const std::vector<Op>& ops);
  // Queues ops that launch together on `stream`; their communicators count them until it ran them.
  void queue(SimStream* stream, std::vector<Op> ops);
  // Connects what the ops need and NCCL has not connected, waiting for the peers to connect too;
  // ncclSystemError once the communicator was aborted or the store is gone.
  ncclResult_t connect(const std::vector<Op>& ops);
  // Which collective algorithm an op connects (docs/simulated-nccl.md).
  static std::string algorithmOf(const Op& op);
  struct Exchange;
  // Runs ops that launch together on one stream: reads their contributions, lets `transfer`
  // exchange them through the store on a thread of its own, and writes what came back, unless
  // the communicator was aborted first; a store that fails meanwhile becomes the ops'
  // communicators' asynchronous error.
  void run(const std::vector<Op>& ops);
  // Reads the ops' contributions and starts their exchange on its thread.
  std::shared_ptr<Exchange> startExchange(const std::vector<Op>& ops);
  // Posts every contribution, then collects; false when an abort stopped it first.
  bool transfer(Exchange& exchange);
  void note(const char* call);

  c10::intrusive_ptr<c10d::Store> store_;
  std::shared_ptr<SimRuntime> runtime_;
  Faults faults_;
  std::atomic<int> livePreMulSums_{0};
  std::atomic<int> inProgressReturns_{0};
  std::atomic<int> liveCommunicators_{0};
  std::mutex commsMutex_;
  std::vector<SimComm*> made_;  // never deleted (tombstones once freed)
  std::atomic<bool> failCallSpent_{false};
  std::mutex callsMutex_;
  std::vector<std::string> calls_;
};

// Seams for the NCCL communicator over the simulated device, rendezvousing through `store`.
std::shared_ptr<const backends::NcclSeams> simulatedSeams(c10::intrusive_ptr<c10d::Store> store,
                                                         Faults faults = faultsFromEnvironment());

}  // namespace nccl_migrate::sim
