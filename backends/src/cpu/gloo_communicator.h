// CPU communicator: one torch Gloo backend (its own context and connections) per communicator.
// Ops are forwarded to it; reductions Gloo lacks (AVG, PREMUL_SUM) are composed from SUM so the
// CPU path computes what NCCL computes.
#pragma once

#include <memory>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

struct AbortSignal;  // pending ops fail when the communicator is aborted

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(CommunicatorInfo info, c10::intrusive_ptr<c10d::Backend> gloo);
  ~GlooCommunicator() override;
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

 private:
  c10d::Backend& gloo();
  // Wraps an issued Gloo op; inside a batch it joins the batch and a handle comes back.
  std::unique_ptr<InFlight> track(c10::intrusive_ptr<c10d::Work> work, bool hasFuture = true);
  // The reduction Gloo runs for `op` (premultiplying `input` for PREMUL_SUM), and the InFlight
  // of the op Gloo issued for it (averaging `result`, where this rank has one, for AVG).
  static c10d::ReduceOp asGlooSum(const c10d::ReduceOp& op, at::Tensor& input);
  std::unique_ptr<InFlight> summed(c10::intrusive_ptr<c10d::Work> work, const c10d::ReduceOp& op, at::Tensor* result,
                                   bool hasFuture = true);

  CommunicatorInfo info_;
  c10::intrusive_ptr<c10d::Backend> gloo_;
  bool batching_ = false;
  std::vector<std::unique_ptr<InFlight>> batch_;
  std::shared_ptr<AbortSignal> abortSignal_;
};

}  // namespace nccl_migrate::backends
