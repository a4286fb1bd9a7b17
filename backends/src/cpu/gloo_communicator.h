// CPU communicator: one torch Gloo backend (its own context and connections) per communicator.
#pragma once

#include <memory>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(CommunicatorInfo info, c10::intrusive_ptr<c10d::Backend> gloo);
  const CommunicatorInfo& info() const override { return info_; }
  std::unique_ptr<InFlight> allReduce(at::Tensor& tensor, const c10d::ReduceOp& op) override;
  void abort() override;

 private:
  CommunicatorInfo info_;
  c10::intrusive_ptr<c10d::Backend> gloo_;
};

}  // namespace nccl_migrate::backends
