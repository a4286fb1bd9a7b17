// The shim for libtorch programs: the same resolution as the Python package (backend name,
// TORCH_DIST_USE_NCCL2, NCCL_MIGRATE_IMPL, allocator settings, this torch's built-ins, GPU
// presence) followed by the backend it names, torch's own or the toolkit's.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "nccl_migrate/backends/communicator_factories.h"
#include "nccl_migrate/shim/resolution.h"

namespace nccl_migrate::backends {

struct CreateOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  std::string groupName = "0";
  std::optional<c10::Device> device;  // the group's device_id, when the program has one
  // Needed only when a toolkit backend runs CPU tensors: a C++ program supplies its own Gloo
  // backends (the torch wheel ships no Gloo headers for the toolkit to make them).
  GlooBackendMaker makeGloo;
};

struct CreatedBackend {
  c10::intrusive_ptr<c10d::Backend> backend;
  shim::Resolution resolution;  // what was decided and why
};

// What the libtorch this program links has built in, and whether a GPU is present.
shim::TorchCapabilities linkedTorchCapabilities();

// Resolves `name` ("nccl", "nccl2", "nccl-lazy", "nccl-legacy") with the settings in this
// process's environment and creates the backend. Throws c10::Error with the shim's fix-it text
// when the request cannot run here.
CreatedBackend createBackend(const std::string& name, const c10::intrusive_ptr<c10d::Store>& store, int rank,
                             int size, const CreateOptions& options = {});

}  // namespace nccl_migrate::backends
