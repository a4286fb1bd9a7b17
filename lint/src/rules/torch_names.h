// Names of torch's distributed API and backend values, shared by the rules that test them. What a
// backend string or TORCH_DIST_USE_NCCL2 means is the shim's decision (shim/): these only ask it.
#pragma once

#include <string>
#include <string_view>

#include "nccl_migrate/lint/source_model.h"

namespace nccl_migrate::lint {

// `qualified` is torch.distributed.<name> (after the frontend's canonicalisation).
inline bool isDistributed(const std::string& qualified, std::string_view name) {
  constexpr std::string_view kPrefix = "torch.distributed.";
  return qualified.size() == kPrefix.size() + name.size() && qualified.starts_with(kPrefix) &&
         qualified.ends_with(name);
}

// The environment variables launchers set to a process's rank on its node (LOCAL_RANK,
// SLURM_LOCALID, ...) and in the whole job (RANK, SLURM_PROCID, ...).
bool isLocalRankVariable(std::string_view name);
bool isGlobalRankVariable(std::string_view name);

// The file shows its world is not NCCL: it initialises one, and every init_process_group names a
// backend with no NCCL entry ("gloo"). Groups created with the default backend are then not NCCL's.
bool worldShownNotNccl(const SourceModel& model);

// A backend string that selects torch's NCCL backend under its default name, as torch reads it:
// "nccl" in any case, alone or as a device's entry ("cpu:gloo,cuda:NCCL"). Excludes
// nccl2/nccl-lazy/nccl-legacy, which name one implementation explicitly.
bool selectsDefaultNccl(const std::string& backend);

// A backend string with an entry that torch 2.15 resolves to the rewritten backend with eager
// communicators ("nccl" with TORCH_DIST_USE_NCCL2 unset, "nccl2"; not "nccl-lazy" or legacy).
bool selectsEagerNccl(const std::string& backend);

// A backend string with an NCCL entry that is not the plain name "nccl": a device map
// ("cpu:gloo,cuda:nccl") or another NCCL name ("nccl2", "nccl-lazy", "nccl-legacy"). get_backend
// returns such a string as the group was created with it, so it never equals "nccl".
bool namesNcclOtherThanPlain(const std::string& backend);

// A value holding a backend string (alone or among words, as in "--backend nccl-legacy") that
// names the legacy backend explicitly.
bool namesLegacyBackend(const std::string& value);

// A TORCH_DIST_USE_NCCL2 value under which "nccl" builds the legacy backend.
bool useNccl2SelectsLegacy(const std::string& value);

// TORCH_DIST_USE_NCCL2, PYTORCH_ALLOC_CONF or PYTORCH_CUDA_ALLOC_CONF, by the shim's names.
bool isUseNccl2Variable(const std::string& key);
bool isAllocatorVariable(const std::string& key);

// A PYTORCH_(CUDA_)ALLOC_CONF value, known in full or in part, that selects cudaMallocAsync.
bool selectsCudaMallocAsync(const std::string& allocatorSettings);

}  // namespace nccl_migrate::lint
