// A group torn down while an op of it was captured into a graph. A captured op runs on each
// replay, never at capture, so torch's NCCL backends neither enqueue it to their watchdog
// (ProcessGroupNCCL::collective(), "Note [cuda graph capture and workEnqueue]") nor wait for it
// when they shut down. Teardown here must not wait for it either: no end event of a captured op
// is ever reached. What the simulated device cannot show: a replay after the communicator was
// destroyed (torch leaves keeping the group alive while its graphs replay to the job; the
// simulation has no replay).
#include <gtest/gtest.h>

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

c10d::AllreduceOptions sum() {
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::SUM;
  return o;
}

// `teardown` runs with a captured op held by the job; it must end within the bound, the
// captured op is settled (whether as done or, once its communicator is gone, as failed), and once the job drops the op the communicator is freed
// (its memory given back; the simulation ends the process on any use after that).
void capturedThenTornDown(RankContext& ctx, const std::function<void(MigrateBackend&)>& teardown) {
  size_t before = SimRuntime::instance()->usedBytes.load();
  auto pg = simBackend(ctx);
  std::vector<at::Tensor> t{at::ones({4})};
  pg->allreduce(t, sum())->wait(std::chrono::milliseconds(10000));  // the communicator exists before capture
  auto job = SimRuntime::instance()->makeWorkerStream("job");
  SimRuntime::instance()->setCurrentStream(job.get());
  job->capturing = true;
  auto captured = pg->allreduce(t, sum());
  captured->wait();
  job->capturing = false;  // the capture ended: the graph holds the op, to run on replay
  auto started = std::chrono::steady_clock::now();
  teardown(*pg);
  auto took = std::chrono::steady_clock::now() - started;
  check(took < std::chrono::seconds(5), "teardown waited " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()) +
        " ms for a captured op, which runs only on replay");
  check(captured->isCompleted(), "the captured op was left pending: nothing may wait for an op that runs only on replay");
  check(at::equal(t[0], at::full({4}, 2.0)), "a captured op ran at capture");
  captured.reset();
  pg.reset();
  SimRuntime::instance()->setCurrentStream(nullptr);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (SimRuntime::instance()->usedBytes.load() > before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  check(SimRuntime::instance()->usedBytes.load() == before, "the communicator was never freed");
}

// The communicator's stream joined the capture by waiting on the job's captured stream; once
// the job ends the capture (having waited for the captured op, so every stream rejoined), the
// communicator's stream leaves it too, and the group's next op runs now.
TEST(SimulatedCapture, AfterTheCaptureEndsTheGroupsOpsRunAgain) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx);
                       std::vector<at::Tensor> t{at::ones({4})};
                       pg->allreduce(t, sum())->wait(std::chrono::milliseconds(10000));
                       auto job = SimRuntime::instance()->makeWorkerStream("job");
                       SimRuntime::instance()->setCurrentStream(job.get());
                       job->capturing = true;
                       pg->allreduce(t, sum())->wait();
                       job->capturing = false;
                       SimRuntime::instance()->setCurrentStream(nullptr);
                       std::vector<at::Tensor> u{at::ones({4})};
                       pg->allreduce(u, sum())->wait(std::chrono::milliseconds(5000));
                       check(at::equal(u[0], at::full({4}, 2.0)), "the op after the capture did not run");
                     }),
            "");
}

TEST(SimulatedCapture, ShutdownWithACapturedOpEndsAndFreesTheCommunicator) {
  EXPECT_EQ(runRanks(2, [](RankContext& ctx) { capturedThenTornDown(ctx, [](MigrateBackend& pg) { pg.shutdown(); }); }),
            "");
}

TEST(SimulatedCapture, AbortWithACapturedOpEndsAndFreesTheCommunicator) {
  EXPECT_EQ(runRanks(2, [](RankContext& ctx) { capturedThenTornDown(ctx, [](MigrateBackend& pg) { pg.abort(); }); }),
            "");
}

}  // namespace
}  // namespace nccl_migrate::sim
