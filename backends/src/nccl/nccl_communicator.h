// CUDA communicator: one NCCL communicator with its own stream on one device. Every op is
// ordered after the caller's current stream, runs on the communicator's stream, and keeps its
// tensors alive in the caching allocator until that stream has passed them.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "nccl_api.h"
#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

class NcclCommunicator final : public Communicator {
 public:
  // Rendezvous through `store` under `storePrefix`: the communicator's rank 0 publishes the
  // NCCL unique id, the others read it (the store's timeout bounds the wait).
  static std::unique_ptr<NcclCommunicator> create(const c10::intrusive_ptr<c10d::Store>& store,
                                                  const std::string& storePrefix, CommunicatorInfo info,
                                                  const std::string& groupName);
  ~NcclCommunicator() override;

  const CommunicatorInfo& info() const override { return info_; }
  std::unique_ptr<InFlight> allReduce(at::Tensor& tensor, const c10d::ReduceOp& op) override;
  std::unique_ptr<InFlight> broadcast(at::Tensor& tensor, int root) override;
  std::unique_ptr<InFlight> reduce(at::Tensor& tensor, int root, const c10d::ReduceOp& op) override;
  std::unique_ptr<InFlight> allGather(std::vector<at::Tensor>& outputs, at::Tensor& input) override;
  std::unique_ptr<InFlight> allGatherInto(at::Tensor& output, at::Tensor& input) override;
  std::unique_ptr<InFlight> reduceScatter(at::Tensor& output, std::vector<at::Tensor>& inputs,
                                          const c10d::ReduceOp& op) override;
  std::unique_ptr<InFlight> reduceScatterFrom(at::Tensor& output, at::Tensor& input, const c10d::ReduceOp& op) override;
  std::unique_ptr<InFlight> allToAll(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs) override;
  std::unique_ptr<InFlight> allToAllSingle(at::Tensor& output, at::Tensor& input,
                                           const std::vector<int64_t>& outputSplits,
                                           const std::vector<int64_t>& inputSplits) override;
  std::unique_ptr<InFlight> gather(std::vector<at::Tensor>& outputs, at::Tensor& input, int root) override;
  std::unique_ptr<InFlight> scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) override;
  std::unique_ptr<InFlight> send(at::Tensor& tensor, int peer) override;
  std::unique_ptr<InFlight> recv(at::Tensor& tensor, int peer) override;
  std::unique_ptr<InFlight> barrier() override;
  void beginBatch() override;
  std::unique_ptr<InFlight> endBatch() override;
  void abort() override;

  struct BatchDone;  // the end event of the open batch, shared with its members

 private:
  NcclCommunicator(CommunicatorInfo info, std::string groupName, ncclComm_t comm, c10::cuda::CUDAStream stream);
  nccl::CallSite site(std::string_view op) const { return {op, groupName_, info_.rank}; }
  ncclComm_t comm(std::string_view op) const;
  void orderAfterCaller();
  // Issues `issue` on the communicator's stream and returns what tracks it.
  std::unique_ptr<InFlight> launch(std::string_view op, const std::vector<at::Tensor>& keepAlive,
                                   const std::function<void(ncclComm_t, cudaStream_t)>& issue);
  // Runs `issue` with a reduce op NCCL understands, creating (and freeing) PREMUL_SUM ops.
  void withNcclOp(const c10d::ReduceOp& op, const at::Tensor& like, const std::function<void(ncclRedOp_t)>& issue);

  CommunicatorInfo info_;
  std::string groupName_;
  ncclComm_t comm_;
  c10::cuda::CUDAStream stream_;
  std::shared_ptr<BatchDone> batch_;
};

}  // namespace nccl_migrate::backends
