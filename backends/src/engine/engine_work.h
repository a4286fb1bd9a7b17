// The Work object every engine op returns: completion, timeout and errors with the op's
// identity (op, backend, group, rank, sequence number) in every message.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "nccl_migrate/backends/communicator.h"
#include "nccl_migrate/backends/migrate_backend.h"
#include "nccl_migrate/backends/op_observer.h"

namespace nccl_migrate::backends {

// torch.distributed.DistBackendError on the Python side, like torch's own backends raise.
std::exception_ptr backendError(const std::string& message);
// An error's text without torch's C++ backtrace.
std::string messageOf(const std::exception_ptr& error);

class EngineWork final : public c10d::Work {
 public:
  struct Identity {
    c10d::OpType type;
    uint64_t sequence;
    std::string description;  // "allreduce (backend nccl2, group '0', rank 1, sequence number 4)"
    SettleListeners settleListeners;  // told once when the op settles
    // wait() without a timeout blocks the host (barrier, blocking-wait mode) instead of only
    // ordering the caller's stream after the op.
    bool waitBlocksHost = false;
    uint64_t generation = 0;  // the group's membership when the op was issued
    // The policy's (CommunicatorRequest::futureOrder). A device op in the communicator's stream
    // order has its future made and marked at issue, as torch's legacy collective() does right
    // after the op's end event, so that the future depends on this op alone, never on ops issued
    // after it; in the caller's stream order, at getFuture(), as nccl2's WorkNCCL does.
    FutureOrder futureOrder = FutureOrder::CallerStreamWaits;
  };

  // `unsettled`, when given, counts this work from construction until it settles.
  EngineWork(int rank, Identity identity, std::unique_ptr<InFlight> inFlight, std::vector<at::Tensor> outputs,
             std::chrono::milliseconds timeout, c10::weak_intrusive_ptr<MigrateBackend> backend,
             std::shared_ptr<std::atomic<int64_t>> unsettled = nullptr);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  // torch's WorkResult (SUCCESS, TIMEOUT, COMM_ERROR) once the op settled: how a job that holds
  // futures learns that a device op failed, since the op's own future completes regardless.
  c10::intrusive_ptr<c10::ivalue::Future> getFutureResult() override;
  uint64_t getSequencenumber() const override { return identity_.sequence; }
#if NCCL_MIGRATE_TORCH_HAS_WORK_TIMEOUT
  std::chrono::milliseconds getTimeout() const override { return timeout_; }
#else
  std::chrono::milliseconds getTimeout() const { return timeout_; }  // older torch's Work has none
#endif

  // Watchdog side: true when the work is finished (done, failed or expired) and can be dropped.
  bool watch(std::chrono::steady_clock::time_point now);

 private:
  // Settles the work once: records completion or the error, tells the op's observers, its
  // future (a failure fails it) and, on failure, the backend.
  void settle(std::exception_ptr error, bool timedOut);
  std::exception_ptr withContext(const std::exception_ptr& cause) const;
  static void markResult(const c10::intrusive_ptr<c10::ivalue::Future>& result, c10d::WorkResult settledAs);

  Identity identity_;
  std::unique_ptr<InFlight> inFlight_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point deadline_;
  c10::weak_intrusive_ptr<MigrateBackend> backend_;
  // The op's future, made at issue or once asked for (Identity::futureOrder). A device op's
  // future completes with the op's outputs in stream order whatever becomes of the op, as torch's
  // NCCL backends' futures do: legacy marks it at issue with the NCCL stream current, nccl2 at
  // getFuture() after the caller's stream waits for the op, and neither ever fails it. Its
  // consumers' streams are ordered after the op; a failure reaches the job through the work
  // (wait(), exception(), getFutureResult()) and the group's failure handling. A host op's future
  // fails with the op, as torch's Gloo's does.
  struct OpFuture {
    c10::intrusive_ptr<c10::ivalue::Future> future;
    bool failsWithTheOp = false;  // a host op's
    std::mutex mutex;
    bool decided = false;
    bool succeeded = false;  // the work settled as done
    void settled(const std::exception_ptr& error);
    void completed(const c10::IValue& value, const std::exception_ptr& error);
  };
  std::shared_ptr<OpFuture> future_;
  c10::intrusive_ptr<c10::ivalue::Future> result_;  // getFutureResult()'s, once asked for
  c10d::WorkResult settledAs_ = c10d::WorkResult::UNKNOWN;
  std::shared_ptr<std::atomic<int64_t>> unsettled_;
};

}  // namespace nccl_migrate::backends
