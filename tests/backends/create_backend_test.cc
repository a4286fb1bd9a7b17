// createBackend for libtorch programs: the shim's resolution from the real environment, then a
// real backend (this machine has no GPU, so the toolkit's; torch's own is asked for and refused).
#include "nccl_migrate/backends/create_backend.h"
#include "nccl_migrate/backends/migrate_backend.h"

#include <cstdlib>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

namespace nccl_migrate::backends {
namespace {

// Sets the shim's variables for one test and restores the environment after it.
class ShimEnvironment : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* name : {"TORCH_DIST_USE_NCCL2", "NCCL_MIGRATE_IMPL"}) unsetenv(name);
  }
  static c10::intrusive_ptr<c10d::Store> store() { return c10::make_intrusive<c10d::HashStore>(); }
};

TEST_F(ShimEnvironment, LinkedTorchIs215WithEveryBehaviour) {
  shim::TorchCapabilities caps = linkedTorchCapabilities();
  if (!NCCL_MIGRATE_TORCH_HAS_NCCL2) {
    // An older torch (2.11 through 2.13): its one NCCL backend is the legacy one, named "nccl",
    // and the rewritten behaviours can only run on the toolkit.
    EXPECT_EQ(caps.legacy, "nccl");
    EXPECT_EQ(caps.rewritten, std::nullopt);
    EXPECT_EQ(caps.rewrittenLazyP2P, std::nullopt);
    GTEST_SKIP() << "torch " << caps.version << " lacks nccl2 (torch's rewritten NCCL backend, "
                 << "nccl2/ProcessGroupNCCL.hpp): checked only that it offers its legacy backend as nccl";
  }
  EXPECT_EQ(caps.version, "2.15");
  EXPECT_EQ(caps.legacy, "nccl-legacy");
  EXPECT_EQ(caps.rewritten, "nccl2");
  EXPECT_EQ(caps.rewrittenLazyP2P, "nccl-lazy");
}

TEST_F(ShimEnvironment, LegacyByVariableRunsOnTheToolkitWithoutAGpu) {
  if (linkedTorchCapabilities().gpuPresent) GTEST_SKIP() << "a GPU is present: torch's own backend would run";
  setenv("TORCH_DIST_USE_NCCL2", "0", 1);
  CreatedBackend created = createBackend("nccl", store(), 0, 1);
  EXPECT_EQ(created.backend->getBackendName(), "nccl");  // torch's name for legacy
  EXPECT_EQ(created.resolution.backend, "migrate-legacy");
  EXPECT_EQ(created.resolution.implementation, shim::Implementation::Toolkit);
  EXPECT_NE(dynamic_cast<MigrateBackend*>(created.backend.get()), nullptr);
}

TEST_F(ShimEnvironment, TorchImplementationWithoutAGpuIsRefusedWithTheFix) {
  if (linkedTorchCapabilities().gpuPresent) GTEST_SKIP() << "a GPU is present: torch's own backend can run";
  setenv("NCCL_MIGRATE_IMPL", "torch", 1);
  try {
    createBackend("nccl-legacy", store(), 0, 1);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    std::string text = e.what_without_backtrace();
    EXPECT_NE(text.find("cannot run here"), std::string::npos) << text;
    EXPECT_NE(text.find("NCCL_MIGRATE_IMPL=auto"), std::string::npos) << text;
  }
}

TEST_F(ShimEnvironment, InvalidImplementationListsTheValidValues) {
  setenv("NCCL_MIGRATE_IMPL", "fastest", 1);
  try {
    createBackend("nccl", store(), 0, 1);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    std::string text = e.what_without_backtrace();
    EXPECT_NE(text.find("fastest"), std::string::npos) << text;
    EXPECT_NE(text.find("toolkit"), std::string::npos) << text;
  }
}

TEST_F(ShimEnvironment, OtherBackendsAreNotMadeHere) {
  EXPECT_THROW(createBackend("gloo", store(), 0, 1), c10::ValueError);
}

}  // namespace
}  // namespace nccl_migrate::backends
