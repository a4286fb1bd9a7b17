// Reads JobSettings from the process environment; the only place the shim calls getenv.
#include "nccl_migrate/shim/job_settings.h"

#include <cstdlib>

namespace nccl_migrate::shim {
namespace {

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

}  // namespace

JobSettings settingsFromEnvironment() {
  return JobSettings{
      .useNccl2 = variable("TORCH_DIST_USE_NCCL2"),
      .implementation = variable("NCCL_MIGRATE_IMPL"),
      .allocConf = variable("PYTORCH_ALLOC_CONF"),
      .cudaAllocConf = variable("PYTORCH_CUDA_ALLOC_CONF"),
      .localRank = variable("LOCAL_RANK"),
      .blockingWait = variable("TORCH_NCCL_BLOCKING_WAIT"),
      .legacyBlockingWait = variable("NCCL_BLOCKING_WAIT"),
      .commNonblocking = variable("TORCH_NCCL_USE_COMM_NONBLOCKING"),
      .asyncErrorHandling = variable("TORCH_NCCL_ASYNC_ERROR_HANDLING"),
  };
}

}  // namespace nccl_migrate::shim
