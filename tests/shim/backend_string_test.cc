// Parsing init_process_group's backend argument into per-device entries.
#include "nccl_migrate/shim/backend_string.h"

#include <gtest/gtest.h>

namespace nccl_migrate::shim {
namespace {

std::string errorOf(std::string_view text) {
  auto parsed = parseBackendString(text);
  EXPECT_FALSE(parsed.ok()) << text << " was accepted";
  return parsed.ok() ? "" : parsed.error();
}

TEST(BackendString, PlainNameIsOneEntryWithoutDevice) {
  auto parsed = parseBackendString("nccl");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed.value().size(), 1u);
  EXPECT_EQ(parsed.value()[0].device, "");
  EXPECT_EQ(parsed.value()[0].backend, "nccl");
}

TEST(BackendString, SplitsDevicePairsInOrder) {
  auto parsed = parseBackendString("cpu:gloo,cuda:nccl-legacy");
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  ASSERT_EQ(parsed.value().size(), 2u);
  EXPECT_EQ(parsed.value()[0].device, "cpu");
  EXPECT_EQ(parsed.value()[0].backend, "gloo");
  EXPECT_EQ(parsed.value()[1].device, "cuda");
  EXPECT_EQ(parsed.value()[1].backend, "nccl-legacy");
}

TEST(BackendString, DevicesAreCaseInsensitiveAndBackendsKeptAsWritten) {
  auto parsed = parseBackendString("CPU:MyGloo,Cuda:NCCL");
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(parsed.value()[0].device, "cpu");
  EXPECT_EQ(parsed.value()[0].backend, "MyGloo");
  EXPECT_EQ(parsed.value()[1].device, "cuda");
}

TEST(BackendString, RoundTrips) {
  for (const char* text : {"nccl", "cpu:gloo,cuda:nccl", "cuda:nccl2", "xpu:xccl,cpu:gloo"}) {
    auto parsed = parseBackendString(text);
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_EQ(backendStringOf(parsed.value()), text);
  }
}

TEST(BackendString, EmptyEntriesAreErrors) {
  EXPECT_NE(errorOf("cpu:gloo,,cuda:nccl").find("empty entry"), std::string::npos);
  EXPECT_NE(errorOf("cpu:gloo,").find("remove the extra comma"), std::string::npos);
  EXPECT_NE(errorOf(",cuda:nccl").find("empty entry"), std::string::npos);
}

TEST(BackendString, EmptyStringIsAnError) { EXPECT_NE(errorOf("").find("backend name is empty"), std::string::npos); }

TEST(BackendString, MissingColonIsAnError) {
  std::string error = errorOf("cpu:gloo,nccl");
  EXPECT_NE(error.find("\"nccl\""), std::string::npos) << error;
  EXPECT_NE(error.find("is not a device:backend pair"), std::string::npos) << error;
  EXPECT_NE(error.find("cpu:gloo,cuda:nccl"), std::string::npos) << error;  // shows the right form
}

TEST(BackendString, SeveralNamesWithoutDevicesIsAnError) {
  EXPECT_NE(errorOf("gloo,nccl").find("without devices"), std::string::npos);
}

TEST(BackendString, ExtraColonIsAnError) {
  EXPECT_NE(errorOf("cuda:nccl:0").find("more than one ':'"), std::string::npos);
}

TEST(BackendString, MissingBackendIsAnError) {
  EXPECT_NE(errorOf("cpu:gloo,cuda:").find("names no backend for cuda"), std::string::npos);
  EXPECT_NE(errorOf("cuda: ").find("names no backend for cuda"), std::string::npos);
}

TEST(BackendString, UnknownDeviceIsAnErrorListingKnownOnes) {
  std::string error = errorOf("tpu:xla");
  EXPECT_NE(error.find("unknown device type \"tpu\""), std::string::npos) << error;
  EXPECT_NE(error.find("cpu, cuda, hpu, mps, mtia, xpu"), std::string::npos) << error;
  EXPECT_NE(errorOf(":nccl").find("unknown device type \"\""), std::string::npos);
}

TEST(BackendString, GpuIsExplainedAsCuda) {
  EXPECT_NE(errorOf("cpu:gloo,gpu:nccl").find("\"cuda\""), std::string::npos);
}

TEST(BackendString, SpacesAroundNamesAreErrors) {
  // torch keeps the spaces, so " cuda" would silently get no backend.
  EXPECT_NE(errorOf("cpu:gloo, cuda:nccl").find("remove the spaces around \"cuda\""), std::string::npos);
  EXPECT_NE(errorOf("cpu:gloo,cuda: nccl").find("has spaces around it"), std::string::npos);
}

TEST(BackendString, DuplicateDeviceIsAnError) {
  EXPECT_NE(errorOf("cuda:nccl,CUDA:gloo").find("device \"cuda\" appears twice"), std::string::npos);
}

}  // namespace
}  // namespace nccl_migrate::shim
