// The environment variables that decide a job's NCCL backend, read once into a plain struct so
// the resolver itself never touches the environment and can be tested row by row.
#pragma once

#include <optional>
#include <string>

namespace nccl_migrate::shim {

struct JobSettings {
  std::optional<std::string> useNccl2;        // TORCH_DIST_USE_NCCL2
  std::optional<std::string> implementation;  // NCCL_MIGRATE_IMPL
  std::optional<std::string> allocConf;       // PYTORCH_ALLOC_CONF
  std::optional<std::string> cudaAllocConf;   // PYTORCH_CUDA_ALLOC_CONF
  std::optional<std::string> localRank;       // LOCAL_RANK
  std::optional<std::string> blockingWait;        // TORCH_NCCL_BLOCKING_WAIT
  std::optional<std::string> legacyBlockingWait;  // NCCL_BLOCKING_WAIT, torch's older spelling
  std::optional<std::string> commNonblocking;     // TORCH_NCCL_USE_COMM_NONBLOCKING
  std::optional<std::string> asyncErrorHandling;  // TORCH_NCCL_ASYNC_ERROR_HANDLING
};

// Reads the variables from this process's environment (unset stays nullopt; set-but-empty is
// kept as ""). torch reads TORCH_DIST_USE_NCCL2 once, when "nccl" is first registered, so read
// the settings before the first process group is created.
JobSettings settingsFromEnvironment();

}  // namespace nccl_migrate::shim
