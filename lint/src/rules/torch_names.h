// Names of torch's distributed API and backend values, and the decisions several rules share about
// what a file shows of them (its world's backend, the GPUs its process sees). What a backend string
// or TORCH_DIST_USE_NCCL2 means is the shim's decision (shim/): these only ask it.
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

// A call that selects the process's CUDA device: torch.cuda.set_device,
// torch.accelerator.set_device_index, or set_device of the device module a file computes from a
// device type (`getattr(torch, device_type).set_device(i)`,
// `torch.get_device_module(device_type).set_device(i)`), which is torch.cuda's where the type is
// "cuda", the only type an NCCL world runs on.
bool selectsCudaDevice(const Call& call);

// The file shows its world is not NCCL: it initialises one, every init_process_group names a
// backend with no NCCL entry ("gloo"), and it calls no other initialiser that may make an NCCL world
// (isOtherWorldInitialiser). One gloo init in an `if` arm whose other arm calls
// deepspeed.init_distributed() shows nothing of the other arm's world. Groups created with the
// default backend are then not NCCL's. A module that runs only on Ascend NPUs
// (SourceModel::needsAscendNpu) has HCCL's world, whatever it calls.
bool worldShownNotNccl(const SourceModel& model);

// A call of a library's or another file's helper that initialises the default process group with a
// backend this file does not show: a name (as qualified, else as spelled) whose last part contains
// "init_dist" (deepspeed.init_distributed, init_distributed_mode, mmcv's init_dist, vLLM's
// init_distributed_environment), or colossalai.launch*. initialize_model_parallel is not one: it
// makes groups in a world already initialised. A function the file defines itself is not one: its
// own init_process_group calls are read.
bool isOtherWorldInitialiser(const SourceModel& model, const Call& call);

// Whether the process is shown to see one GPU where `call` runs: the file sets CUDA_VISIBLE_DEVICES
// (os.environ[...] = value) to one device on every path to the call, before it and before anything
// of torch.cuda runs in that function (CUDA reads the variable once, when it starts), in the call's
// function, or at module level outside any `if` but `if __name__ == "__main__":` for a call in a
// function. One device: a literal with no comma ("3", "GPU-5c1a..."), or one index written out
// (str(local_rank), f"{rank % 8}"); a value read from elsewhere may name several ("0,1,2,3").
bool oneVisibleDeviceBefore(const SourceModel& model, const Call& call);

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
