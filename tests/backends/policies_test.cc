// Communicator policies as pure logic: keys, creation timing, device binding.
#include <gtest/gtest.h>

#include "nccl_migrate/backends/communicator_policy.h"

namespace nccl_migrate::backends {
namespace {

const c10::Device kCuda0(c10::kCUDA, 0);
const c10::Device kCuda1(c10::kCUDA, 1);

TEST(LegacyPolicy, CreatesNothingUntilFirstUseWithoutDeviceId) {
  auto policy = makeLegacyPolicy(0, 4);
  EXPECT_TRUE(policy->atGroupCreation(std::nullopt).empty());
  EXPECT_EQ(policy->backendName(), "nccl");
}

TEST(LegacyPolicy, OneCommunicatorPerDevice) {
  auto policy = makeLegacyPolicy(1, 4);
  auto a = policy->forCollective(kCuda0);
  auto b = policy->forCollective(kCuda1);
  EXPECT_EQ(a.key, "cuda:0");
  EXPECT_EQ(b.key, "cuda:1");
  EXPECT_EQ(a.groupRanks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(a.myGroupRank, 1);
}

TEST(LegacyPolicy, EagerOnlyForExplicitDevice) {
  auto policy = makeLegacyPolicy(0, 2);
  auto eager = policy->atGroupCreation(kCuda1);
  ASSERT_EQ(eager.size(), 1u);
  EXPECT_EQ(eager[0].key, "cuda:1");
}

TEST(RewrittenPolicy, EagerWhenDeviceKnown) {
  auto policy = makeRewrittenPolicy(0, 2, /*lazyInit=*/false);
  auto eager = policy->atGroupCreation(kCuda0);
  ASSERT_EQ(eager.size(), 1u);
  EXPECT_EQ(eager[0].key, "cuda:0");
  EXPECT_EQ(policy->boundDevice(), kCuda0);
  EXPECT_EQ(policy->backendName(), "nccl2");
}

TEST(RewrittenPolicy, LazyInitDefersButStillBinds) {
  auto policy = makeRewrittenPolicy(0, 2, /*lazyInit=*/true);
  EXPECT_TRUE(policy->atGroupCreation(kCuda0).empty());
  EXPECT_EQ(policy->boundDevice(), kCuda0);
  EXPECT_EQ(policy->forCollective(kCuda0).key, "cuda:0");
}

TEST(RewrittenPolicy, AnotherDeviceFailsWithTorchsText) {
  auto policy = makeRewrittenPolicy(0, 2, /*lazyInit=*/false);
  (void)policy->atGroupCreation(kCuda0);
  try {
    (void)policy->forCollective(kCuda1);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ProcessGroupNCCL is bound to device cuda:0 but an operation was issued on cuda:1"),
              std::string::npos)
        << e.what();
  }
}

TEST(RewrittenPolicy, FirstUseBindsWhenNoDeviceWasKnown) {
  auto policy = makeRewrittenPolicy(0, 2, /*lazyInit=*/false);
  EXPECT_TRUE(policy->atGroupCreation(std::nullopt).empty());
  EXPECT_EQ(policy->forCollective(kCuda1).key, "cuda:1");
  EXPECT_THROW((void)policy->forCollective(kCuda0), c10::Error);
}

}  // namespace
}  // namespace nccl_migrate::backends

namespace nccl_migrate::backends {
namespace {

TEST(LegacyPolicy, NonBatchedP2PGetsAPairCommunicatorKeyedLowHigh) {
  auto policy = makeLegacyPolicy(3, 4);
  auto pair = policy->forPeer(kCuda0, 1);
  EXPECT_EQ(pair.key, "cuda:0/p2p:1:3");
  EXPECT_EQ(pair.groupRanks, (std::vector<int>{1, 3}));
  EXPECT_EQ(pair.purpose, "p2p");
  // the peer computes the same key
  EXPECT_EQ(makeLegacyPolicy(1, 4)->forPeer(kCuda0, 3).key, pair.key);
}

TEST(LegacyPolicy, InvalidPeerIsAValueError) {
  auto policy = makeLegacyPolicy(0, 2);
  EXPECT_THROW((void)policy->forPeer(kCuda0, 2), c10::ValueError);
  EXPECT_THROW((void)policy->forPeer(kCuda0, -1), c10::ValueError);
  EXPECT_THROW((void)policy->forPeer(kCuda0, 0), c10::ValueError);
}

TEST(RewrittenPolicy, P2PRunsOnTheGroupCommunicator) {
  auto policy = makeRewrittenPolicy(0, 4, false);
  (void)policy->atGroupCreation(kCuda0);
  EXPECT_EQ(policy->forPeer(kCuda0, 2).key, "cuda:0");
  EXPECT_THROW((void)policy->forPeer(kCuda0, 9), c10::ValueError);
}

TEST(RewrittenLazyP2PPolicy, PairCommunicatorsForP2PAndTheBindingStillHolds) {
  auto policy = makeRewrittenLazyP2PPolicy(2, 4, false);
  ASSERT_EQ(policy->atGroupCreation(kCuda0).size(), 1u);
  EXPECT_EQ(policy->backendName(), "nccl-lazy");
  EXPECT_EQ(policy->forCollective(kCuda0).key, "cuda:0");
  EXPECT_EQ(policy->forPeer(kCuda0, 0).key, "cuda:0/p2p:0:2");
  EXPECT_THROW((void)policy->forPeer(kCuda1, 0), c10::Error);
}

}  // namespace
}  // namespace nccl_migrate::backends
