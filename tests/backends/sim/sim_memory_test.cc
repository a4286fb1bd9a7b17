// The device memory NCCL's communicators take, per policy, as the simulated device charges it
// (what NcclMemoryModel says NCCL allocates on the simulated node: 32 channels, default buffers):
// the rewritten behaviour's eager groups pay NCCL's init when the group is made, lazy ones at their
// first collective; legacy's pair communicators pay an init per pair where the group's own
// communicator pays only the p2p connects. Figures, per rank (sim_nccl_memory_test.cc derives
// each from NCCL's constants; MiB = 1048576 bytes):
//   init of any communicator of up to 2048 ranks:           196 MiB
//   first collective of 2 ranks (ring; the tree adds none): 384 MiB
//   first send to a peer: 32 p2p channels * 2 MiB =          64 MiB
//   first receive from a peer: 32 * 10 MiB =                320 MiB
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "nccl_migrate/backends/communicator_factories.h"
#include "nccl_migrate/backends/migrate_backend.h"
#include "ranks.h"
#include "sim_backend.h"
#include "sim_device.h"
#include "sim_nccl.h"

namespace nccl_migrate::sim {
namespace {

constexpr size_t MiB = size_t(1) << 20;
constexpr size_t kInit = 196 * MiB;
constexpr size_t kTwoRankCollective = 384 * MiB;
constexpr size_t kFirstSend = 64 * MiB;
constexpr size_t kFirstRecv = 320 * MiB;

size_t used() { return SimRuntime::instance()->usedBytes.load(); }

std::string inMiB(size_t bytes) { return std::to_string(bytes / MiB) + " MiB"; }

// A group of the world named `name`, made as simBackend makes the default group, its keys under
// its own prefix of the rank's store as torch gives each group.
c10::intrusive_ptr<backends::MigrateBackend> groupNamed(RankContext& ctx, const std::string& name,
                                                        const backends::PolicyMaker& policy) {
  auto store = c10::make_intrusive<c10d::PrefixStore>(name, ctx.store);
  backends::GroupOptions options{name, name, std::chrono::seconds(30), {}, simDevice(ctx.rank)};
  backends::applyNcclEnvironment(options);
  auto seams = simulatedSeams(store, Faults{});
  backends::FactoryMaker factory = [seams](const c10::intrusive_ptr<c10d::Store>& s, const backends::GroupOptions& o) {
    return backends::makeCommunicatorFactory(s, nullptr, o.groupName, o.connectTimeout(), seams, c10::kCPU,
                                             o.deviceComms);
  };
  return c10::make_intrusive<backends::MigrateBackend>(store, ctx.rank, ctx.size, options, policy, factory);
}

void allreduceOnce(const c10::intrusive_ptr<backends::MigrateBackend>& group) {
  std::vector<at::Tensor> t{at::ones({4})};
  group->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait();
}

void expectUsed(size_t before, size_t expected, const std::string& when) {
  size_t got = used() - before;
  check(got == expected, when + ": " + inMiB(got) + " charged, NCCL allocates " + inMiB(expected));
}

// Nine eager groups of two ranks: 9 * 196 = 1764 MiB when the groups are made (a 2-GPU job of
// nine groups was reported at 1774 MiB), then 9 * (196 + 384) = 5220 MiB after a collective on
// each (reported: 5230 MiB).
TEST(SimulatedMemory, EagerGroupsPayNcclsInitWhenTheyAreMade) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       size_t before = used();
                       std::vector<c10::intrusive_ptr<backends::MigrateBackend>> groups;
                       for (int g = 1; g <= 9; ++g) {
                         groups.push_back(groupNamed(ctx, "g" + std::to_string(g), rewritten()));
                       }
                       expectUsed(before, 9 * kInit, "nine eager groups made");
                       for (auto& group : groups) {
                         auto infos = group->communicators();
                         check(infos.size() == 1 && infos[0].deviceMemoryBytes == kInit,
                               "an eager group's communicator reports NCCL's init");
                       }
                       for (auto& group : groups) allreduceOnce(group);
                       expectUsed(before, 9 * (kInit + kTwoRankCollective), "a collective on each");
                     }),
            "");
}

// The same groups made lazily cost nothing until their first collective, and then the same.
TEST(SimulatedMemory, LazyGroupsPayAtTheirFirstCollective) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       size_t before = used();
                       std::vector<c10::intrusive_ptr<backends::MigrateBackend>> groups;
                       for (int g = 1; g <= 9; ++g) {
                         groups.push_back(groupNamed(ctx, "lazy" + std::to_string(g), rewritten(/*lazyInit=*/true)));
                       }
                       expectUsed(before, 0, "nine lazy groups made");
                       for (auto& group : groups) allreduceOnce(group);
                       expectUsed(before, 9 * (kInit + kTwoRankCollective), "a collective on each");
                     }),
            "");
}

// A pipeline 0 -> 1 -> 2 on a group of three. The rewritten behaviour sends on the group's
// communicator: only the directions connect (rank 0: a send, rank 1: a receive and a send, rank
// 2: a receive). Legacy makes a communicator per pair, each paying NCCL's init on both its ranks.
TEST(SimulatedMemory, PairCommunicatorsPayAnInitPerPairWhereTheGroupPaysOnlyConnects) {
  auto pipeline = [](const backends::PolicyMaker& policy, std::vector<size_t> expected) {
    return runRanks(3, [&](RankContext& ctx) {
      auto group = groupNamed(ctx, "pipeline", policy);
      size_t before = used();
      std::vector<at::Tensor> t{at::ones({4})};
      if (ctx.rank > 0) group->recv(t, ctx.rank - 1, 0)->wait();
      if (ctx.rank < 2) group->send(t, ctx.rank + 1, 0)->wait();
      expectUsed(before, expected[ctx.rank], "rank " + std::to_string(ctx.rank) + "'s sends and receives");
    });
  };
  EXPECT_EQ(pipeline(rewritten(), {kFirstSend, kFirstRecv + kFirstSend, kFirstRecv}), "");
  EXPECT_EQ(pipeline(legacy(), {kInit + kFirstSend, kInit + kFirstRecv + kInit + kFirstSend, kInit + kFirstRecv}), "");
}

// Whatever a communicator was charged, init and connects, comes back when the group goes.
TEST(SimulatedMemory, AGroupThatGoesGivesBackAllItWasCharged) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       size_t before = used();
                       {
                         auto group = groupNamed(ctx, "going", legacy());
                         allreduceOnce(group);
                         std::vector<at::Tensor> t{at::ones({4})};
                         if (ctx.rank == 0) group->send(t, 1, 0)->wait();
                         if (ctx.rank == 1) group->recv(t, 0, 0)->wait();
                         check(used() > before, "the group's communicators were charged");
                         group->shutdown();
                       }
                       auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
                       while (used() != before && std::chrono::steady_clock::now() < deadline) {
                         std::this_thread::sleep_for(std::chrono::milliseconds(10));
                       }
                       expectUsed(before, 0, "after the group went");
                     }),
            "");
}

}  // namespace
}  // namespace nccl_migrate::sim
