// Which device a process group binds to when the job names none: torch 2.15's nccl2 rule, the
// one place it is decided for the toolkit (C++ createBackend and the Python registration ask it).
#pragma once

#include <optional>
#include <string>

#include "nccl_migrate/shim/outcome.h"

namespace nccl_migrate::shim {

// The CUDA device index for a rank: LOCAL_RANK (the node-local rank, as launchers set it)
// modulo the device count when LOCAL_RANK is set, else the global rank modulo the device count.
// No value without devices (the caller binds to the CPU); a failure for a LOCAL_RANK that is no
// non-negative integer.
Outcome<std::optional<int>> defaultDeviceIndex(const std::optional<std::string>& localRank, int globalRank,
                                               int deviceCount);

}  // namespace nccl_migrate::shim
