// Names older torch spells differently or lacks, so one source tree builds against torch 2.11
// through 2.15. The NCCL_MIGRATE_TORCH_HAS_* macros come from cmake/TorchFeatures.cmake, which
// reads them from torch's headers at configure time. Only names whose absence is harmless are
// supplied here; features torch lacks are compiled out where they are used (#if), and
// _C.torch_features() reports them.
#pragma once

#include <functional>

#include <torch/csrc/distributed/c10d/Types.hpp>

#if !defined(NCCL_MIGRATE_TORCH_HAS_PREMUL_SUM_NAMES) || !defined(NCCL_MIGRATE_TORCH_HAS_ABORT_HOOKS)
#error "NCCL_MIGRATE_TORCH_HAS_* undefined: link to nccl_migrate_torch_features (cmake/TorchFeatures.cmake)"
#endif

namespace c10d {

#if !NCCL_MIGRATE_TORCH_HAS_PREMUL_SUM_NAMES
// Older torch (2.11) names PREMUL_SUM's factor after NCCL; newer torch renamed it and keeps the
// old name as an alias. This is the same alias, the other way round.
using PreMulSumSupplement = NCCLPreMulSumSupplement;
template <typename T>
ReduceOp makePreMulSum(const T& factor) {
  return makeNCCLPreMulSum(factor);
}
#endif

#if !NCCL_MIGRATE_TORCH_HAS_ABORT_HOOKS
// torch's own type where it has one (Hooks.hpp). The engine keeps and runs its abort hooks on
// every torch; without torch's registerAbortHook only C++ callers can register them.
using AbortHook = std::function<void()>;
#endif

}  // namespace c10d
