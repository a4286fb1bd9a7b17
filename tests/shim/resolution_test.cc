// The resolver's texts and the cases the table does not spell out word for word.
#include "nccl_migrate/shim/resolution.h"

#include <gtest/gtest.h>

namespace nccl_migrate::shim {
namespace {

TorchCapabilities withGpu(TorchCapabilities torch) {
  torch.gpuPresent = true;
  return torch;
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

TEST(Resolution, DefaultJobOnTorch215UsesTorchsRewrittenBackend) {
  Resolution r = resolveBackend("nccl", {}, withGpu(torch2_15()));
  EXPECT_EQ(r.backend, "nccl2");
  EXPECT_EQ(r.behaviour, Behaviour::Rewritten);
  EXPECT_EQ(r.implementation, Implementation::Torch);
  EXPECT_FALSE(r.error.has_value());
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(r.reason,
            "\"nccl\" is the rewritten backend by default (TORCH_DIST_USE_NCCL2 unset); torch 2.15 has it built in "
            "as \"nccl2\".");
}

TEST(Resolution, OlderTorchOnlyHasLegacySoTheToolkitRunsRewritten) {
  Resolution r = resolveBackend("nccl", {}, withGpu(torchBeforeRewrite()));
  EXPECT_EQ(r.backend, "migrate-nccl2");
  EXPECT_EQ(r.implementation, Implementation::Toolkit);
  EXPECT_TRUE(contains(r.reason, "torch 2.13 has no built-in rewritten backend, so the toolkit's \"migrate-nccl2\""))
      << r.reason;
}

TEST(Resolution, OlderTorchRegistersItsLegacyBackendAsNccl) {
  Resolution r = resolveBackend("nccl", {.useNccl2 = "0"}, withGpu(torchBeforeRewrite()));
  EXPECT_EQ(r.backend, "nccl");
  EXPECT_EQ(r.implementation, Implementation::Torch);
}

TEST(Resolution, TorchChoiceWithoutTheBehaviourIsAnErrorWithTheFix) {
  Resolution r = resolveBackend("nccl-legacy", {.implementation = "torch"}, withGpu(torchWithoutLegacy()));
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.backend, "");
  EXPECT_EQ(r.behaviour, Behaviour::Legacy);
  EXPECT_FALSE(r.implementation.has_value());
  EXPECT_TRUE(contains(*r.error, "NCCL_MIGRATE_IMPL=torch asks for torch's own legacy backend")) << *r.error;
  EXPECT_TRUE(contains(*r.error, "has no built-in legacy backend")) << *r.error;
  EXPECT_TRUE(contains(*r.error, "\"migrate-legacy\"")) << *r.error;
  EXPECT_TRUE(contains(r.reason, "cannot run")) << r.reason;
}

TEST(Resolution, TorchChoiceWithoutGpuIsAnError) {
  Resolution r = resolveBackend("nccl2", {.implementation = "torch"}, torch2_15());
  ASSERT_TRUE(r.error.has_value());
  EXPECT_TRUE(contains(*r.error, "no GPU is present")) << *r.error;
  EXPECT_TRUE(contains(*r.error, "NCCL_MIGRATE_IMPL=auto (or toolkit)")) << *r.error;
}

TEST(Resolution, WithoutGpuAutoUsesTheToolkitForCpuTensors) {
  Resolution r = resolveBackend("nccl-lazy", {}, torch2_15());
  EXPECT_EQ(r.backend, "migrate-lazy");
  EXPECT_EQ(r.behaviour, Behaviour::RewrittenLazyP2P);
  EXPECT_EQ(r.implementation, Implementation::Toolkit);
  EXPECT_TRUE(contains(r.reason, "no GPU is present")) << r.reason;
}

TEST(Resolution, ToolkitChoiceAlwaysUsesTheToolkit) {
  for (auto torch : {torch2_15(), withGpu(torch2_15()), withGpu(torchBeforeRewrite()), torchWithoutLegacy()}) {
    Resolution r = resolveBackend("nccl", {.useNccl2 = "0", .implementation = "toolkit"}, torch);
    EXPECT_EQ(r.backend, "migrate-legacy");
    EXPECT_EQ(r.implementation, Implementation::Toolkit);
  }
}

TEST(Resolution, CudaMallocAsyncUnderAutoFallsBackToTheToolkitAndSaysWhy) {
  JobSettings settings{.cudaAllocConf = "expandable_segments:True,backend:cudaMallocAsync"};
  Resolution r = resolveBackend("nccl", settings, withGpu(torch2_15()));
  EXPECT_EQ(r.backend, "migrate-nccl2");
  EXPECT_EQ(r.implementation, Implementation::Toolkit);
  EXPECT_TRUE(contains(r.reason, "backend:cudaMallocAsync in PYTORCH_CUDA_ALLOC_CONF conflicts with torch's \"nccl2\""))
      << r.reason;
  EXPECT_TRUE(contains(r.reason, "remove it")) << r.reason;
}

TEST(Resolution, CudaMallocAsyncUnderTorchIsAnErrorNamingTheSettingAndTheWayOut) {
  JobSettings settings{.implementation = "torch", .allocConf = "backend:cudaMallocAsync"};
  Resolution r = resolveBackend("nccl-lazy", settings, withGpu(torch2_15()));
  ASSERT_TRUE(r.error.has_value());
  EXPECT_TRUE(contains(*r.error, "remove backend:cudaMallocAsync in PYTORCH_ALLOC_CONF")) << *r.error;
  EXPECT_TRUE(contains(*r.error, "\"migrate-lazy\", which works with cudaMallocAsync")) << *r.error;
}

TEST(Resolution, CudaMallocAsyncDoesNotAffectLegacy) {
  JobSettings settings{.useNccl2 = "0", .implementation = "torch", .cudaAllocConf = "backend:cudaMallocAsync"};
  Resolution r = resolveBackend("nccl", settings, withGpu(torch2_15()));
  EXPECT_FALSE(r.error.has_value());
  EXPECT_EQ(r.backend, "nccl-legacy");
}

TEST(Resolution, MixedStringResolvesOnlyTheNcclEntry) {
  Resolution r = resolveBackend("cpu:MyGloo,cuda:NCCL", {.useNccl2 = "0"}, withGpu(torch2_15()));
  EXPECT_EQ(r.backend, "cpu:MyGloo,cuda:nccl-legacy");
  EXPECT_EQ(r.behaviour, Behaviour::Legacy);
  EXPECT_TRUE(contains(r.reason, "for cuda, \"nccl\" falls back to legacy")) << r.reason;
}

TEST(Resolution, NcclOnCpuIsAnError) {
  Resolution r = resolveBackend("cpu:nccl,cuda:nccl", {}, withGpu(torch2_15()));
  ASSERT_TRUE(r.error.has_value());
  EXPECT_TRUE(contains(*r.error, "use \"cpu:gloo\" for cpu tensors")) << *r.error;
}

TEST(Resolution, NonNcclNamesPassThroughUnchanged) {
  Resolution r = resolveBackend("MyBackend", {.useNccl2 = "false"}, withGpu(torch2_15()));
  EXPECT_EQ(r.backend, "MyBackend");
  EXPECT_FALSE(r.behaviour.has_value());
  EXPECT_FALSE(r.implementation.has_value());
  EXPECT_TRUE(r.warnings.empty());  // only "nccl" reads TORCH_DIST_USE_NCCL2
}

TEST(Resolution, InvalidImplementationIsAnErrorEvenForOtherBackends) {
  Resolution r = resolveBackend("gloo", {.implementation = "fast"}, withGpu(torch2_15()));
  ASSERT_TRUE(r.error.has_value());
  EXPECT_TRUE(contains(*r.error, "NCCL_MIGRATE_IMPL=\"fast\" is not a valid value")) << *r.error;
}

TEST(Resolution, InvalidImplementationKeepsTheVariableWarning) {
  Resolution r = resolveBackend("nccl", {.useNccl2 = "off", .implementation = "fast"}, withGpu(torch2_15()));
  ASSERT_TRUE(r.error.has_value());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_TRUE(contains(r.warnings[0], "TORCH_DIST_USE_NCCL2=\"off\" keeps the rewritten backend")) << r.warnings[0];
}

TEST(Resolution, NoBackendGivenFollowsTorchsDefault) {
  EXPECT_EQ(resolveBackend("", {}, withGpu(torch2_15())).backend, "nccl2");
  Resolution cpu = resolveBackend("", {}, torch2_15());
  EXPECT_EQ(cpu.backend, "gloo");
  EXPECT_TRUE(contains(cpu.reason, "no backend was given")) << cpu.reason;
}

TEST(Resolution, BadBackendStringIsAnError) {
  Resolution r = resolveBackend("cpu:gloo,,cuda:nccl", {}, withGpu(torch2_15()));
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.backend, "");
  EXPECT_TRUE(contains(*r.error, "empty entry")) << *r.error;
}

TEST(TorchCapabilities, PresetsNameTorchsRegisteredBackends) {
  EXPECT_EQ(torch2_15().builtInBackend(Behaviour::Legacy), "nccl-legacy");
  EXPECT_EQ(torch2_15().builtInBackend(Behaviour::Rewritten), "nccl2");
  EXPECT_EQ(torch2_15().builtInBackend(Behaviour::RewrittenLazyP2P), "nccl-lazy");
  EXPECT_FALSE(torchWithoutLegacy().builtInBackend(Behaviour::Legacy).has_value());
  EXPECT_EQ(torchBeforeRewrite().builtInBackend(Behaviour::Legacy), "nccl");
  EXPECT_FALSE(torchBeforeRewrite().builtInBackend(Behaviour::Rewritten).has_value());
  EXPECT_FALSE(torch2_15().gpuPresent);
}

}  // namespace
}  // namespace nccl_migrate::shim
