// The NCCL communicator's own code, with only its seams swapped for the simulated device, run
// by real ranks in separate processes: every op and dtype, coalescing, p2p per policy, waits,
// capture, timeouts, aborts and asynchronous errors. Each rank is bound to its own device
// (sim:0, sim:1, ...), as GPU jobs are. Tests named DefectNN cover that item of the NCCL-path
// review.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>
#include <c10/util/StringUtil.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "nccl_migrate/backends/communicator_factories.h"
#include "nccl_migrate/backends/communicator_policy.h"
#include "nccl_migrate/backends/migrate_backend.h"
#include "common/member_meeting.h"
#include "nccl/comm_handle.h"
#include "ranks.h"
#include "lagging_store.h"
#include "sim_backend.h"
#include "sim_nccl.h"
#include "stuck_store.h"

namespace nccl_migrate::sim {
namespace {

using backends::CommunicatorRequest;
using backends::GroupOptions;
using backends::MigrateBackend;
using backends::PolicyMaker;

// A toolkit backend over seams a test holds (to ask the simulated NCCL what it saw), with the
// group options as the test set them.
c10::intrusive_ptr<MigrateBackend> simBackendOver(RankContext& ctx, std::shared_ptr<const backends::NcclSeams> seams,
                                                  const GroupOptions& options, const PolicyMaker& policy) {
  backends::FactoryMaker factory = [seams](const c10::intrusive_ptr<c10d::Store>& s, const GroupOptions& o) {
    return backends::makeCommunicatorFactory(s, nullptr, o.groupName, o.connectTimeout(), seams, c10::kCPU,
                                             o.deviceComms);
  };
  return c10::make_intrusive<MigrateBackend>(ctx.store, ctx.rank, ctx.size, options, policy, factory);
}

// Rank r's input: small integers, exact in every type.
at::Tensor inputOf(int rank, int64_t n, at::ScalarType type) {
  return (at::arange(n, at::kDouble).remainder(3) + rank + 1).to(type);
}

std::string toText(const at::Tensor& t) {
  std::ostringstream out;
  out << t.to(at::kDouble).reshape(-1);
  return out.str();
}

void waitOn(const c10::intrusive_ptr<c10d::Work>& work) { work->wait(); }

// Every collective and p2p op through the engine, checked against values computed without
// communication; each rank runs it bound to its own simulated device.
void everyOp(RankContext& ctx, const PolicyMaker& policy) {
  auto pg = simBackend(ctx, policy);
  const int n = ctx.size, me = ctx.rank;
  const int64_t k = 6;
  auto sumOfInputs = [&](at::ScalarType type) {
    at::Tensor s = at::zeros({k}, at::kDouble);
    for (int r = 0; r < n; ++r) s += inputOf(r, k, at::kDouble);
    return s.to(type);
  };
  for (at::ScalarType type : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kChar, at::kByte, at::kInt,
                              at::kLong}) {
    std::string tag = std::string(" (") + c10::toString(type) + ")";
    std::vector<at::Tensor> t{inputOf(me, k, type)};
    waitOn(pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM)));
    expectEqual(t[0], sumOfInputs(type), "all_reduce SUM" + tag);

    t = {inputOf(me, k, type)};
    waitOn(pg->allreduce(t, allreduceWith(c10d::ReduceOp::MAX)));
    expectEqual(t[0], inputOf(n - 1, k, type), "all_reduce MAX" + tag);

    t = {inputOf(me, k, type)};
    waitOn(pg->allreduce(t, allreduceWith(c10d::ReduceOp::MIN)));
    expectEqual(t[0], inputOf(0, k, type), "all_reduce MIN" + tag);

    std::vector<at::Tensor> b{me == 1 ? inputOf(1, k, type) : at::zeros({k}, type)};
    c10d::BroadcastOptions bo;
    bo.rootRank = 1;
    waitOn(pg->broadcast(b, bo));
    expectEqual(b[0], inputOf(1, k, type), "broadcast" + tag);

    std::vector<std::vector<at::Tensor>> outs{{}};
    for (int r = 0; r < n; ++r) outs[0].push_back(at::full({k}, -1, type));
    std::vector<at::Tensor> in{inputOf(me, k, type)};
    waitOn(pg->allgather(outs, in, {}));
    for (int r = 0; r < n; ++r) expectEqual(outs[0][r], inputOf(r, k, type), "all_gather[" + std::to_string(r) + "]" + tag);

    at::Tensor flat = at::full({k * n}, -1, type);
    waitOn(pg->all_gather_single(flat, in[0], {}));
    for (int r = 0; r < n; ++r) expectEqual(flat.narrow(0, r * k, k), inputOf(r, k, type), "all_gather_into_tensor" + tag);

    at::Tensor rsIn = at::cat({inputOf(me, k * n, type)});
    at::Tensor rsOut = at::full({k}, -1, type);
    waitOn(pg->reduce_scatter_single(rsOut, rsIn, {}));
    at::Tensor rsExpected = at::zeros({k}, at::kDouble);
    for (int r = 0; r < n; ++r) rsExpected += inputOf(r, k * n, at::kDouble).narrow(0, me * k, k);
    expectEqual(rsOut, rsExpected.to(type), "reduce_scatter_tensor" + tag);
  }

  // Float-only reductions: AVG and PREMUL_SUM with a double and with a tensor factor.
  std::vector<at::Tensor> t{inputOf(me, k, at::kFloat)};
  waitOn(pg->allreduce(t, allreduceWith(c10d::ReduceOp::AVG)));
  expectEqual(t[0], sumOfInputs(at::kDouble) / n, "all_reduce AVG");
  t = {inputOf(me, k, at::kFloat)};
  waitOn(pg->allreduce(t, allreduceWith(c10d::makePreMulSum(2.0))));
  expectEqual(t[0], sumOfInputs(at::kDouble) * 2, "all_reduce PREMUL_SUM (double factor)");
  t = {inputOf(me, k, at::kFloat)};
  waitOn(pg->allreduce(t, allreduceWith(c10d::makePreMulSum(at::full({}, 3.0, at::kFloat)))));
  expectEqual(t[0], sumOfInputs(at::kDouble) * 3, "all_reduce PREMUL_SUM (tensor factor)");

  // reduce to a non-zero root; other ranks' inputs stay as they were.
  std::vector<at::Tensor> r{inputOf(me, k, at::kFloat)};
  c10d::ReduceOptions ro;
  ro.rootRank = n - 1;
  waitOn(pg->reduce(r, ro));
  expectEqual(r[0], me == n - 1 ? sumOfInputs(at::kFloat) : inputOf(me, k, at::kFloat), "reduce");

  // list reduce_scatter, gather, scatter.
  std::vector<std::vector<at::Tensor>> rsLists{{}};
  for (int i = 0; i < n; ++i) rsLists[0].push_back(inputOf(me + i, k, at::kFloat));
  std::vector<at::Tensor> rsOut{at::full({k}, -1, at::kFloat)};
  waitOn(pg->reduce_scatter(rsOut, rsLists, {}));
  at::Tensor rsExpected = at::zeros({k}, at::kDouble);
  for (int q = 0; q < n; ++q) rsExpected += inputOf(q + me, k, at::kDouble);
  expectEqual(rsOut[0], rsExpected, "reduce_scatter (list)");

  const int root = 1;
  std::vector<std::vector<at::Tensor>> gatherOut;
  if (me == root) {
    gatherOut.emplace_back();
    for (int q = 0; q < n; ++q) gatherOut[0].push_back(at::full({k}, -1, at::kFloat));
  }
  std::vector<at::Tensor> gatherIn{inputOf(me, k, at::kFloat)};
  c10d::GatherOptions go;
  go.rootRank = root;
  waitOn(pg->gather(gatherOut, gatherIn, go));
  if (me == root) {
    for (int q = 0; q < n; ++q) expectEqual(gatherOut[0][q], inputOf(q, k, at::kFloat), "gather[" + std::to_string(q) + "]");
  }
  std::vector<std::vector<at::Tensor>> scatterIn;
  if (me == root) {
    scatterIn.emplace_back();
    for (int q = 0; q < n; ++q) scatterIn[0].push_back(inputOf(10 * q, k, at::kFloat));
  }
  std::vector<at::Tensor> scatterOut{at::full({k}, -1, at::kFloat)};
  c10d::ScatterOptions so;
  so.rootRank = root;
  waitOn(pg->scatter(scatterOut, scatterIn, so));
  expectEqual(scatterOut[0], inputOf(10 * me, k, at::kFloat), "scatter");

  // all_to_all_single with uneven splits: rank r sends (q + 1) rows to rank q.
  std::vector<int64_t> inSplits, outSplits;
  for (int q = 0; q < n; ++q) inSplits.push_back(q + 1);
  for (int q = 0; q < n; ++q) outSplits.push_back(me + 1);
  int64_t inRows = n * (n + 1) / 2;
  at::Tensor a2aIn = (at::arange(inRows, at::kFloat) + 100 * me).reshape({inRows, 1});
  at::Tensor a2aOut = at::full({n * (me + 1), 1}, -1, at::kFloat);
  waitOn(pg->all_to_all_single(a2aOut, a2aIn, outSplits, inSplits, {}));
  for (int q = 0; q < n; ++q) {
    int64_t offset = me * (me + 1) / 2;  // where rank q put my rows in its input
    at::Tensor expected = (at::arange(offset, offset + me + 1, at::kFloat) + 100 * q).reshape({me + 1, 1});
    expectEqual(a2aOut.narrow(0, q * (me + 1), me + 1), expected, "all_to_all_single from " + std::to_string(q));
  }

  // A ring of send/recv: even ranks send first, odd ranks receive first.
  at::Tensor out = at::full({k}, me, at::kFloat), in2 = at::full({k}, -1, at::kFloat);
  std::vector<at::Tensor> sendT{out}, recvT{in2};
  int next = (me + 1) % n, prev = (me + n - 1) % n;
  if (me % 2 == 0) {
    waitOn(pg->send(sendT, next, 0));
    waitOn(pg->recv(recvT, prev, 0));
  } else {
    waitOn(pg->recv(recvT, prev, 0));
    waitOn(pg->send(sendT, next, 0));
  }
  expectEqual(in2, at::full({k}, prev, at::kFloat), "recv from " + std::to_string(prev));

  c10d::BarrierOptions barrier;
  waitOn(pg->barrier(barrier));
}

TEST(SimulatedDevice, EveryOpOnThreeRanksUnderEachPolicy) {
  for (auto& [name, policy] : std::vector<std::pair<std::string, PolicyMaker>>{
           {"legacy", legacy()}, {"rewritten", rewritten()}, {"rewritten-lazy-p2p", rewrittenLazyP2P()}}) {
    EXPECT_EQ(runRanks(3, [&](RankContext& ctx) { everyOp(ctx, policy); }), "") << name;
  }
}

TEST(SimulatedDevice, EveryOpOnFourRanks) {
  EXPECT_EQ(runRanks(4, [&](RankContext& ctx) { everyOp(ctx, rewritten()); }), "");
}

// Review item 1: members of one communicator on different devices (every multi-GPU job) must
// meet at one rendezvous; before the fix each device waited under its own name until the
// store timed out.
TEST(SimulatedDevice, Defect01_MembersOnDifferentDevicesMeet) {
  EXPECT_EQ(runRanks(3,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, legacy());
                       std::vector<at::Tensor> t{at::ones({4})};
                       waitOn(pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM)));
                       expectEqual(t[0], at::full({4}, 3.0), "sum over three devices");
                       // A pair communicator, on the two ranks' different devices.
                       std::vector<at::Tensor> p{at::full({2}, static_cast<float>(ctx.rank))};
                       if (ctx.rank == 0) waitOn(pg->send(p, 2, 0));
                       if (ctx.rank == 2) {
                         waitOn(pg->recv(p, 0, 0));
                         expectEqual(p[0], at::zeros({2}), "recv over a pair on different devices");
                       }
                     },
                     std::chrono::seconds(25)),
            "");
}

// The simulation must hang (and so fail the test) when members hold different unique ids, or
// it could hide rendezvous bugs like the one above.
TEST(SimulatedDevice, RanksWithDifferentUniqueIdsNeverMeet) {
  std::string failures = runRanks(
      2,
      [](RankContext& ctx) {
        auto api = std::make_shared<SimNcclApi>(ctx.store, SimRuntime::instance());
        ncclUniqueId id;
        (void)api->getUniqueId(&id);  // each rank its own
        ncclComm_t comm;
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        (void)api->commInitRankConfig(&comm, 2, id, ctx.rank, &config);
      },
      std::chrono::seconds(3));
  EXPECT_NE(failures.find("did not finish"), std::string::npos) << failures;
}

// p2p per policy: legacy and nccl-lazy make a 2-rank communicator per pair, the rewritten
// behaviour runs send/recv on the group's communicator.
TEST(SimulatedDevice, PeerToPeerCommunicatorsPerPolicy) {
  auto countAfterP2P = [](const PolicyMaker& policy, std::vector<std::string> expectedKeys) {
    return runRanks(3, [&](RankContext& ctx) {
      auto pg = simBackend(ctx, policy);
      std::vector<at::Tensor> t{at::full({3}, static_cast<float>(ctx.rank))};
      if (ctx.rank == 0) waitOn(pg->send(t, 1, 0));
      if (ctx.rank == 1) waitOn(pg->recv(t, 0, 0));
      if (ctx.rank != 1) return;
      expectEqual(t[0], at::zeros({3}), "received");
      std::vector<std::string> keys;
      for (auto& info : pg->communicators()) keys.push_back(info.key);
      check(keys == expectedKeys, "communicators: " + c10::Join(",", keys));
    });
  };
  EXPECT_EQ(countAfterP2P(legacy(), {"cpu:1", "cpu:1/p2p:0:1"}), "");
  EXPECT_EQ(countAfterP2P(rewritten(), {"cpu:1"}), "");
  EXPECT_EQ(countAfterP2P(rewrittenLazyP2P(), {"cpu:1", "cpu:1/p2p:0:1"}), "");
}

// Review item 4: wait() without a timeout makes the caller's stream wait and returns; the host
// blocks only for a barrier or an explicit timeout.
TEST(SimulatedDevice, Defect04_WaitOrdersTheStreamWithoutBlockingTheHost) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten());
                       JobStream job;
                       // The job's stream is busy for a while before the op can start.
                       job->enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(3000)); });
                       std::vector<at::Tensor> t{at::ones({4})};
                       auto work = pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM));
                       auto started = std::chrono::steady_clock::now();
                       work->wait();
                       auto waited = std::chrono::steady_clock::now() - started;
                       // Margins wide enough for a loaded CI machine: blocking would take 3 s.
                       check(waited < std::chrono::milliseconds(1500), "wait() blocked the host");
                       check(job->pending() > 0, "the job's stream does not wait for the op");
                       // The job stream's next work sees the result.
                       auto seen = std::make_shared<at::Tensor>();
                       job->enqueue([seen, t] { *seen = t[0].clone(); });
                       while (job->pending() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
                       expectEqual(*seen, at::full({4}, 2.0), "result in stream order");
                     }),
            "");
}

// Review item 4, for batches: a coalesced batch and an uneven all_gather (lowered to one) also
// leave the host free.
TEST(SimulatedDevice, Defect04_BatchesWaitWithoutBlockingTheHost) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten());
                       JobStream job;
                       job->enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(3000)); });
                       pg->startCoalescing();
                       std::vector<at::Tensor> a{at::ones({4})};
                       (void)pg->allreduce(a, allreduceWith(c10d::ReduceOp::SUM));
                       auto batch = pg->endCoalescing();
                       std::vector<std::vector<at::Tensor>> outs{{at::zeros({1}), at::zeros({2})}};
                       std::vector<at::Tensor> in{at::full({ctx.rank + 1}, 1.0f)};
                       auto uneven = pg->allgather(outs, in, {});
                       auto started = std::chrono::steady_clock::now();
                       batch->wait();
                       uneven->wait();
                       check(std::chrono::steady_clock::now() - started < std::chrono::milliseconds(1500),
                             "waiting on a batch blocked the host");
                       uneven->wait(std::chrono::milliseconds(20000));  // explicit timeout: the host waits
                       expectEqual(a[0], at::full({4}, 2.0), "the batch's all_reduce");
                       expectEqual(outs[0][1], at::ones({2}), "the uneven all_gather");
                     }),
            "");
}

// Review item 5: an op issued while the job's stream is captured into a graph is not watched
// as if it ran now: the watchdog must not end the process, the work reports completion.
TEST(SimulatedDevice, Defect05_CapturedOpDoesNotEndTheProcess) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten());
                       JobStream job;
                       job->capturing = true;
                       std::vector<at::Tensor> t{at::ones({4})};
                       auto work = pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM));
                       work->wait();
                       std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the watchdog polls it
                       check(work->isCompleted() && work->isSuccess(), "captured op not settled as completed");
                       expectEqual(t[0], at::ones({4}), "a captured op ran at capture time");
                     }),
            "");
}

// Review item 6: abort while ops are in flight; the watchdog keeps polling them and no call may
// reach the freed communicator (the simulation ends the process if one does).
TEST(SimulatedDevice, Defect06_AbortWithOpsInFlightNeverTouchesTheFreedCommunicator) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       Faults stallFirst;
                       stallFirst.stallAt = 1;
                       auto pg = simBackend(ctx, rewritten(), std::chrono::seconds(20), stallFirst);
                       std::vector<at::Tensor> a{at::ones({4})}, b{at::ones({4})};
                       auto first = pg->allreduce(a, allreduceWith(c10d::ReduceOp::SUM));
                       auto second = pg->allreduce(b, allreduceWith(c10d::ReduceOp::SUM));
                       pg->abort();
                       std::this_thread::sleep_for(std::chrono::milliseconds(500));  // watchdog polls
                       check(!second->isSuccess(), "an op of an aborted group reported success");
                       try {
                         std::vector<at::Tensor> c{at::ones({4})};
                         (void)pg->allreduce(c, allreduceWith(c10d::ReduceOp::SUM));
                         check(false, "an op after abort was issued");
                       } catch (const c10::Error&) {
                       }
                     }),
            "");
}

// Review item 6, with a batch open: the abort must not free the communicator while ncclGroupEnd
// still has to launch (or drop) the batch's queued ops on it.
TEST(SimulatedDevice, Defect06_AbortWithABatchOpenFreesTheCommunicatorAfterTheGroupCloses) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten());
                       std::vector<at::Tensor> warm{at::ones({2})};
                       waitOn(pg->allreduce(warm, allreduceWith(c10d::ReduceOp::SUM)));
                       pg->startCoalescing();
                       std::vector<at::Tensor> a{at::ones({2})};
                       (void)pg->allreduce(a, allreduceWith(c10d::ReduceOp::SUM));
                       pg->abort();
                       try {
                         (void)pg->endCoalescing();
                         check(false, "a batch of an aborted group was issued");
                       } catch (const c10::Error&) {
                       }
                     }),
            "");
}

// Review item 7: a batch whose later op reads what the job wrote between ops, and a list
// all_gather inside a batch, whose copies out of the staging buffer must follow the launch.
void batchesOrderEachOpAndCopyAfterTheLaunch(RankContext& ctx) {
  auto pg = simBackend(ctx, rewritten());
  JobStream job;
  at::Tensor first = at::ones({4}), second = at::zeros({4});
  std::vector<std::vector<at::Tensor>> gathered{{}};
  for (int r = 0; r < ctx.size; ++r) gathered[0].push_back(at::full({4}, -1.0));
  std::vector<at::Tensor> gatherIn{at::full({4}, static_cast<float>(ctx.rank))};
  pg->startCoalescing();
  std::vector<at::Tensor> a{first};
  (void)pg->allreduce(a, allreduceWith(c10d::ReduceOp::SUM));
  // The job writes the next op's input on its stream, after a delay.
  job->enqueue([second]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    second.fill_(5.0);
  });
  // A reduction that changes values at one rank too (an in-place one-rank SUM is no work in NCCL).
  std::vector<at::Tensor> b{second};
  (void)pg->allreduce(b, allreduceWith(c10d::makePreMulSum(2.0)));
  (void)pg->allgather(gathered, gatherIn, {});
  auto work = pg->endCoalescing();
  work->wait(std::chrono::milliseconds(15000));
  expectEqual(first, at::full({4}, ctx.size), "first op of the batch");
  expectEqual(second, at::full({4}, 10.0 * ctx.size), "second op read its input before the job wrote it");
  for (int r = 0; r < ctx.size; ++r) {
    expectEqual(gathered[0][r], at::full({4}, r), "all_gather in a batch, from " + std::to_string(r));
  }
}

TEST(SimulatedDevice, Defect07_BatchesOrderEachOpAndCopyAfterTheLaunch) {
  EXPECT_EQ(runRanks(3, batchesOrderEachOpAndCopyAfterTheLaunch), "");
}

// NCCL launches a one-rank communicator's collectives when they are called, not at the group's
// end (docs/simulated-nccl.md), so inside a batch each op of a world of one waits for the job's
// stream itself: a batch's single wait at its end came after the op had read its input.
TEST(SimulatedDevice, OneRankBatchesWaitForTheJobBeforeEachOp) {
  EXPECT_EQ(runRanks(1, batchesOrderEachOpAndCopyAfterTheLaunch), "");
}

// A list all_gather is lowered to a launch of its own (a gather into a staging buffer and copies
// out of it): on a one-rank group the gather reads the input when it is called.
TEST(SimulatedDevice, OneRankListAllGatherReadsWhatTheJobWrote) {
  EXPECT_EQ(runRanks(1,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten());
                       JobStream job;
                       at::Tensor input = at::zeros({4});
                       std::vector<std::vector<at::Tensor>> gathered{{at::full({4}, -1.0)}};
                       job->enqueue([input]() mutable {
                         std::this_thread::sleep_for(std::chrono::milliseconds(300));
                         input.fill_(7.0);
                       });
                       std::vector<at::Tensor> in{input};
                       auto work = pg->allgather(gathered, in, {});
                       work->wait(std::chrono::milliseconds(15000));
                       expectEqual(gathered[0][0], at::full({4}, 7.0), "one-rank list all_gather");
                     }),
            "");
}

// Review item 11: an op that throws between ncclGroupStart and ncclGroupEnd must not leave the
// thread's group open (every later call would be deferred forever: a hang).
// A lowered op may launch no NCCL call at all (gather and all_to_all on a one-rank group copy
// this rank's own part): its copies still wait for what the job queued on its stream.
TEST(SimulatedDevice, LoweredOpsThatOnlyCopyWaitForTheJob) {
  EXPECT_EQ(runRanks(1,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten());
                       JobStream job;
                       at::Tensor input = at::zeros({3});
                       job->enqueue([input]() mutable {
                         std::this_thread::sleep_for(std::chrono::milliseconds(300));
                         input.fill_(7.0);
                       });
                       std::vector<std::vector<at::Tensor>> gathered{{at::full({3}, -1.0)}};
                       std::vector<at::Tensor> in{input};
                       pg->gather(gathered, in, {})->wait(std::chrono::milliseconds(10000));
                       expectEqual(gathered[0][0], at::full({3}, 7.0), "gather copied its input before the job wrote it");
                       std::vector<at::Tensor> outs{at::full({3}, -1.0)};
                       pg->alltoall(outs, in, {})->wait(std::chrono::milliseconds(10000));
                       expectEqual(outs[0], at::full({3}, 7.0), "all_to_all copied its input before the job wrote it");
                     }),
            "");
}

// A coalesced form whose later element is invalid fails at once; the batch the engine opened for
// it is abandoned, so the group's next op runs on its own instead of joining a batch that never
// launches.
TEST(SimulatedDevice, AFailedCoalescedFormLeavesNoBatchOpen) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten());
                       std::vector<at::Tensor> outs{at::zeros({4}), at::zeros({3})};  // the second is the wrong size
                       std::vector<at::Tensor> ins{at::ones({2}), at::ones({2})};
                       try {
                         (void)pg->all_gather_single_coalesced(outs, ins, {});
                         check(false, "an invalid coalesced all_gather was accepted");
                       } catch (const c10::Error&) {
                       }
                       std::vector<at::Tensor> t{at::ones({2})};
                       pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::milliseconds(10000));
                       expectEqual(t[0], at::full({2}, 2.0), "the op after the failed batch");
                     }),
            "");
}

TEST(SimulatedDevice, Defect11_AFailedGroupedOpLeavesNoGroupOpen) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       Faults failSend;
                       failSend.failCall = "ncclSend";  // inside all_to_all's group
                       auto pg = simBackend(ctx, rewritten(), std::chrono::seconds(20), failSend);
                       std::vector<at::Tensor> outs{at::zeros({2}), at::zeros({2})};
                       std::vector<at::Tensor> ins{at::ones({2}), at::ones({2})};
                       try {
                         (void)pg->alltoall(outs, ins, {});
                         check(false, "the failed ncclSend was not reported");
                       } catch (const c10::Error&) {
                       }
                       std::vector<at::Tensor> t{at::ones({2})};
                       pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::milliseconds(10000));
                       expectEqual(t[0], at::full({2}, 2.0), "the op after the failed one");
                     }),
            "");
}

// Review item 12: a PREMUL_SUM tensor factor is handed to NCCL on the device (no host read), and
// every PREMUL_SUM op created is destroyed.
TEST(SimulatedDevice, Defect12_PreMulSumFactorStaysOnTheDevice) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto seams = simulatedSeams(ctx.store);
                       auto* api = dynamic_cast<SimNcclApi*>(seams->api.get());
                       GroupOptions options{"0", "default_pg", std::chrono::seconds(20), {}, simDevice(ctx.rank)};
                       backends::FactoryMaker factory = [seams](const c10::intrusive_ptr<c10d::Store>& s,
                                                                const GroupOptions& o) {
                         return backends::makeCommunicatorFactory(s, nullptr, o.groupName, o.connectTimeout(), seams, c10::kCPU,
                                                                         o.deviceComms);
                       };
                       auto pg = c10::make_intrusive<MigrateBackend>(ctx.store, ctx.rank, ctx.size, options, rewritten(),
                                                                     factory);
                       std::vector<at::Tensor> t{at::ones({3})};
                       waitOn(pg->allreduce(t, allreduceWith(c10d::makePreMulSum(at::full({}, 4.0)))));
                       expectEqual(t[0], at::full({3}, 8.0), "PREMUL_SUM with a tensor factor");
                       auto calls = api->calls();
                       check(std::count(calls.begin(), calls.end(), "ncclRedOpCreatePreMulSum(device)") == 1,
                             "the tensor factor did not reach NCCL as a device scalar");
                       check(api->livePreMulSumOps() == 0, "a PREMUL_SUM op was never destroyed");
                     }),
            "");
}

// A stalled op times out: the work fails with a backend error naming the timeout, the group
// reports TIMEOUT, and the process goes on.
TEST(SimulatedDevice, StalledOpTimesOutAndTheProcessSurvives) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       Faults stallFirst;
                       stallFirst.stallAt = 1;
                       auto pg = simBackend(ctx, rewritten(), std::chrono::milliseconds(800), stallFirst);
                       std::vector<at::Tensor> t{at::ones({4})};
                       auto work = pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM));
                       try {
                         work->wait(std::chrono::milliseconds(5000));
                         check(false, "a stalled op completed");
                       } catch (const c10::DistBackendError& e) {
                         check(std::string(e.what()).find("timed out") != std::string::npos ||
                                   std::string(e.what()).find("timeout") != std::string::npos,
                               std::string("not a timeout: ") + e.what());
                       }
                       std::this_thread::sleep_for(std::chrono::milliseconds(300));
                       check(pg->getError() == c10d::ErrorType::TIMEOUT, "group error is not TIMEOUT");
                     }),
            "");
}

// The abort that follows a timeout releases the stream at once, as ncclCommAbort ends kernels
// waiting on dead peers, even while the simulated transfer is stuck in a store call: the host
// waiting for the op raises within the timeout, not when the store call returns.
TEST(SimulatedDevice, AnAbortReleasesTheStreamWhileAStoreCallIsStuck) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto transfers = c10::make_intrusive<StuckStore>(ctx.store);
                       auto pg = simBackend(ctx, rewritten(), std::chrono::milliseconds(800), {}, {},
                                            backends::EngineServices::process(), transfers);
                       std::vector<at::Tensor> t{at::ones({4})};
                       pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait();  // connected, healthy
                       if (ctx.rank == 1) {
                         std::this_thread::sleep_for(std::chrono::seconds(4));  // alive, never joins the op
                         return;
                       }
                       transfers->armed = true;
                       auto started = std::chrono::steady_clock::now();
                       auto work = pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM));
                       try {
                         work->wait();  // the host waits for the op's stream (the simulated host)
                         check(false, "an op without rank 1 completed");
                       } catch (const c10::DistBackendError&) {
                       }
                       auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
                       check(seconds < 3.0, "the op raised " + std::to_string(seconds) +
                                                " s after its issue, behind the stuck store call; the timeout is 0.8 s");
                     }),
            "");
}

// The first collective of a group whose member never issues it fails within the group's
// timeout, through its work like any failed op (the error names the op and the missing rank,
// abort hooks run), instead of blocking the issuing thread in NCCL's connect for ever.
TEST(SimulatedDevice, AMissingPeerFailsTheFirstCollectiveWithinTheTimeout) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto timeout = std::chrono::milliseconds(1500);
                       auto pg = simBackend(ctx, rewritten(), timeout);  // eager: both communicators exist
                       if (ctx.rank == 1) {
                         ctx.store->wait({"rank 0 done"}, std::chrono::seconds(25));  // alive, never issues
                         return;
                       }
                       auto hooks = std::make_shared<std::atomic<int>>(0);  // the watchdog may outlive this scope
                       pg->registerAbortHook(1, [hooks] { ++*hooks; });
                       std::vector<at::Tensor> t{at::ones({4})};
                       auto started = std::chrono::steady_clock::now();
                       std::string error;
                       try {
                         pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::seconds(20));
                       } catch (const c10::DistBackendError& e) {
                         error = e.what();
                       }
                       auto took = std::chrono::steady_clock::now() - started;
                       ctx.store->set("rank 0 done", std::vector<uint8_t>{1});
                       check(!error.empty(), "an all_reduce without rank 1 completed");
                       check(error.find("all_reduce") != std::string::npos && error.find("rank 0") != std::string::npos &&
                                 error.find("group rank(s) 1 did not arrive") != std::string::npos,
                             "the error names neither the op nor the missing rank: " + error);
                       check(took < timeout + backends::kMeetingAnswerGrace + std::chrono::milliseconds(500),
                             "failed after " + std::to_string(std::chrono::duration<double>(took).count()) + " s");
                       auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
                       while (hooks->load() == 0 && std::chrono::steady_clock::now() < until) {
                         std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the watchdog runs them
                       }
                       check(hooks->load() == 1, "abort hooks ran " + std::to_string(hooks->load()) + " times");
                       check(pg->getError() == c10d::ErrorType::COMM_ERROR, "the group's error is not COMM_ERROR");
                     },
                     std::chrono::seconds(30)),
            "");
}

// A batch whose first collective finds a member missing fails as a whole within the timeout:
// none of its collectives reach NCCL, whose group end would connect and wait for ever.
TEST(SimulatedDevice, AMissingPeerFailsABatchsFirstCollectiveWithinTheTimeout) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto timeout = std::chrono::milliseconds(1500);
                       auto pg = simBackend(ctx, rewritten(), timeout);  // eager: both communicators exist
                       if (ctx.rank == 1) {
                         ctx.store->wait({"rank 0 done"}, std::chrono::seconds(25));  // alive, never issues
                         return;
                       }
                       std::vector<at::Tensor> t{at::ones({4}), at::ones({2})};
                       auto started = std::chrono::steady_clock::now();
                       std::string error;
                       try {
                         c10d::AllreduceCoalescedOptions sum;
                         pg->allreduce_coalesced(t, sum)->wait(std::chrono::seconds(20));
                       } catch (const c10::DistBackendError& e) {
                         error = e.what();
                       }
                       auto took = std::chrono::steady_clock::now() - started;
                       ctx.store->set("rank 0 done", std::vector<uint8_t>{1});
                       check(error.find("group rank(s) 1 did not arrive") != std::string::npos,
                             "the batch did not fail naming the missing rank: " + error);
                       check(took < timeout + backends::kMeetingAnswerGrace + std::chrono::milliseconds(500),
                             "failed after " + std::to_string(std::chrono::duration<double>(took).count()) + " s");
                       expectEqual(t[0], at::ones({4}), "a tensor of the failed batch");
                     },
                     std::chrono::seconds(30)),
            "");
}

// Pair communicators (legacy policy) connect each direction on its first send: rank 1 sends to
// rank 0 (the pair's communicator is created, that direction connects), then rank 0's first send
// to rank 1, which rank 1 never receives, fails within the timeout instead of hanging the caller.
TEST(SimulatedDevice, AMissingPeerFailsTheFirstSendOfADirectionWithinTheTimeout) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto timeout = std::chrono::milliseconds(1500);
                       auto pg = simBackend(ctx, legacy(), timeout);
                       std::vector<at::Tensor> t{at::full({4}, static_cast<float>(ctx.rank + 1))};
                       if (ctx.rank == 1) {
                         pg->send(t, 0, 0)->wait();
                         ctx.store->wait({"rank 0 done"}, std::chrono::seconds(25));  // alive, never receives
                         return;
                       }
                       pg->recv(t, 1, 0)->wait();
                       expectEqual(t[0], at::full({4}, 2.0), "recv from rank 1");
                       auto started = std::chrono::steady_clock::now();
                       std::string error;
                       try {
                         pg->send(t, 1, 0)->wait(std::chrono::seconds(20));
                       } catch (const c10::DistBackendError& e) {
                         error = e.what();
                       }
                       auto took = std::chrono::steady_clock::now() - started;
                       ctx.store->set("rank 0 done", std::vector<uint8_t>{1});
                       check(!error.empty(), "a send rank 1 never receives completed");
                       check(error.find("send") != std::string::npos &&
                                 error.find("group rank(s) 1 did not arrive") != std::string::npos,
                             "the error names neither the op nor the missing rank: " + error);
                       check(took < timeout + backends::kMeetingAnswerGrace + std::chrono::milliseconds(500),
                             "failed after " + std::to_string(std::chrono::duration<double>(took).count()) + " s");
                     },
                     std::chrono::seconds(30)),
            "");
}

// A simulated NCCL communicator of `size` ranks for tests that call NCCL directly: rank 0 makes
// the unique id and the others read it from the store.
ncclComm_t simCommunicator(RankContext& ctx, backends::nccl::NcclApi& api, int size) {
  ncclUniqueId id = sharedUniqueId(ctx, api);
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  check(api.commInitRankConfig(&comm, size, id, ctx.rank, &config) == ncclSuccess, "ncclCommInitRankConfig");
  return comm;
}

// A rank's simulated seams and a communicator of `size` ranks made through their NCCL.
struct SeamsAndCommunicator {
  std::shared_ptr<const backends::NcclSeams> seams;
  SimNcclApi* api;
  ncclComm_t comm;
};

SeamsAndCommunicator simSeamsAndCommunicator(RankContext& ctx, int size) {
  auto seams = simulatedSeams(ctx.store);
  auto* api = dynamic_cast<SimNcclApi*>(seams->api.get());
  return {seams, api, simCommunicator(ctx, *api, size)};
}

cudaStream_t forNccl(const std::shared_ptr<SimStream>& stream) {
  return static_cast<cudaStream_t>(static_cast<void*>(stream.get()));
}

// ncclCommDestroy returns only once the stream has passed the communicator's kernels
// (docs/simulated-nccl.md), so letting go of a communicator whose op never ends would block the
// thread that let go (the watchdog, or the interpreter's exit). It returns within kTeardownWait.
TEST(SimulatedDevice, LettingGoOfACommunicatorWithAStuckOpIsBounded) {
  EXPECT_EQ(runRanks(1,
                     [](RankContext& ctx) {
                       Faults stallFirst;
                       stallFirst.stallAt = 1;
                       auto api = simulatedSeams(ctx.store, stallFirst)->api;
                       ncclComm_t comm = simCommunicator(ctx, *api, 1);
                       auto stream = SimRuntime::instance()->makeWorkerStream("comm");
                       at::Tensor t = at::ones({4});
                       auto handle = std::make_shared<backends::nccl::CommHandle>(api, comm, "pg", 0, "sim:0");
                       handle->use("allreduce", [&](ncclComm_t c) {
                         check(api->allReduce(t.data_ptr(), t.data_ptr(), 4, ncclFloat32, ncclSum, c,
                                              forNccl(stream)) == ncclSuccess,
                               "all_reduce");
                       });
                       auto started = std::chrono::steady_clock::now();
                       handle.reset();  // not broken: ncclCommDestroy, behind the stalled op
                       auto took = std::chrono::steady_clock::now() - started;
                       check(took < backends::nccl::kTeardownWait + std::chrono::seconds(1),
                             "letting go took " + std::to_string(std::chrono::duration<double>(took).count()) + " s");
                       auto calls = dynamic_cast<SimNcclApi&>(*api).calls();
                       check(std::count(calls.begin(), calls.end(), "ncclCommDestroy") == 1, "no ncclCommDestroy");
                     },
                     std::chrono::seconds(20)),
            "");
}

// NCCL allows no call on a communicator while another thread is inside one (the simulated NCCL
// ends the process then): an abort while a call is stuck inside NCCL (its first collective,
// connecting, waits for rank 1) returns within its bound and leaves the freeing to the call's
// thread, which aborts the communicator once its call returns.
TEST(SimulatedDevice, AnAbortNeverCallsNcclBesideACallInsideIt) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto [seams, api, comm] = simSeamsAndCommunicator(ctx, 2);
                       auto stream = SimRuntime::instance()->makeWorkerStream("comm");
                       at::Tensor t = at::ones({4});
                       auto allReduce = [&](ncclComm_t c) {
                         check(api->allReduce(t.data_ptr(), t.data_ptr(), 4, ncclFloat32, ncclSum, c,
                                              forNccl(stream)) == ncclSuccess,
                               "all_reduce");
                       };
                       if (ctx.rank == 1) {
                         ctx.store->wait({"aborted"}, std::chrono::seconds(25));
                         allReduce(comm);  // connects: rank 0's call returns
                         return;
                       }
                       auto handle = std::make_shared<backends::nccl::CommHandle>(seams->api, comm, "pg", 0, "sim:0");
                       std::thread caller([&] { handle->use("allreduce", allReduce); });
                       // Until the call is inside NCCL, connecting (a fixed pause was too short on a loaded machine).
                       auto callInside = [&] {
                         auto calls = api->calls();
                         return std::count(calls.begin(), calls.end(), "ncclAllReduce") > 0;
                       };
                       auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(10);
                       while (!callInside() && std::chrono::steady_clock::now() < giveUp) {
                         std::this_thread::sleep_for(std::chrono::milliseconds(5));
                       }
                       check(callInside(), "the all_reduce never reached NCCL");
                       std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the note, into the connect
                       auto started = std::chrono::steady_clock::now();
                       handle->abort();
                       auto took = std::chrono::steady_clock::now() - started;
                       auto calls = api->calls();
                       bool abortedBesideTheCall = std::count(calls.begin(), calls.end(), "ncclCommAbort") > 0;
                       ctx.store->set("aborted", std::vector<uint8_t>{1});
                       caller.join();
                       check(!abortedBesideTheCall, "ncclCommAbort was called while the all_reduce was inside NCCL");
                       check(took < backends::nccl::kAbortLockWait + std::chrono::milliseconds(500),
                             "the abort took " + std::to_string(std::chrono::duration<double>(took).count()) + " s");
                       calls = api->calls();
                       check(!calls.empty() && calls.back() == "ncclCommAbort",
                             "the call's thread did not abort the communicator as its call returned");
                       check(handle->aborted(), "the handle does not say it was aborted");
                     },
                     std::chrono::seconds(30)),
            "");
}

// An op issued as its group is aborted under it (the campaign's sim_error run: rank 0's ring
// between its send and its receive) is refused with a DistBackendError, as torch refuses an op
// on an aborted communicator; before, it failed as a usage error and reached the job as a
// RuntimeError.
TEST(SimulatedDevice, AnOpOnACommunicatorAbortedUnderItIsRefusedAsABackendErrorNotAUsageError) {
  EXPECT_EQ(runRanks(1,
                     [](RankContext& ctx) {
                       auto [seams, api, comm] = simSeamsAndCommunicator(ctx, 1);
                       auto handle = std::make_shared<backends::nccl::CommHandle>(seams->api, comm, "pg", 0, "sim:0");
                       handle->abort();
                       bool called = false;
                       try {
                         handle->use("recv", [&](ncclComm_t) { called = true; });
                         check(false, "an op on an aborted communicator was issued");
                       } catch (const c10::DistBackendError& e) {
                         check(!called, "the op reached NCCL");
                         check(std::string(e.what()).find("the communicator was aborted") != std::string::npos, e.what());
                       }
                     }),
            "");
}

// NCCL connects on first use inside the call that launches the op, and waits there for its peers
// (docs/simulated-nccl.md): the simulated NCCL's first collective on a communicator returns only
// once every member called one, and its second does not wait.
TEST(SimulatedDevice, TheFirstCollectiveWaitsInTheCallForThePeersToConnect) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto seams = simulatedSeams(ctx.store);
                       backends::nccl::NcclApi& api = *seams->api;
                       ncclComm_t comm = simCommunicator(ctx, api, 2);
                       auto stream = SimRuntime::instance()->makeWorkerStream("comm");
                       cudaStream_t handle = forNccl(stream);
                       at::Tensor t = at::ones({4});
                       auto lag = std::chrono::milliseconds(1500);
                       if (ctx.rank == 1) std::this_thread::sleep_for(lag);
                       auto started = std::chrono::steady_clock::now();
                       check(api.allReduce(t.data_ptr(), t.data_ptr(), 4, ncclFloat32, ncclSum, comm, handle) ==
                                 ncclSuccess,
                             "first all_reduce");
                       auto firstCall = std::chrono::steady_clock::now() - started;
                       if (ctx.rank == 0) {
                         check(firstCall > lag - std::chrono::milliseconds(300),
                               "the first all_reduce returned after " +
                                   std::to_string(std::chrono::duration<double>(firstCall).count()) +
                                   " s, before rank 1 called it");
                       }
                       if (ctx.rank == 0) std::this_thread::sleep_for(lag);
                       started = std::chrono::steady_clock::now();
                       check(api.allReduce(t.data_ptr(), t.data_ptr(), 4, ncclFloat32, ncclSum, comm, handle) ==
                                 ncclSuccess,
                             "second all_reduce");
                       auto secondCall = std::chrono::steady_clock::now() - started;
                       if (ctx.rank == 1) {
                         check(secondCall < std::chrono::milliseconds(500),
                               "the second all_reduce waited in the call for rank 0");
                       }
                       auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
                       while (stream->pending() > 0 && std::chrono::steady_clock::now() < until) {
                         std::this_thread::sleep_for(std::chrono::milliseconds(1));
                       }
                       expectEqual(t, at::full({4}, 4.0), "two all_reduces");
                       check(api.commDestroy(comm) == ncclSuccess, "destroy");
                     }),
            "");
}

// Collectives of different counts at the same point of the sequence: the simulation never
// matches them (each rank compares the shape its peers posted), so the watchdog's timeout fails
// them on every rank. What this proves is the code's handling of ops that never complete. It says
// nothing of NCCL's values: NCCL exchanges nothing about the op, and the rank of the smaller count
// may complete with wrong values (docs/simulated-nccl.md), so no assertion here is about values.
TEST(SimulatedDevice, CollectivesTheSimulationNeverMatchesTimeOutOnEveryRank) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten(), std::chrono::milliseconds(1000));
                       // Both shapes once on every rank: connected and met (the members meet
                       // before each collective shape's first op), healthy.
                       for (int64_t n : {4, 8}) {
                         std::vector<at::Tensor> first{at::ones({n})};
                         pg->allreduce(first, allreduceWith(c10d::ReduceOp::SUM))->wait();
                       }
                       int64_t count = ctx.rank == 0 ? 4 : 8;
                       std::vector<at::Tensor> t{at::full({count}, static_cast<float>(ctx.rank + 1))};
                       std::string error;
                       try {
                         pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::seconds(10));
                       } catch (const c10::DistBackendError& e) {
                         error = e.what();
                       }
                       check(!error.empty(), "all_reduces of 4 and 8 elements completed");
                       check(error.find("timeout") != std::string::npos, "not the watchdog's timeout: " + error);
                       check(pg->getError() == c10d::ErrorType::TIMEOUT, "the group's error is not TIMEOUT");
                     }),
            "");
}

// A communicator's meeting ends within its timeout and grace whatever the store does: a store
// call stuck in the library (here, every call) fails the creation with the store named.
TEST(MemberMeeting, AStuckStoreEndsTheMeetingWithinItsTimeout) {
  auto store = c10::make_intrusive<StuckStore>(c10::make_intrusive<c10d::HashStore>());
  store->armed = true;
  backends::CommunicatorInfo info;
  info.key = "cpu:0";
  info.size = 2;
  info.groupRanks = {0, 1};
  auto timeout = std::chrono::milliseconds(300);
  auto started = std::chrono::steady_clock::now();
  try {
    backends::meetMembers(store, "meeting", info, "0", timeout);
    FAIL() << "a meeting without its other member returned";
  } catch (const c10::DistBackendError& e) {
    EXPECT_NE(std::string(e.what()).find("the group's store did not answer"), std::string::npos) << e.what();
  }
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_LT(took, timeout + backends::kMeetingAnswerGrace + std::chrono::milliseconds(500))
      << std::chrono::duration<double>(took).count() << " s";
  store->release();  // the meeting's thread, left behind, ends now
}

#if NCCL_MIGRATE_TORCH_HAS_SHRINK
// The watchdog's path and shrink's, on the NCCL communicator's code: rank 2 never joins, the
// others' op times out (watchdog: settle, hooks, abort), then they shrink without it
// (SHRINK_ABORT) and the child's op is right. A smoke test of those threads together (the
// tsan preset runs it); both survivors time out at once, so shrink's wait for late ones is
// shown by the Python suite instead.
TEST(SimulatedDevice, SurvivorsOfATimedOutOpShrinkAndGoOn) {
  EXPECT_EQ(runRanks(3,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten(), std::chrono::milliseconds(800));
                       if (ctx.rank == 2) {
                         std::this_thread::sleep_for(std::chrono::seconds(3));  // alive, never joins
                         return;
                       }
                       auto hooks = std::make_shared<std::atomic<int>>(0);  // the watchdog may outlive this scope
                       pg->registerAbortHook(1, [hooks] { ++*hooks; });
                       std::vector<at::Tensor> t{at::ones({4})};
                       auto work = pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM));
                       try {
                         work->wait(std::chrono::milliseconds(5000));
                         check(false, "an op without rank 2 completed");
                       } catch (const c10::DistBackendError&) {
                       }
                       auto child = pg->shrink({2}, /*SHRINK_ABORT*/ 1, nullptr);
                       check(child->getSize() == 2 && child->getRank() == ctx.rank, "wrong child rank or size");
                       std::vector<at::Tensor> u{at::full({4}, static_cast<double>(ctx.rank + 1))};
                       child->allreduce(u, allreduceWith(c10d::ReduceOp::SUM))->wait();
                       check(u[0].equal(at::full({4}, 3.0)), "child all_reduce: " + toText(u[0]));
                       auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
                       while (hooks->load() == 0 && std::chrono::steady_clock::now() < until) {
                         std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the watchdog runs them
                       }
                       check(hooks->load() == 1, "abort hooks ran " + std::to_string(hooks->load()) + " times");
                     }),
            "");
}
#endif

// What an observer of the engine's ops hears: each op once at issue with its identity, and once
// when it settles (with the error when it failed).
class RecordingObserver final : public backends::OpObserver {
 public:
  std::optional<uint64_t> onIssued(const backends::IssuedOp& op) override {
    std::lock_guard<std::mutex> lock(mutex);
    issued.push_back(op.backendName + ":" + op.name + "#" + std::to_string(op.collectiveSeq) +
                     (op.inBatch ? " in batch" : ""));
    return issued.size() - 1;
  }
  void onSettled(uint64_t token, const std::exception_ptr& error) override {
    std::lock_guard<std::mutex> lock(mutex);
    settled.push_back(issued.at(token) + (error ? " failed" : " done"));
  }
  std::vector<std::string> settledSoFar() {
    std::lock_guard<std::mutex> lock(mutex);
    return settled;
  }
  std::mutex mutex;
  std::vector<std::string> issued, settled;
};

std::string joinedText(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += "[" + item + "]";
  return out;
}

// Engine services are passed in: a backend built with its own records there (its recorder starts
// empty, whatever ran before in the process), and every observer hears issue and settlement of
// ops, a batch's members included, a stalled op as failed.
TEST(SimulatedDevice, ObserversOfFreshServicesHearEveryOpOnce) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       Faults stallThird;
                       stallThird.stallAt = 3;
                       auto observer = std::make_shared<RecordingObserver>();
                       auto services = backends::EngineServices::fresh(16, {observer});
                       size_t processEntries = backends::EngineServices::process()->flightRecorder->entries().size();
                       auto pg = simBackend(ctx, rewritten(), std::chrono::milliseconds(1500), stallThird, {}, services);
                       std::vector<at::Tensor> t{at::ones({4})};
                       pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait();
                       pg->startCoalescing();
                       (void)pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM));
                       pg->endCoalescing()->wait();
                       auto stalled = pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM));
                       try {
                         stalled->wait(std::chrono::milliseconds(5000));
                       } catch (const c10::DistBackendError&) {
                       }
                       std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the watchdog settles it
                       std::string issued = joinedText(observer->issued);
                       check(issued == "[nccl2:all_reduce#1][nccl2:all_reduce#2 in batch][nccl2:coalesced#3]"
                                       "[nccl2:all_reduce#4]",
                             "issued: " + issued);
                       std::vector<std::string> settled = observer->settledSoFar();
                       for (const char* expected : {"[nccl2:all_reduce#1 done]", "[nccl2:coalesced#3 done]",
                                                    "[nccl2:all_reduce#4 failed]"}) {
                         check(joinedText(settled).find(expected) != std::string::npos,
                               std::string("not settled as ") + expected + ": " + joinedText(settled));
                       }
                       auto entries = services->flightRecorder->entries();
                       check(entries.size() == 3, "the fresh recorder holds " + std::to_string(entries.size()) +
                                                      " entries, not the 3 ops outside the batch and the batch");
                       check(entries[0].state == "completed" && entries[2].state == "started",
                             "a failed op must stay started: " + entries[2].state);
                       check(backends::EngineServices::process()->flightRecorder->entries().size() == processEntries,
                             "the process's recorder recorded ops of a backend with its own services");
                     }),
            "");
}

// An op that finished keeps its result in its future, though the group was aborted after it
// (a later op timed out) before the job asked for the future.
TEST(SimulatedDevice, TheFutureOfAFinishedOpOutlivesALaterAbort) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       Faults stallSecond;
                       stallSecond.stallAt = 2;
                       auto pg = simBackend(ctx, rewritten(), std::chrono::milliseconds(600), stallSecond);
                       std::vector<at::Tensor> t{at::ones({4})}, u{at::ones({4})};
                       auto finished = pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM));
                       finished->wait();
                       check(finished->isCompleted() && finished->isSuccess(), "the first op did not finish");
                       auto stalled = pg->allreduce(u, allreduceWith(c10d::ReduceOp::SUM));
                       try {
                         stalled->wait();
                         check(false, "a stalled op completed");
                       } catch (const c10::DistBackendError&) {
                       }
                       auto future = finished->getFuture();
                       future->wait();
                       if (future->hasError()) check(false, "the finished op's future failed: " + future->tryRetrieveErrorMessage());
                       expectEqual(future->value().toTensorList()[0], at::full({4}, 2.0), "the finished op's future");
                     }),
            "");
}

// Ops of no elements complete, as in NCCL: its collectives are discarded at the call, a send and
// receive of none still meet.
TEST(SimulatedDevice, OpsOfNoElementsComplete) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten(), std::chrono::seconds(10));
                       std::vector<at::Tensor> t{at::ones({0})};
                       pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::milliseconds(8000));
                       c10d::BroadcastOptions fromRank0;
                       pg->broadcast(t, fromRank0)->wait(std::chrono::milliseconds(8000));
                       std::vector<at::Tensor> p2p{at::ones({0})};
                       auto work = ctx.rank == 0 ? pg->send(p2p, 1, 0) : pg->recv(p2p, 0, 0);
                       work->wait(std::chrono::milliseconds(8000));
                     }),
            "");
}

// NCCL's asynchronous error fails the op it interrupts and the group reports COMM_ERROR.
TEST(SimulatedDevice, AsynchronousErrorFailsThePendingOp) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       Faults failSecond;
                       failSecond.asyncErrorAt = 2;
                       auto pg = simBackend(ctx, rewritten(), std::chrono::seconds(20), failSecond);
                       std::vector<at::Tensor> t{at::ones({4})};
                       pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::milliseconds(10000));
                       auto work = pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM));
                       try {
                         work->wait(std::chrono::milliseconds(10000));
                         check(false, "the op completed despite NCCL's error");
                       } catch (const c10::DistBackendError& e) {
                         check(std::string(e.what()).find("remote error") != std::string::npos,
                               std::string("not NCCL's error: ") + e.what());
                       }
                       check(pg->getError() == c10d::ErrorType::COMM_ERROR, "group error is not COMM_ERROR");
                     }),
            "");
}

// Review item 10: a legacy future completes in the communicator's stream order and leaves the
// caller's stream alone (DDP's comm hooks overlap on that); nccl2's makes the caller's stream
// wait for the op at get_future().
void futureOrder(RankContext& ctx, const PolicyMaker& policy, bool callerStreamWaits) {
  auto pg = simBackend(ctx, policy);
  std::vector<at::Tensor> first{at::ones({2})};
  pg->allreduce(first, allreduceWith(c10d::ReduceOp::SUM))->wait();  // connected: the next call does not wait
  JobStream job;
  if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2000));  // the op cannot finish before
  std::vector<at::Tensor> t{at::ones({2})};
  auto work = pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM));
  auto started = std::chrono::steady_clock::now();
  auto future = work->getFuture();
  auto markerAt = std::make_shared<std::atomic<int64_t>>(-1);
  job->enqueue([markerAt, started] {
    *markerAt = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  });
  future->wait();
  while (*markerAt < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  expectEqual(t[0], at::full({2}, 2.0), "the future's result");
  if (ctx.rank == 0) {
    check(callerStreamWaits ? *markerAt >= 1500 : *markerAt < 1000,
          "the job's next work ran " + std::to_string(markerAt->load()) + " ms after get_future()");
  }
}

TEST(SimulatedDevice, Defect10_LegacyFuturesLeaveTheCallersStreamAlone) {
  EXPECT_EQ(runRanks(2, [](RankContext& ctx) { futureOrder(ctx, legacy(), /*callerStreamWaits=*/false); }), "");
}

TEST(SimulatedDevice, Defect10_RewrittenFuturesMakeTheCallersStreamWait) {
  EXPECT_EQ(runRanks(2, [](RankContext& ctx) { futureOrder(ctx, rewritten(), /*callerStreamWaits=*/true); }), "");
}

// torch's per-op timeout (barrier(timeout=) in Python) bounds that op, not the group's timeout.
TEST(SimulatedDevice, BarrierHonoursItsOwnTimeout) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       Faults stallFirst;
                       stallFirst.stallAt = 1;
                       auto pg = simBackend(ctx, rewritten(), std::chrono::seconds(30), stallFirst);
                       c10d::BarrierOptions opts;
                       opts.timeout = std::chrono::milliseconds(600);
                       auto started = std::chrono::steady_clock::now();
                       try {
                         pg->barrier(opts)->wait();
                         check(false, "a stalled barrier completed");
                       } catch (const c10::DistBackendError&) {
                       }
                       check(std::chrono::steady_clock::now() - started < std::chrono::seconds(5),
                             "the barrier waited for the group's timeout, not its own");
                     }),
            "");
}

// Review item 13: a communicator made in NCCL's nonblocking mode (pg_options.config.blocking=0
// or TORCH_NCCL_USE_COMM_NONBLOCKING=1) returns from init before it is ready; no op may reach it
// before it is. The lag is inside the simulated init, after the member meetings that precede
// init and the first op: every rank's first op then reaches a communicator whose init is still
// in progress, and only waiting until it is ready keeps the op from being refused.
TEST(SimulatedDevice, Defect13_NonblockingCommunicatorsAreReadyBeforeTheirFirstOp) {
  EXPECT_EQ(runRanks(3,
                     [](RankContext& ctx) {
                       // Rank 2's init announces itself to its peers 500 ms late, so no member's
                       // init is done before then.
                       auto lag = std::chrono::milliseconds(ctx.rank == 2 ? 500 : 0);
                       auto transfers =
                           c10::make_intrusive<LaggingStore>(ctx.store, "/init/" + std::to_string(ctx.rank), lag);
                       backends::DeviceCommOptions nonblocking;
                       nonblocking.blocking = 0;
                       auto pg = simBackend(ctx, rewritten(), std::chrono::seconds(20), {}, nonblocking,
                                            backends::EngineServices::process(), transfers);
                       std::vector<at::Tensor> t{at::ones({2})};
                       pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::milliseconds(10000));
                       expectEqual(t[0], at::full({2}, 3.0), "first op on a nonblocking communicator");
                     }),
            "");
}

// Review item 13, for ops: in nonblocking mode NCCL may answer any call with ncclInProgress
// and take no other call until the communicator is done issuing it. Every op, batch and lowered
// form (gather and all_gather lists, barrier) must wait for that, or the next call is refused.
TEST(SimulatedDevice, Defect13_NonblockingCallsAreIssuedBeforeTheNext) {
  EXPECT_EQ(runRanks(3,
                     [](RankContext& ctx) {
                       auto seams = simulatedSeams(ctx.store);
                       auto* api = dynamic_cast<SimNcclApi*>(seams->api.get());
                       GroupOptions options{"0", "default_pg", std::chrono::seconds(20), {}, simDevice(ctx.rank)};
                       options.deviceComms.blocking = 0;
                       auto pg = simBackendOver(ctx, seams, options, rewritten());
                       std::vector<at::Tensor> t{at::ones({2})};
                       waitOn(pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM)));
                       waitOn(pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM)));
                       expectEqual(t[0], at::full({2}, 9.0), "two all_reduces in a row");
                       std::vector<std::vector<at::Tensor>> gathered{{}};
                       for (int r = 0; r < ctx.size; ++r) gathered[0].push_back(at::full({2}, -1.0));
                       std::vector<at::Tensor> in{at::full({2}, static_cast<float>(ctx.rank))};
                       waitOn(pg->allgather(gathered, in, {}));
                       c10d::GatherOptions go;
                       go.rootRank = 1;
                       std::vector<std::vector<at::Tensor>> toRoot;
                       if (ctx.rank == 1) {
                         toRoot.emplace_back();
                         for (int r = 0; r < ctx.size; ++r) toRoot[0].push_back(at::full({2}, -1.0));
                       }
                       waitOn(pg->gather(toRoot, in, go));
                       waitOn(pg->barrier({}));
                       for (int r = 0; r < ctx.size; ++r) {
                         expectEqual(gathered[0][r], at::full({2}, r), "all_gather, from " + std::to_string(r));
                         if (ctx.rank == 1) expectEqual(toRoot[0][r], at::full({2}, r), "gather, from " + std::to_string(r));
                       }
                       check(api->inProgressReturns() >= 5,
                             "the simulated NCCL answered only " + std::to_string(api->inProgressReturns()) +
                                 " calls with ncclInProgress");
                     }),
            "");
}

// NCCL_COMM_BLOCKING=0 makes NCCL create every communicator in nonblocking mode whatever its
// config says (docs/simulated-nccl.md): the communicator must expect ncclInProgress from init
// and every call, as with config.blocking=0.
TEST(SimulatedDevice, NcclCommBlockingZeroMakesCommunicatorsNonblocking) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       setenv("NCCL_COMM_BLOCKING", "0", 1);
                       auto seams = simulatedSeams(ctx.store);
                       auto* api = dynamic_cast<SimNcclApi*>(seams->api.get());
                       GroupOptions options{"0", "default_pg", std::chrono::seconds(20), {}, simDevice(ctx.rank)};
                       backends::applyNcclEnvironment(options);
                       auto pg = simBackendOver(ctx, seams, options, rewritten());
                       std::vector<at::Tensor> t{at::ones({2})};
                       waitOn(pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM)));
                       waitOn(pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM)));
                       expectEqual(t[0], at::full({2}, 4.0), "two all_reduces under NCCL_COMM_BLOCKING=0");
                       check(api->inProgressReturns() >= 2,
                             "the simulated NCCL answered only " + std::to_string(api->inProgressReturns()) +
                                 " calls with ncclInProgress");
                     }),
            "");
}

// NCCL discards a collective of no elements when it is called (docs/simulated-nccl.md): a rank
// that issues one its peers do not issue waits for nobody, and the next collective still meets.
TEST(SimulatedDevice, AnEmptyCollectiveIsDiscardedAtTheCall) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten());
                       if (ctx.rank == 0) {
                         std::vector<at::Tensor> empty{at::ones({0})};
                         pg->allreduce(empty, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::milliseconds(5000));
                       }
                       std::vector<at::Tensor> t{at::full({3}, static_cast<float>(ctx.rank + 1))};
                       pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::milliseconds(5000));
                       expectEqual(t[0], at::full({3}, 3.0), "the all_reduce after rank 0's empty one");
                     }),
            "");
}

// The first collective's member meeting is skipped for a collective of no elements, which NCCL
// discards at the call (collectiveConnections): rank 0's empty all_reduce completes while rank 1
// issues no collective for longer than the group's timeout. Were it to meet, it would wait for
// rank 1 and fail with the meeting's timeout.
TEST(SimulatedDevice, AnEmptyCollectiveMeetsNoOne) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten(), std::chrono::milliseconds(1000));
                       if (ctx.rank == 0) {
                         std::vector<at::Tensor> empty{at::ones({0})};
                         pg->allreduce(empty, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::milliseconds(5000));
                         ctx.store->set("empty_done", std::vector<uint8_t>{1});
                         ctx.store->wait({"rank1_back"}, std::chrono::seconds(10));
                       } else {
                         std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // past the 1 s timeout
                         ctx.store->wait({"empty_done"}, std::chrono::seconds(10));  // rank 0 failed otherwise
                         ctx.store->set("rank1_back", std::vector<uint8_t>{1});
                       }
                       std::vector<at::Tensor> t{at::full({3}, static_cast<float>(ctx.rank + 1))};
                       pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::milliseconds(5000));
                       expectEqual(t[0], at::full({3}, 3.0), "the all_reduce after rank 0's empty one");
                     }),
            "");
}

// Review item 13: TORCH_NCCL_BLOCKING_WAIT=1 makes wait() block the host until the op ended.
TEST(SimulatedDevice, Defect13_BlockingWaitBlocksTheHost) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       setenv("TORCH_NCCL_BLOCKING_WAIT", "1", 1);
                       auto pg = simBackend(ctx, rewritten());
                       JobStream job;
                       job->enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(2000)); });
                       std::vector<at::Tensor> t{at::ones({2})};
                       auto work = pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM));
                       auto started = std::chrono::steady_clock::now();
                       work->wait();
                       check(std::chrono::steady_clock::now() - started > std::chrono::milliseconds(1000),
                             "wait() returned before the op ended in blocking-wait mode");
                       check(work->isCompleted(), "the op is not complete after a blocking wait");
                     }),
            "");
}

}  // namespace
}  // namespace nccl_migrate::sim
