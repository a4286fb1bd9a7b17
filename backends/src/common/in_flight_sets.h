// InFlight building blocks shared by both communicator implementations and the engine: an op
// that already finished, a set of ops that finish together, and a host op with work that must
// follow it.
#pragma once

#include <memory>
#include <vector>

#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

// An op that completed (or failed) before it was returned.
class FinishedInFlight final : public InFlight {
 public:
  explicit FinishedInFlight(std::exception_ptr error = nullptr) : error_(std::move(error)) {}
  bool isDone() override { return true; }
  std::exception_ptr failure() override { return error_; }
  void wait(std::chrono::milliseconds) override {
    if (error_) std::rethrow_exception(error_);
  }
  void onDone(std::function<void(std::exception_ptr)> callback) override { callback(error_); }

 private:
  std::exception_ptr error_;
};

// Several ops seen as one: done when all are, failed when any is.
class InFlightSet final : public InFlight {
 public:
  explicit InFlightSet(std::vector<std::unique_ptr<InFlight>> members);
  bool isDone() override;
  std::exception_ptr failure() override;
  void wait(std::chrono::milliseconds timeout) override;
  bool waitOnDevice() override;
  bool onDevice() const override;
  void giveUp() override {
    for (auto& m : members_) m->giveUp();
  }
  void onDone(std::function<void(std::exception_ptr)> callback) override;

 private:
  std::vector<std::unique_ptr<InFlight>> members_;
};

// A host op followed by host work (AVG's division, copies out of a staging buffer) that runs
// once, after the op succeeded and before anyone sees it done. Whoever first observes the op's
// end (a waiter, the watchdog polling, a completion callback) runs it; the others wait for it.
class ThenInFlight final : public InFlight {
 public:
  ThenInFlight(std::unique_ptr<InFlight> op, std::function<void()> then);
  bool isDone() override;
  std::exception_ptr failure() override;
  void wait(std::chrono::milliseconds timeout) override;
  void giveUp() override { op_->giveUp(); }
  void onDone(std::function<void(std::exception_ptr)> callback) override;

  struct Then;  // the work and its outcome, shared with completion callbacks

 private:
  std::unique_ptr<InFlight> op_;
  std::shared_ptr<Then> then_;
};

// An op whose tracker arrives later: the members of a coalescing batch, which complete with
// the batch once endCoalescing issued it.
class DeferredInFlight final : public InFlight {
 public:
  using Slot = std::shared_ptr<std::shared_ptr<InFlight>>;
  explicit DeferredInFlight(Slot slot) : slot_(std::move(slot)) {}
  bool isDone() override { return *slot_ && (*slot_)->isDone(); }
  std::exception_ptr failure() override { return *slot_ ? (*slot_)->failure() : nullptr; }
  // Before the batch is issued there is nothing to wait for: like torch nccl2's sentinel work,
  // a synchronous op inside a batch returns at once and completes with the batch.
  void wait(std::chrono::milliseconds timeout) override;
  bool waitOnDevice() override { return !*slot_ || (*slot_)->waitOnDevice(); }
  bool onDevice() const override { return *slot_ && (*slot_)->onDevice(); }
  void giveUp() override {
    if (*slot_) (*slot_)->giveUp();
  }
  void onDone(std::function<void(std::exception_ptr)> callback) override;

 private:
  Slot slot_;
};

}  // namespace nccl_migrate::backends
