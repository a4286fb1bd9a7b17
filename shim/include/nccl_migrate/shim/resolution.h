// The whole decision for a job's backend argument: which NCCL behaviour it asks for (name and
// TORCH_DIST_USE_NCCL2, as torch 2.15 reads them), who implements it (NCCL_MIGRATE_IMPL, what
// this torch has built in, whether a GPU is present, the CUDA allocator backend), and the
// concrete backend name to hand to init_process_group. Pure: all inputs are arguments.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nccl_migrate/shim/backend_name.h"
#include "nccl_migrate/shim/implementation.h"
#include "nccl_migrate/shim/job_settings.h"
#include "nccl_migrate/shim/torch_capabilities.h"

namespace nccl_migrate::shim {

struct Resolution {
  // What to pass to init_process_group: "nccl2", "migrate-nccl2", "cpu:gloo,cuda:nccl-legacy",
  // or the input unchanged when it names no NCCL backend. Empty when `error` is set.
  std::string backend;
  std::optional<Behaviour> behaviour;            // the NCCL behaviour asked for; nullopt: none
  std::optional<Implementation> implementation;  // who runs it; nullopt on error or no NCCL
  std::string reason;                            // one sentence for `nccl-migrate doctor`
  std::vector<std::string> warnings;             // likely mistakes that do not stop the job
  std::optional<std::string> error;              // why it cannot run as asked, and the fix
};

// `backend` is init_process_group's backend argument ("nccl", "NCCL", "cpu:gloo,cuda:nccl",
// "gloo", ...). An empty string means no backend was given; torch then picks "nccl" when a GPU
// is present and "gloo" otherwise, and so does this.
Resolution resolveBackend(std::string_view backend, const JobSettings& settings,
                          const TorchCapabilities& torch);

}  // namespace nccl_migrate::shim
