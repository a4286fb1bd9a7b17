// Reading JobSettings from the process environment.
#include "nccl_migrate/shim/job_settings.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace nccl_migrate::shim {
namespace {

// Sets or unsets one variable for a test and restores it afterwards.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1); else unsetenv(name);
  }
  ~ScopedVariable() {
    if (old_) setenv(name_, old_->c_str(), 1); else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(JobSettings, ReadsEachVariable) {
  ScopedVariable a("TORCH_DIST_USE_NCCL2", "0");
  ScopedVariable b("NCCL_MIGRATE_IMPL", "toolkit");
  ScopedVariable c("PYTORCH_ALLOC_CONF", "backend:native");
  ScopedVariable d("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync");
  JobSettings s = settingsFromEnvironment();
  EXPECT_EQ(s.useNccl2, "0");
  EXPECT_EQ(s.implementation, "toolkit");
  EXPECT_EQ(s.allocConf, "backend:native");
  EXPECT_EQ(s.cudaAllocConf, "backend:cudaMallocAsync");
}

TEST(JobSettings, UnsetStaysUnsetAndEmptyStaysEmpty) {
  ScopedVariable a("TORCH_DIST_USE_NCCL2", nullptr);
  ScopedVariable b("NCCL_MIGRATE_IMPL", "");
  ScopedVariable c("PYTORCH_ALLOC_CONF", nullptr);
  ScopedVariable d("PYTORCH_CUDA_ALLOC_CONF", nullptr);
  JobSettings s = settingsFromEnvironment();
  EXPECT_FALSE(s.useNccl2.has_value());
  EXPECT_EQ(s.implementation, "");
  EXPECT_FALSE(s.allocConf.has_value());
  EXPECT_FALSE(s.cudaAllocConf.has_value());
}

}  // namespace
}  // namespace nccl_migrate::shim
