// The engine: one c10d::Backend for every behaviour. It owns Work objects, sequence numbers,
// timeouts and error context; a CommunicatorPolicy decides which communicator an op runs on
// and a CommunicatorFactory makes communicators real (NCCL for CUDA, Gloo for CPU).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "nccl_migrate/backends/communicator.h"
#include "nccl_migrate/backends/communicator_policy.h"

namespace nccl_migrate::backends {

struct GroupOptions {
  std::string groupName;
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  std::vector<uint64_t> globalRanks;
  std::optional<c10::Device> boundDevice;  // explicit device_id, when the job gave one
};

class MigrateBackend final : public c10d::Backend {
 public:
  MigrateBackend(int rank, int size, GroupOptions options, std::unique_ptr<CommunicatorPolicy> policy,
                 std::shared_ptr<CommunicatorFactory> factory);
  ~MigrateBackend() override;

  const std::string getBackendName() const override { return backendName_; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
  uint64_t getSequenceNumberForGroup() override;
  void setTimeout(std::chrono::milliseconds timeout) override;

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;

  void abort() override;
  void shutdown() override;

  // Live communicators of this group, in creation order.
  std::vector<CommunicatorInfo> communicators() const;
  const std::string& groupName() const { return options_.groupName; }

 private:
  Communicator& communicatorFor(const CommunicatorRequest& request);
  std::string describeOp(const char* op, uint64_t seq) const;

  GroupOptions options_;
  std::unique_ptr<CommunicatorPolicy> policy_;
  std::shared_ptr<CommunicatorFactory> factory_;
  std::string backendName_;

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Communicator>> communicators_;
  std::vector<std::string> creationOrder_;
  uint64_t sequence_ = 0;
  bool aborted_ = false;
};

}  // namespace nccl_migrate::backends
