// Device communicator: one NCCL communicator with its own stream on one device, over the two
// seams (NcclApi, DeviceRuntime), so the same code runs on a GPU and on the simulated device of
// the tests. Every op is ordered after the caller's current stream, runs on the communicator's
// stream, and keeps every tensor it reads or writes, temporaries included, until the stream has
// passed it. Before NCCL may connect on first use (which blocks the calling thread until the
// peers connect too: each new p2p direction, and each collective algorithm, so before the first
// collective of each shape), the members meet in the store within the group's timeout, so a peer
// that never comes fails the op instead of hanging the caller before any work exists.
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "comm_handle.h"
#include "device_runtime.h"
#include "nccl_api.h"
#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

// What the NCCL communicator runs on: libnccl and CUDA in production, a simulation in tests.
struct NcclSeams {
  std::shared_ptr<nccl::NcclApi> api;
  std::shared_ptr<nccl::DeviceRuntime> runtime;
};

class NcclCommunicator final : public Communicator {
 public:
  // Rendezvous through `store` under `storePrefix`: every member announces itself and waits for
  // the others within `timeout` (the group's), then the communicator's rank 0 publishes the NCCL
  // unique id and the others read it. A member that never comes (a peer that died before a lazy
  // communicator's first op) fails the creation instead of blocking in ncclCommInitRank forever.
  static std::unique_ptr<NcclCommunicator> create(const c10::intrusive_ptr<c10d::Store>& store,
                                                  const std::string& storePrefix, CommunicatorInfo info,
                                                  const std::string& groupName, FutureOrder futureOrder,
                                                  const DeviceCommOptions& options, NcclSeams seams,
                                                  std::chrono::milliseconds timeout);
  ~NcclCommunicator() override;

  const CommunicatorInfo& info() const override { return info_; }
  std::unique_ptr<InFlight> allReduce(at::Tensor& tensor, const Reduction& reduction) override;
  std::unique_ptr<InFlight> broadcast(at::Tensor& tensor, int root) override;
  std::unique_ptr<InFlight> reduce(at::Tensor& tensor, int root, const Reduction& reduction) override;
  std::unique_ptr<InFlight> allGather(at::Tensor& output, at::Tensor& input) override;
  std::unique_ptr<InFlight> reduceScatter(at::Tensor& output, at::Tensor& input, const Reduction& reduction) override;
  std::unique_ptr<InFlight> allToAll(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& outputSplits,
                                     const std::vector<int64_t>& inputSplits) override;
  std::unique_ptr<InFlight> send(at::Tensor& tensor, int peer) override;
  std::unique_ptr<InFlight> recv(at::Tensor& tensor, int peer) override;
  void beginBatch() override;
  void copyAfterBatch(const at::Tensor& to, const at::Tensor& from) override;
  std::unique_ptr<InFlight> endBatch() override;
  void abort() override;

  struct OpenBatch;  // the NCCL group of a coalescing batch, open until endBatch

  // How many collective shapes (and batch sequences) the members meet for, at most, per
  // communicator: NCCL has 7 collective algorithms, so a job meets for the shapes it starts with
  // and its store work stays bounded whatever sizes it uses later (meetBeforeConnecting).
  static constexpr size_t kMostCollectiveMeetings = 64;

 private:
  // The connections NCCL makes when an op first needs them, inside the call that launches it,
  // waiting there for the peers to make theirs: the collective ones (every member), for the
  // algorithm NCCL picks for this collective's shape, and one per p2p direction, (sender,
  // receiver) in communicator ranks.
  struct Connections {
    std::string collectiveShape;  // empty: no collective
    std::vector<std::pair<int, int>> directions;
  };
  // How one op is put on the stream: its NCCL calls, the tensors it uses, what it connects.
  struct Launch {
    std::string_view op;
    std::vector<at::Tensor> tensors;
    std::function<void(ncclComm_t, cudaStream_t)> issue;
    Connections connects;
  };
  // Where the members meet before NCCL connects: the group's store, under the communicator's
  // own prefix, within the group's timeout.
  struct MeetingPlace {
    c10::intrusive_ptr<c10d::Store> store;
    std::string prefix;
    std::chrono::milliseconds timeout;
  };

  NcclCommunicator(CommunicatorInfo info, std::string groupName, FutureOrder futureOrder, NcclSeams seams,
                   std::shared_ptr<nccl::CommHandle> handle, nccl::StreamRef stream, MeetingPlace meetingPlace);
  nccl::CallSite site(std::string_view op) const { return handle_->site(op); }
  std::unique_ptr<InFlight> launch(Launch launch);
  // Meets the peers of the connections `needs` that NCCL has not made yet; the error of a meeting
  // that failed (the peers named), else nullptr.
  std::exception_ptr meetBeforeConnecting(const Connections& needs);
  // Whether `needs` names a p2p direction not connected yet (never on a one-rank communicator).
  bool connectsNewDirections(const Connections& needs) const;
  // A collective connects the algorithm NCCL picks for it, which only NCCL knows: so its shape
  // stands for it, at the grain of NCCL's choice: `op`, the reduction, the element type of
  // `count` and the power of two at or above the bytes NCCL sizes the op by (nccl_communicator.cc).
  // One of no elements connects nothing: NCCL discards it at the call (taskAppend, src/enqueue.cc).
  Connections collectiveConnections(std::string_view op, const at::Tensor& count, std::string_view reduction = "") const;
  // Whether NCCL launches this communicator's collectives when they are called, group or not.
  bool launchesWhenCalled() const;
  // The communicator's stream waits for what the job queued on `caller` so far.
  void waitFor(const nccl::StreamRef& caller);
  void noteBatchCaller(const nccl::StreamRef& caller);
  std::unique_ptr<InFlight> finished(std::string_view op, std::vector<at::Tensor> stash, bool captured);

  CommunicatorInfo info_;
  std::string groupName_;
  FutureOrder futureOrder_;
  NcclSeams seams_;
  std::shared_ptr<nccl::CommHandle> handle_;
  nccl::StreamRef stream_;
  MeetingPlace meetingPlace_;
  // The collective shapes (and batch shape sequences) the members met for: at most
  // kMostCollectiveMeetings, past which a new shape connects without a meeting.
  std::set<std::string> collectiveShapesMet_;
  std::set<std::pair<int, int>> directionsConnected_;
  std::unique_ptr<OpenBatch> batch_;
};

}  // namespace nccl_migrate::backends
