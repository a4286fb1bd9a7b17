// PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF parsing and which allocator backend a job runs.
#include "nccl_migrate/shim/allocator_settings.h"

#include <gtest/gtest.h>

namespace nccl_migrate::shim {
namespace {

TEST(AllocatorConfig, ParsesKeyValueList) {
  auto parsed = parseAllocatorConfig("expandable_segments:True,backend:cudaMallocAsync");
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  ASSERT_EQ(parsed.value().size(), 2u);
  EXPECT_EQ(parsed.value()[0].key, "expandable_segments");
  EXPECT_EQ(parsed.value()[0].value, "True");
  EXPECT_EQ(parsed.value()[1].key, "backend");
  EXPECT_EQ(parsed.value()[1].value, "cudaMallocAsync");
}

TEST(AllocatorConfig, IgnoresSpacesLikeTorch) {
  auto parsed = parseAllocatorConfig(" backend : cudaMallocAsync , max_split_size_mb:128 ");
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  ASSERT_EQ(parsed.value().size(), 2u);
  EXPECT_EQ(parsed.value()[0].value, "cudaMallocAsync");
}

TEST(AllocatorConfig, KeepsBracketedListsWhole) {
  auto parsed = parseAllocatorConfig("roundup_power2_divisions:[256:1,512:2,>:4],backend:native");
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  ASSERT_EQ(parsed.value().size(), 2u);
  EXPECT_EQ(parsed.value()[0].value, "[256:1,512:2,>:4]");
  EXPECT_EQ(parsed.value()[1].key, "backend");
}

TEST(AllocatorConfig, EmptyTextIsNoSettings) {
  auto parsed = parseAllocatorConfig("");
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed.value().empty());
}

TEST(AllocatorConfig, RejectsEmptyEntries) {
  for (const char* text : {"backend:native,,expandable_segments:True", ",backend:native", "backend:native,"}) {
    auto parsed = parseAllocatorConfig(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.error().find("empty entry"), std::string::npos) << parsed.error();
  }
}

TEST(AllocatorConfig, RejectsEntryWithoutColon) {
  auto parsed = parseAllocatorConfig("backend=cudaMallocAsync");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().find("\"backend=cudaMallocAsync\" has no ':'"), std::string::npos) << parsed.error();
  EXPECT_NE(parsed.error().find("key:value"), std::string::npos);
}

TEST(AllocatorConfig, RejectsMissingKeyOrValueAndExtraColons) {
  EXPECT_FALSE(parseAllocatorConfig("backend:").ok());
  EXPECT_FALSE(parseAllocatorConfig(":native").ok());
  auto parsed = parseAllocatorConfig("backend:native:expandable_segments:True");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().find("more than one ':'"), std::string::npos) << parsed.error();
}

TEST(AllocatorConfig, RejectsUnbalancedBrackets) {
  auto open = parseAllocatorConfig("roundup_power2_divisions:[256:1,backend:native");
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.error().find("never closed"), std::string::npos) << open.error();
  auto close = parseAllocatorConfig("roundup_power2_divisions:256]");
  ASSERT_FALSE(close.ok());
  EXPECT_NE(close.error().find("closes no '['"), std::string::npos) << close.error();
}

TEST(AllocatorBackend, ReadsTheCudaVariableWhenItIsTheOnlyOne) {
  auto reading = readAllocatorBackend(std::nullopt, "expandable_segments:True,backend:cudaMallocAsync");
  ASSERT_TRUE(reading.backend.has_value());
  EXPECT_EQ(reading.backend->variable, "PYTORCH_CUDA_ALLOC_CONF");
  EXPECT_EQ(reading.backend->backend, "cudaMallocAsync");
  EXPECT_TRUE(reading.warnings.empty());
}

TEST(AllocatorBackend, TheNewerVariableWinsAndBothSetIsWarned) {
  auto reading = readAllocatorBackend("backend:native", "backend:cudaMallocAsync");
  ASSERT_TRUE(reading.backend.has_value());
  EXPECT_EQ(reading.backend->variable, "PYTORCH_ALLOC_CONF");
  EXPECT_EQ(reading.backend->backend, "native");
  ASSERT_EQ(reading.warnings.size(), 1u);
  EXPECT_NE(reading.warnings[0].find("unset PYTORCH_CUDA_ALLOC_CONF"), std::string::npos) << reading.warnings[0];
}

TEST(AllocatorBackend, NoBackendKeyMeansTorchsDefault) {
  EXPECT_FALSE(readAllocatorBackend("expandable_segments:True", std::nullopt).backend.has_value());
  EXPECT_FALSE(readAllocatorBackend(std::nullopt, std::nullopt).backend.has_value());
}

TEST(AllocatorBackend, LastBackendEntryWins) {
  auto reading = readAllocatorBackend("backend:cudaMallocAsync,backend:native", std::nullopt);
  ASSERT_TRUE(reading.backend.has_value());
  EXPECT_EQ(reading.backend->backend, "native");
}

TEST(AllocatorBackend, UnreadableSettingIsAWarningNotABackend) {
  auto reading = readAllocatorBackend(std::nullopt, "backend:cudaMallocAsync,,");
  EXPECT_FALSE(reading.backend.has_value());
  ASSERT_EQ(reading.warnings.size(), 1u);
  EXPECT_NE(reading.warnings[0].find("PYTORCH_CUDA_ALLOC_CONF cannot be read"), std::string::npos)
      << reading.warnings[0];
}

TEST(AllocatorBackend, MisspelledBackendIsWarned) {
  auto reading = readAllocatorBackend("backend:cudamallocasync", std::nullopt);
  ASSERT_EQ(reading.warnings.size(), 1u);
  EXPECT_NE(reading.warnings[0].find("backend:native or backend:cudaMallocAsync"), std::string::npos);
  ASSERT_TRUE(reading.backend.has_value());
  EXPECT_NE(reading.backend->backend, kCudaMallocAsync);  // torch's comparison is exact
}

TEST(AllocatorBackendIn, NamesTheLastBackendEntry) {
  EXPECT_EQ(allocatorBackendIn("backend:cudaMallocAsync"), "cudaMallocAsync");
  EXPECT_EQ(allocatorBackendIn(" backend : cudaMallocAsync , expandable_segments:True"), "cudaMallocAsync");
  EXPECT_EQ(allocatorBackendIn("backend:cudaMallocAsync,backend:native"), "native");
  EXPECT_EQ(allocatorBackendIn("expandable_segments:True"), std::nullopt);
  EXPECT_EQ(allocatorBackendIn(""), std::nullopt);
}

// A value with a computed part left out still says which backend it selects.
TEST(AllocatorBackendIn, ReadsEntriesOfAPartlyKnownValue) {
  EXPECT_EQ(allocatorBackendIn("backend:cudaMallocAsync,max_split_size_mb:"), "cudaMallocAsync");
  EXPECT_EQ(allocatorBackendIn("max_split_size_mb:,backend:cudaMallocAsync,"), "cudaMallocAsync");
  EXPECT_EQ(allocatorBackendIn("backendcudaMallocAsync"), std::nullopt);
  EXPECT_EQ(allocatorBackendIn("my_backend:cudaMallocAsync"), std::nullopt);
}

}  // namespace
}  // namespace nccl_migrate::shim
