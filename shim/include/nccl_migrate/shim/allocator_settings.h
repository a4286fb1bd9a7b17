// Reads torch's caching-allocator settings (PYTORCH_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF) far
// enough to tell which CUDA allocator backend a job runs: torch's rewritten NCCL backend cannot
// run with backend:cudaMallocAsync.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nccl_migrate/shim/outcome.h"

namespace nccl_migrate::shim {

inline constexpr std::string_view kAllocatorVariable = "PYTORCH_ALLOC_CONF";
inline constexpr std::string_view kCudaAllocatorVariable = "PYTORCH_CUDA_ALLOC_CONF";

struct AllocatorOption {
  std::string key;    // "backend", "expandable_segments", ...
  std::string value;  // "cudaMallocAsync", "True", or a bracketed list such as "[256:1,512:2]"
};

// Parses a "key:value,key:value" list the way torch tokenizes it: spaces are ignored, and
// commas and colons inside [...] belong to the value. Errors name the entry and the fix.
Outcome<std::vector<AllocatorOption>> parseAllocatorConfig(std::string_view text);

// The allocator backend that a setting's value selects (its last "backend" entry), or nullopt
// when it names none. Each top-level entry is read on its own, so a value known only in part (a
// linter sees "backend:cudaMallocAsync,max_split_size_mb:" where the number is computed) still
// tells; entries that cannot be read are passed over.
std::optional<std::string> allocatorBackendIn(std::string_view text);

// The allocator backend a job asked for and the variable that says so.
struct AllocatorBackendSetting {
  std::string variable;  // "PYTORCH_ALLOC_CONF" or "PYTORCH_CUDA_ALLOC_CONF"
  std::string backend;   // "native" or "cudaMallocAsync" (or what was written)
};

struct AllocatorReading {
  std::optional<AllocatorBackendSetting> backend;  // nullopt: torch's default (native)
  std::vector<std::string> warnings;               // unreadable settings, ignored variables
};

// torch reads PYTORCH_ALLOC_CONF and falls back to the older PYTORCH_CUDA_ALLOC_CONF only when
// the newer one is unset; the reading follows the same order.
AllocatorReading readAllocatorBackend(std::optional<std::string_view> allocConf,
                                      std::optional<std::string_view> cudaAllocConf);

inline constexpr std::string_view kCudaMallocAsync = "cudaMallocAsync";

}  // namespace nccl_migrate::shim
