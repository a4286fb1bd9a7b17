// CUDA communicator: one NCCL communicator with its own stream on one device.
#pragma once

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
  void abort() override;

 private:
  NcclCommunicator(CommunicatorInfo info, std::string groupName, ncclComm_t comm, c10::cuda::CUDAStream stream);
  nccl::CallSite site(std::string_view op) const { return {op, groupName_, info_.rank}; }

  CommunicatorInfo info_;
  std::string groupName_;
  ncclComm_t comm_;
  c10::cuda::CUDAStream stream_;
};

}  // namespace nccl_migrate::backends
