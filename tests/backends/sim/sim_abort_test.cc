// A group's abort over the simulated device, whose ncclCommAbort waits for its communicator's
// stream as NCCL's does (docs/simulated-nccl.md): a kernel queued behind another communicator's
// stuck op, through the job's stream, holds that abort until the other is aborted too. The abort
// must neither deadlock the watchdog every group of the process shares nor hold its caller past
// its bound (kAbortWait).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "nccl_migrate/backends/communicator.h"
#include "nccl_migrate/backends/migrate_backend.h"
#include "nccl/comm_handle.h"
#include "ranks.h"
#include "sim_backend.h"
#include "sim_nccl.h"

namespace nccl_migrate::sim {
namespace {

using namespace std::chrono_literals;

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Whether `work` settled (as failed) within `limit`; the watchdog settles it.
bool failsWithin(const c10::intrusive_ptr<c10d::Work>& work, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!work->isCompleted() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  return work->isCompleted() && !work->isSuccess();
}

// A second group of this rank: its own store prefix, so its communicators meet only each other.
RankContext secondGroup(RankContext& ctx) {
  return {ctx.rank, ctx.size, c10::make_intrusive<c10d::PrefixStore>("second-group", ctx.store)};
}

// Legacy behaviour: rank 0 receives from rank 1 on the pair communicator and waits without a
// timeout (the job's stream waits for the receive), then all-reduces on the collective
// communicator, whose kernel is queued behind the receive. Rank 1 never sends: the receive times
// out and the watchdog aborts the group. The collective communicator comes first in the group
// (its key sorts first), and its abort waits for the all_reduce, which waits for the receive:
// only the pair communicator's abort ends it. Aborted one after the other, the first never
// returns (and holds the watchdog). Both communicators must be freed soon after the receive
// failed, and the all_reduce (its own timeout far off) fail.
TEST(SimulatedAbort, ALegacyGroupAbortEndsWhenItsCollectiveWaitsOnAStuckPairReceive) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       size_t before = SimRuntime::instance()->usedBytes.load();  // device memory of communicators
                       auto pg = simBackend(ctx, legacy(), 1000ms);
                       // Connected and healthy: the collective, and the pair's direction 1 -> 0.
                       std::vector<at::Tensor> warm{at::ones({4})};
                       pg->allreduce(warm, allreduceWith(c10d::ReduceOp::SUM))->wait();
                       std::vector<at::Tensor> pair{at::ones({4})};
                       if (ctx.rank == 1) {
                         pg->send(pair, 0, 0)->wait();
                         std::this_thread::sleep_for(8s);  // alive, never sends again
                         return;
                       }
                       pg->recv(pair, 1, 0)->wait(10000ms);
                       JobStream job;
                       auto received = pg->recv(pair, 1, 0);
                       received->wait();  // the job's stream waits for it; the host goes on
                       std::vector<at::Tensor> summed{at::ones({4})};
                       // A timeout of its own far off: only the group's abort can end it soon.
                       c10d::AllreduceOptions longWait = allreduceWith(c10d::ReduceOp::SUM);
                       longWait.timeout = 20000ms;
                       auto allReduce = pg->allreduce(summed, longWait);
                       auto issued = std::chrono::steady_clock::now();
                       check(failsWithin(received, 6000ms), "the receive never failed on its 1 s timeout");
                       check(failsWithin(allReduce, 3000ms), "the all_reduce did not fail once the group was aborted");
                       auto freed = std::chrono::steady_clock::now() + 3000ms;
                       auto held = [&] { return SimRuntime::instance()->usedBytes.load() > before; };
                       while (held() && std::chrono::steady_clock::now() < freed) std::this_thread::sleep_for(10ms);
                       check(!held(),
                             "the group's communicators were not freed within 3 s of the receive's failure: the "
                             "abort is stuck on the collective communicator, whose all_reduce waits on the receive");
                       check(secondsSince(issued) < 1.0 + backends::kAbortWait.count() / 1000.0 + 3.0,
                             "the group's ops failed " + std::to_string(secondsSince(issued)) + " s after issue");
                     },
                     30s),
            "");
}

// Two groups chained through the job's stream, under the rewritten behaviour (one communicator
// each, one rank): group B's all_reduce stalls and the job waits for it without a timeout; group
// A's all_reduce is queued behind it. A's timeout (0.5 s) passes first, and A's abort waits for
// A's kernel, which waits for B's stuck one: only B's abort, after B's own timeout (3 s), ends
// it. That timeout needs the watchdog, which A's abort must not hold past its bound.
TEST(SimulatedAbort, AGroupStuckBehindAnotherGroupLeavesTheWatchdogToTimeItOut) {
  EXPECT_EQ(runRanks(1,
                     [](RankContext& ctx) {
                       Faults stallFirst;
                       stallFirst.stallAt = 1;
                       RankContext other = secondGroup(ctx);
                       auto groupB = simBackend(other, rewritten(), 3000ms, stallFirst);
                       auto groupA = simBackend(ctx, rewritten(), 500ms);
                       JobStream job;
                       std::vector<at::Tensor> b{at::ones({4})}, a{at::ones({4})};
                       auto stuck = groupB->allreduce(b, allreduceWith(c10d::ReduceOp::SUM));
                       stuck->wait();  // the job's stream waits for B's op
                       auto behind = groupA->allreduce(a, allreduceWith(c10d::ReduceOp::SUM));
                       auto issued = std::chrono::steady_clock::now();
                       // B's timeout, plus A's abort bound the watchdog may have waited, plus slack.
                       auto limit = 3000ms + backends::kAbortWait + 3000ms;
                       check(failsWithin(stuck, limit),
                             "group B's op did not time out within " + std::to_string(limit.count()) +
                                 " ms: the watchdog is stuck in group A's abort, which waits on B's op");
                       check(failsWithin(behind, 3000ms), "group A's op did not fail once group B was aborted");
                       check(groupB->getError() == c10d::ErrorType::TIMEOUT, "group B's error is not TIMEOUT");
                       check(secondsSince(issued) < 3.0 + backends::kAbortWait.count() / 1000.0 + 3.0,
                             "the groups' ops failed " + std::to_string(secondsSince(issued)) + " s after issue");
                     },
                     30s),
            "");
}

// The job aborts group A while A's kernel waits, through the job's stream, on group B's stuck
// op (B's timeout is far off). A's abort cannot finish until B is aborted; the job's call
// returns within the bound anyway (the abort goes on in the background, and ends once B is
// aborted), and A refuses ops from then on.
TEST(SimulatedAbort, AnAbortStuckBehindAnotherGroupReturnsWithinItsBound) {
  EXPECT_EQ(runRanks(1,
                     [](RankContext& ctx) {
                       Faults stallFirst;
                       stallFirst.stallAt = 1;
                       RankContext other = secondGroup(ctx);
                       auto groupB = simBackend(other, rewritten(), 60000ms, stallFirst);
                       auto groupA = simBackend(ctx, rewritten(), 60000ms);
                       JobStream job;
                       std::vector<at::Tensor> b{at::ones({4})}, a{at::ones({4})};
                       auto stuck = groupB->allreduce(b, allreduceWith(c10d::ReduceOp::SUM));
                       stuck->wait();
                       auto behind = groupA->allreduce(a, allreduceWith(c10d::ReduceOp::SUM));
                       auto started = std::chrono::steady_clock::now();
                       groupA->abort();
                       double took = secondsSince(started);
                       check(took < backends::kAbortWait.count() / 1000.0 + 1.5,
                             "abort() returned after " + std::to_string(took) + " s; its bound is " +
                                 std::to_string(backends::kAbortWait.count()) + " ms");
                       try {
                         (void)groupA->allreduce(a, allreduceWith(c10d::ReduceOp::SUM));
                         check(false, "an op of the aborted group was issued");
                       } catch (const c10::DistBackendError&) {
                       }
                       // B's abort lets A's kernel run, and A's abort, still going on, finish.
                       groupB->abort();
                       check(failsWithin(behind, 5000ms), "group A's op did not fail once group B was aborted");
                       check(failsWithin(stuck, 5000ms), "group B's op did not fail once B was aborted");
                     },
                     30s),
            "");
}

// A simulated NCCL communicator of `size` ranks in NCCL's nonblocking mode, ready: rank 0 makes
// the unique id, the others read it from the store, and each polls its init until it completed.
ncclComm_t nonblockingCommunicator(RankContext& ctx, backends::nccl::NcclApi& api, int size) {
  ncclUniqueId id = sharedUniqueId(ctx, api);
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  check(api.commInitRankConfig(&comm, size, id, ctx.rank, &config) == ncclInProgress, "a nonblocking init");
  ncclResult_t state = ncclInProgress;
  auto giveUp = std::chrono::steady_clock::now() + 10s;
  while (state == ncclInProgress && std::chrono::steady_clock::now() < giveUp) {
    check(api.commGetAsyncError(comm, &state) == ncclSuccess, "ncclCommGetAsyncError");
    std::this_thread::sleep_for(1ms);
  }
  check(state == ncclSuccess, "the nonblocking init did not complete");
  return comm;
}

// In nonblocking mode the thread that issued a launch polls NCCL until it finished, holding the
// communicator (no NCCL call may run beside it). Its first collective connects and waits for rank
// 1, which never connects. An abort from another thread (the watchdog, after another op failed)
// leaves the freeing to that thread; the thread must stop polling at the abort and free the
// communicator then, not poll on until its launch timeout (8 s here).
TEST(SimulatedAbort, AnAbortEndsANonblockingLaunchAtOnce) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto seams = simulatedSeams(ctx.store);
                       auto* api = dynamic_cast<SimNcclApi*>(seams->api.get());
                       ncclComm_t comm = nonblockingCommunicator(ctx, *api, 2);
                       if (ctx.rank == 1) {
                         ctx.store->wait({"done"}, 25s);  // alive, never issues the all_reduce
                         return;
                       }
                       auto stream = SimRuntime::instance()->makeWorkerStream("comm");
                       at::Tensor t = at::ones({4});
                       auto handle = std::make_shared<backends::nccl::CommHandle>(seams->api, comm, "pg", 0, "sim:0",
                                                                                  /*nonblocking=*/true, 8000ms);
                       std::atomic<bool> callReturned{false};
                       std::string callError;
                       std::thread caller([&] {
                         try {
                           handle->use("allreduce", [&](ncclComm_t c) {
                             auto* onStream = static_cast<cudaStream_t>(static_cast<void*>(stream.get()));
                             ncclResult_t issued =
                                 api->allReduce(t.data_ptr(), t.data_ptr(), 4, ncclFloat32, ncclSum, c, onStream);
                             check(issued == ncclInProgress, "the nonblocking all_reduce did not say ncclInProgress");
                           });
                           callError = "the all_reduce completed without rank 1";
                         } catch (const c10::DistBackendError& e) {
                           callError = e.what();
                         } catch (const std::exception& e) {
                           callError = std::string("not a DistBackendError: ") + e.what();
                         }
                         callReturned = true;
                       });
                       auto callInside = [&] {
                         auto calls = api->calls();
                         return std::count(calls.begin(), calls.end(), "ncclAllReduce") > 0;
                       };
                       auto giveUp = std::chrono::steady_clock::now() + 10s;
                       while (!callInside() && std::chrono::steady_clock::now() < giveUp) {
                         std::this_thread::sleep_for(5ms);
                       }
                       check(callInside(), "the all_reduce never reached NCCL");
                       std::this_thread::sleep_for(100ms);  // its launch connecting, its caller polling
                       auto aborted = std::chrono::steady_clock::now();
                       handle->abort();
                       while (!callReturned && secondsSince(aborted) < 12.0) std::this_thread::sleep_for(5ms);
                       double took = secondsSince(aborted);
                       caller.join();
                       ctx.store->set("done", std::vector<uint8_t>{1});
                       check(took < 2.0, "the launch's caller went on polling " + std::to_string(took) +
                                             " s after the abort (its launch timeout is 8 s)");
                       check(callError.find("aborted") != std::string::npos,
                             "the call did not fail as aborted: '" + callError + "'");
                       auto calls = api->calls();
                       check(std::count(calls.begin(), calls.end(), "ncclCommAbort") == 1,
                             "the communicator was not freed by ncclCommAbort once");
                     },
                     30s),
            "");
}

}  // namespace
}  // namespace nccl_migrate::sim
