// The futures of device ops, as torch's NCCL backends complete them: with the op's outputs, in
// stream order, whatever becomes of the op. torch's legacy ProcessGroupNCCL marks an op's future
// complete at issue with the NCCL stream current (ProcessGroupNCCL.cpp, collective() and
// pointToPoint()) and WorkNCCL::getFuture() only returns it; nccl2's WorkNCCL::getFuture() makes
// the caller's stream wait for the op and marks the future complete (nccl2/WorkNCCL.cpp). Neither
// ever fails it: a timed-out or failed op is reported by its work (wait(), exception(),
// getFutureResult(): WorkResult TIMEOUT or COMM_ERROR) and by the group's failure handling. DDP's
// reducer (reducer.cpp, Reducer::finalize_backward) waits on the future and reads its value, so
// on CUDA a comm hook of a timed-out op sees its buffers, never an error.
//
// On CUDA the future is complete on the host at once and only its consumers' streams wait; the
// simulated device's futures are the CPU's (no events), so it completes them when the stream
// gets there instead. These tests therefore assert what a future completes with and what its
// consumers see, never when the host sees it complete.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "nccl_migrate/backends/communicator_factories.h"
#include "nccl_migrate/backends/communicator_policy.h"
#include "nccl_migrate/backends/migrate_backend.h"
#include "ranks.h"
#include "sim_backend.h"
#include "sim_device.h"
#include "sim_nccl.h"

namespace nccl_migrate::sim {
namespace {

using backends::GroupOptions;
using backends::MigrateBackend;
using backends::PolicyMaker;

struct NamedPolicy {
  const char* name;
  PolicyMaker make;
};

std::vector<NamedPolicy> bothFutureOrders() {
  return {{"legacy", legacy()}, {"rewritten", rewritten()}};
}

c10d::AllreduceOptions sum() {
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::SUM;
  return o;
}

// Polls `done` for up to `limit`; a hang is a failure, never a pass.
template <typename Done>
bool within(std::chrono::milliseconds limit, Done done) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::string messageOf(const std::exception_ptr& error) {
  if (!error) return "(no error)";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  }
}

c10d::WorkResult resultOf(const c10::intrusive_ptr<c10::ivalue::Future>& result) {
  return static_cast<c10d::WorkResult>(result->value().toInt());
}

// The future holds the op's own output tensors, and has no error.
void expectOutputsOf(const c10::intrusive_ptr<c10::ivalue::Future>& future, const at::Tensor& output,
                     const std::string& what) {
  if (future->hasError()) check(false, what + ": the future failed: " + future->tryRetrieveErrorMessage());
  auto values = future->value().toTensorVector();
  check(values.size() == 1 && values[0].is_same(output), what + ": the future does not hold the op's output");
}

// A stalled op's future, asked for while the op is in flight: the watchdog times the op out and
// aborts the group; the future completes with the op's outputs, and the work says it timed out.
void futureOfAnOpThatTimesOut(RankContext& ctx, const PolicyMaker& policy) {
  Faults stallFirst;
  stallFirst.stallAt = 1;
  auto pg = simBackend(ctx, policy, std::chrono::milliseconds(600), stallFirst);
  std::vector<at::Tensor> t{at::ones({4})};
  auto work = pg->allreduce(t, sum());
  auto result = work->getFutureResult();
  check(!result->completed(), "the op's result was decided while it was in flight");
  // (nccl2's order blocks here on the simulated device, whose host is the job's stream, until
  // the abort releases the op's stream.)
  auto future = work->getFuture();
  check(within(std::chrono::seconds(10), [&] { return work->isCompleted(); }), "the stalled op never settled");
  check(!work->isSuccess(), "a timed-out op's work reports success");
  check(messageOf(work->exception()).find("timeout") != std::string::npos,
        "the work's error does not name the timeout: " + messageOf(work->exception()));
  check(result->completed() && resultOf(result) == c10d::WorkResult::TIMEOUT,
        "the op's result future does not say TIMEOUT");
  check(within(std::chrono::seconds(10), [&] { return future->completed(); }),
        "the future of a timed-out op never completed (the abort releases its stream)");
  expectOutputsOf(future, t[0], "a timed-out op");
}

TEST(SimulatedFutures, ATimedOutOpsFutureCompletesWithItsOutputsAndTheWorkReportsTheTimeout) {
  for (const auto& [name, policy] : bothFutureOrders()) {
    EXPECT_EQ(runRanks(2, [&](RankContext& ctx) { futureOfAnOpThatTimesOut(ctx, policy); }), "") << name;
  }
}

// Asked for after the op failed (NCCL's asynchronous error), the future still completes with the
// op's outputs, as torch's does (legacy made it complete at issue; nccl2 marks it at
// getFuture() whatever the op's state); getFutureResult() says COMM_ERROR.
void futureOfAFailedOp(RankContext& ctx, const PolicyMaker& policy) {
  Faults failFirst;
  failFirst.asyncErrorAt = 1;
  auto pg = simBackend(ctx, policy, std::chrono::seconds(20), failFirst);
  std::vector<at::Tensor> t{at::ones({4})};
  auto work = pg->allreduce(t, sum());
  try {
    work->wait(std::chrono::milliseconds(10000));
    check(false, "the op completed despite NCCL's error");
  } catch (const c10::DistBackendError&) {
  }
  auto future = work->getFuture();
  check(within(std::chrono::seconds(10), [&] { return future->completed(); }),
        "the future of a failed op never completed");
  expectOutputsOf(future, t[0], "a failed op");
  auto result = work->getFutureResult();
  check(result->completed() && resultOf(result) == c10d::WorkResult::COMM_ERROR,
        "the failed op's result future does not say COMM_ERROR");
}

TEST(SimulatedFutures, AFailedOpsFutureCompletesWithItsOutputsAndTheWorkReportsTheError) {
  for (const auto& [name, policy] : bothFutureOrders()) {
    EXPECT_EQ(runRanks(2, [&](RankContext& ctx) { futureOfAFailedOp(ctx, policy); }), "") << name;
  }
}

// What a comm hook does with the future (torch's default allreduce hook chains on it with
// then()): the callback sees the op's result, and the op's result future says SUCCESS.
void hookOnAFinishedOp(RankContext& ctx, const PolicyMaker& policy) {
  auto pg = simBackend(ctx, policy, std::chrono::seconds(20));
  if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the op is in flight a while
  std::vector<at::Tensor> t{at::full({4}, static_cast<double>(ctx.rank + 1))};
  auto work = pg->allreduce(t, sum());
  auto halved = work->getFuture()->then(
      [](c10::ivalue::Future& parent) { return c10::IValue(parent.value().toTensorVector()[0] / 2); },
      c10::TensorType::get());
  halved->wait();
  if (halved->hasError()) check(false, "the hook's future failed: " + halved->tryRetrieveErrorMessage());
  check(at::equal(halved->value().toTensor(), at::full({4}, 1.5)),
        "the hook read the buffer before the op wrote it");
  auto result = work->getFutureResult();
  check(within(std::chrono::seconds(10), [&] { return result->completed(); }), "the op's result was never decided");
  check(resultOf(result) == c10d::WorkResult::SUCCESS, "a finished op's result future does not say SUCCESS");
}

TEST(SimulatedFutures, AHookChainedOnTheFutureSeesTheOpsResult) {
  for (const auto& [name, policy] : bothFutureOrders()) {
    EXPECT_EQ(runRanks(2, [&](RankContext& ctx) { hookOnAFinishedOp(ctx, policy); }), "") << name;
  }
}

// An op's future depends on that op alone, not on ops issued after it (torch's legacy
// collective() marks it at issue, right after the op's end event; nccl2 at getFuture() orders the
// caller's stream after the op itself): asked for once a later op is stuck, it completes with the
// op's outputs long before the stuck op times out and the group's abort releases the stream.
void futureOfAnOpBeforeAStuckOne(RankContext& ctx, const PolicyMaker& policy) {
  Faults stallSecond;
  stallSecond.stallAt = 2;
  constexpr auto kTimeout = std::chrono::milliseconds(4000);
  auto pg = simBackend(ctx, policy, kTimeout, stallSecond);
  std::vector<at::Tensor> t{at::full({4}, static_cast<double>(ctx.rank + 1))}, u{at::ones({4})};
  auto first = pg->allreduce(t, sum());
  auto stuck = pg->allreduce(u, sum());
  auto asked = std::chrono::steady_clock::now();
  auto future = first->getFuture();
  bool early = within(kTimeout / 2, [&] { return future->completed(); });
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - asked);
  check(early, "the first op's future waited for the stuck op after it (" + std::to_string(took.count()) + " ms)");
  check(!stuck->isCompleted(), "the stuck op ended before its timeout: the test proves nothing");
  expectOutputsOf(future, t[0], "the op before a stuck one");
  check(at::equal(t[0], at::full({4}, 3.0)), "the future completed before the op's result was in its output");
}

TEST(SimulatedFutures, ALegacyFutureDoesNotWaitForLaterOps) {
  for (const auto& [name, policy] : bothFutureOrders()) {
    EXPECT_EQ(runRanks(2, [&](RankContext& ctx) { futureOfAnOpBeforeAStuckOne(ctx, policy); }), "") << name;
  }
}

}  // namespace
}  // namespace nccl_migrate::sim
