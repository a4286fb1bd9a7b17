// The engine answers torch's capability queries for every feature this torch declares
// (cmake/TorchFeatures.cmake); a feature torch lacks is compiled out, and its test says so by
// skipping with the feature's name instead of passing.
#include <cstdlib>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "nccl_migrate/backends/create_backend.h"
#include "nccl_migrate/backends/migrate_backend.h"

namespace nccl_migrate::backends {
namespace {

// A one-rank toolkit backend of the legacy behaviour: it makes no communicator until an op
// runs, so it needs neither a GPU nor Gloo.
c10::intrusive_ptr<c10d::Backend> toolkitBackend() {
  setenv("TORCH_DIST_USE_NCCL2", "0", 1);
  setenv("NCCL_MIGRATE_IMPL", "toolkit", 1);
  auto backend = createBackend("nccl", c10::make_intrusive<c10d::HashStore>(), 0, 1).backend;
  unsetenv("TORCH_DIST_USE_NCCL2");
  unsetenv("NCCL_MIGRATE_IMPL");
  return backend;
}

TEST(TorchFeatures, ShrinkIsAdvertisedThroughTorch) {
#if NCCL_MIGRATE_TORCH_HAS_SHRINK
  EXPECT_TRUE(toolkitBackend()->supportsShrinking());
#else
  GTEST_SKIP() << "this torch lacks shrink (Backend::shrink, supportsShrinking)";
#endif
}

TEST(TorchFeatures, AbortHooksRegisterThroughTorch) {
#if NCCL_MIGRATE_TORCH_HAS_ABORT_HOOKS
  auto backend = toolkitBackend();
  EXPECT_TRUE(backend->supportsAbortHooks());
  backend->registerAbortHook(1, [] {});
  backend->unregisterAbortHook(1);
#else
  GTEST_SKIP() << "this torch lacks abort_hooks (Backend::registerAbortHook, supportsAbortHooks, c10d::AbortHook)";
#endif
}

TEST(TorchFeatures, ReconfigureIsAdvertisedThroughTorch) {
#if NCCL_MIGRATE_TORCH_HAS_RECONFIGURE
  auto backend = toolkitBackend();
  EXPECT_TRUE(backend->supportsReconfigure());
  EXPECT_EQ(backend->get_reconfigure_handle().rfind("nccl:0:", 0), 0u) << backend->get_reconfigure_handle();
#else
  GTEST_SKIP() << "this torch lacks reconfigure (Backend::reconfigure, get_reconfigure_handle, ReconfigureOptions)";
#endif
}

}  // namespace
}  // namespace nccl_migrate::backends
