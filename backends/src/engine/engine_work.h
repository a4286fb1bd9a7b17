// The Work object every engine op returns: completion, timeout and errors with the op's
// identity (op, group, rank, sequence number) in every message.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

class EngineWork final : public c10d::Work {
 public:
  EngineWork(int rank, c10d::OpType type, uint64_t sequence, std::string description,
             std::unique_ptr<InFlight> inFlight, std::vector<at::Tensor> outputs,
             std::chrono::milliseconds defaultTimeout);

  bool isCompleted() override;
  bool isSuccess() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override { return sequence_; }
  std::chrono::milliseconds getTimeout() const override { return defaultTimeout_; }

 private:
  // Wraps a failure in an error that names the op; what() keeps the cause's text.
  std::exception_ptr withContext(const std::exception_ptr& cause) const;

  uint64_t sequence_;
  std::string description_;
  std::unique_ptr<InFlight> inFlight_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds defaultTimeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace nccl_migrate::backends
