// The device a group binds to when the job names none: torch 2.15 nccl2's rule.
#include <gtest/gtest.h>

#include "nccl_migrate/shim/group_device.h"

namespace nccl_migrate::shim {
namespace {

TEST(DefaultDeviceIndex, LocalRankWinsOverTheGlobalRank) {
  auto index = defaultDeviceIndex(std::string("3"), /*globalRank=*/13, /*deviceCount=*/8);
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index.value(), 3);
}

TEST(DefaultDeviceIndex, GlobalRankModuloDevicesWithoutLocalRank) {
  auto index = defaultDeviceIndex(std::nullopt, 13, 8);
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index.value(), 5);
}

TEST(DefaultDeviceIndex, LocalRankWrapsAroundTheDevices) {
  EXPECT_EQ(defaultDeviceIndex(std::string("9"), 0, 8).value(), 1);
}

TEST(DefaultDeviceIndex, NoDeviceWithoutGpus) {
  auto index = defaultDeviceIndex(std::string("1"), 1, 0);
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index.value(), std::nullopt);
}

TEST(DefaultDeviceIndex, MalformedLocalRankIsNamed) {
  for (const char* bad : {"", "one", "-1", "2x"}) {
    auto index = defaultDeviceIndex(std::string(bad), 0, 8);
    ASSERT_FALSE(index.ok()) << bad;
    EXPECT_NE(index.error().find("LOCAL_RANK='" + std::string(bad) + "'"), std::string::npos) << index.error();
  }
}

}  // namespace
}  // namespace nccl_migrate::shim
