// The backend's own ATen ops (the uneven all_gather's and reduce_scatter's copies and clones,
// the list reduce_scatter's concatenation, a PREMUL_SUM factor's conversion) run on the job's
// stream, as ATen runs them on the current CUDA stream: the communicator's stream must wait for
// them. Here the job's stream is held back while the job writes its inputs and the op is issued,
// and the job's ATen ops, the backend's among them, run as that stream's work
// (AtenOnCurrentStream): an op whose communicator stream read before the backend's ATen ops ran
// would reduce poison (NaN) or stale inputs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "nccl_migrate/backends/communicator_factories.h"
#include "nccl_migrate/backends/communicator_policy.h"
#include "nccl_migrate/backends/migrate_backend.h"
#include "ranks.h"
#include "sim_backend.h"
#include "sim_aten_on_stream.h"
#include "sim_device.h"
#include "sim_nccl.h"

namespace nccl_migrate::sim {
namespace {

using backends::GroupOptions;
using backends::MigrateBackend;

// The job's stream, current on this thread, held back until release(): what the job issues
// before then waits, as behind a long kernel.
struct HeldJobStream {
  std::shared_ptr<SimStream> stream = SimRuntime::instance()->makeWorkerStream("job");
  std::shared_ptr<std::promise<void>> gate = std::make_shared<std::promise<void>>();
  HeldJobStream() {
    stream->enqueue([opened = gate->get_future().share()] { opened.wait(); });
    SimRuntime::instance()->setCurrentStream(stream.get());
  }
  void release() { gate->set_value(); }
  // The host waits for what was issued on the stream so far.
  void drain() {
    auto reached = std::make_shared<std::promise<void>>();
    auto done = reached->get_future();
    stream->enqueue([reached] { reached->set_value(); });
    check(done.wait_for(std::chrono::seconds(20)) == std::future_status::ready, "the job's stream never drained");
  }
  ~HeldJobStream() { SimRuntime::instance()->setCurrentStream(nullptr); }
};

// Runs `issue` with the job's stream held and the job's ATen ops on it, then lets the stream go;
// the op's work is waited for as torch's wait() does (the job's stream waits), and the stream
// drained before the host reads the results.
void onAHeldJobStream(const std::function<c10::intrusive_ptr<c10d::Work>()>& issue) {
  HeldJobStream job;
  c10::intrusive_ptr<c10d::Work> work;
  {
    AtenOnCurrentStream atenOnTheJobStream;
    work = issue();
    work->wait();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a communicator stream that did not wait reads now
  job.release();
  job.drain();
}

// The double itself: under the guard, a job's in-place write and a new tensor wait for the held
// stream, and a communicator stream that does not wait for the job's reads the stale value.
TEST(SimulatedAtenOrder, TheJobsAtenOpsRunInItsStreamOrder) {
  auto runtime = SimRuntime::instance();
  auto comm = runtime->makeWorkerStream("comm");
  at::Tensor x = at::zeros({4}), copied = at::zeros({4}), made;
  {
    HeldJobStream job;
    {
      AtenOnCurrentStream atenOnTheJobStream;
      x.fill_(5.0);
      made = at::cat({x, x});
    }
    check(at::equal(x, at::zeros({4})), "an in-place op ran before its stream got there");
    check(at::isnan(made).all().item<bool>(), "a new tensor holds its values before its stream got there");
    backends::nccl::StreamRef commRef{comm.get(), c10::Device(c10::kCPU)};
    runtime->copy(copied, x, commRef);  // no wait for the job's stream
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    job.release();
    job.drain();
  }
  expectEqual(x, at::full({4}, 5.0), "the job's write");
  expectEqual(made, at::full({8}, 5.0), "the job's concatenation");
  expectEqual(copied, at::zeros({4}), "a stream that did not wait for the job's");
}

TEST(SimulatedAtenOrder, UnevenAllGatherCopiesOnTheJobsStream) {
  EXPECT_EQ(runRanks(3,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx);
                       at::Tensor in = at::zeros({ctx.rank + 1});
                       std::vector<std::vector<at::Tensor>> outs(1);
                       for (int r = 0; r < ctx.size; ++r) outs[0].push_back(at::zeros({r + 1}));
                       onAHeldJobStream([&] {
                         in.fill_(static_cast<double>(ctx.rank + 1));
                         std::vector<at::Tensor> ins{in};
                         c10d::AllgatherOptions opts;
                         return pg->allgather(outs, ins, opts);
                       });
                       for (int r = 0; r < ctx.size; ++r) {
                         expectEqual(outs[0][r], at::full({r + 1}, static_cast<double>(r + 1)),
                                     "rank " + std::to_string(r) + "'s entry");
                       }
                     }),
            "");
}

TEST(SimulatedAtenOrder, ListReduceScatterConcatenatesOnTheJobsStream) {
  EXPECT_EQ(runRanks(3,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx);
                       std::vector<std::vector<at::Tensor>> ins(1);
                       for (int r = 0; r < ctx.size; ++r) ins[0].push_back(at::zeros({2}));
                       std::vector<at::Tensor> out{at::zeros({2})};
                       onAHeldJobStream([&] {
                         for (int r = 0; r < ctx.size; ++r) ins[0][r].fill_(static_cast<double>(10 * ctx.rank + r));
                         c10d::ReduceScatterOptions sum;
                         return pg->reduce_scatter(out, ins, sum);
                       });
                       // sum over ranks q of 10q + me
                       double expected = 10.0 * (0 + 1 + 2) + 3.0 * ctx.rank;
                       expectEqual(out[0], at::full({2}, expected), "the reduced share");
                     }),
            "");
}

TEST(SimulatedAtenOrder, UnevenReduceScatterCopiesAndClonesOnTheJobsStream) {
  EXPECT_EQ(runRanks(3,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx);
                       std::vector<std::vector<at::Tensor>> ins(1);
                       for (int r = 0; r < ctx.size; ++r) ins[0].push_back(at::zeros({r + 1}));
                       std::vector<at::Tensor> out{at::zeros({ctx.rank + 1})};
                       onAHeldJobStream([&] {
                         for (int r = 0; r < ctx.size; ++r) ins[0][r].fill_(static_cast<double>(10 * ctx.rank + r));
                         c10d::ReduceScatterOptions sum;
                         return pg->reduce_scatter(out, ins, sum);
                       });
                       double expected = 10.0 * (0 + 1 + 2) + 3.0 * ctx.rank;
                       expectEqual(out[0], at::full({ctx.rank + 1}, expected), "the reduced share");
                     }),
            "");
}

TEST(SimulatedAtenOrder, APreMulSumFactorIsConvertedOnTheJobsStream) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx);
                       std::vector<at::Tensor> t{at::zeros({4})};
                       at::Tensor factor = at::zeros({}, at::kDouble);  // converted to the data's type
                       onAHeldJobStream([&] {
                         t[0].fill_(static_cast<double>(ctx.rank + 1));
                         factor.fill_(3.0);
                         c10d::AllreduceOptions opts;
                         opts.reduceOp = c10d::makePreMulSum(factor);
                         return pg->allreduce(t, opts);
                       });
                       expectEqual(t[0], at::full({4}, 9.0), "PREMUL_SUM with the job's factor");
                     }),
            "");
}

}  // namespace
}  // namespace nccl_migrate::sim
