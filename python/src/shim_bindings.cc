// nccl_migrate._C's shim half: the same resolution the C++ side uses, for the Python package,
// `nccl-migrate doctor` and the shared resolution-table tests.
#include "shim_bindings.h"

#include <pybind11/stl.h>

#include "nccl_migrate/shim/group_device.h"
#include "nccl_migrate/shim/resolution.h"

namespace py = pybind11;

namespace nccl_migrate::python {
namespace {

std::optional<std::string> optionalString(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return std::nullopt;
  return d[key].cast<std::string>();
}

shim::JobSettings settingsFrom(const py::dict& env) {
  return {optionalString(env, "TORCH_DIST_USE_NCCL2"), optionalString(env, "NCCL_MIGRATE_IMPL"),
          optionalString(env, "PYTORCH_ALLOC_CONF"), optionalString(env, "PYTORCH_CUDA_ALLOC_CONF")};
}

shim::TorchCapabilities capabilitiesFrom(const py::dict& torch, bool gpu) {
  shim::TorchCapabilities caps;
  caps.version = optionalString(torch, "version").value_or("unknown");
  caps.legacy = optionalString(torch, "legacy");
  caps.rewritten = optionalString(torch, "rewritten");
  caps.rewrittenLazyP2P = optionalString(torch, "rewritten-lazy-p2p");
  caps.gpuPresent = gpu;
  return caps;
}

py::dict resolutionDict(const shim::Resolution& r) {
  py::dict d;
  d["backend"] = r.backend;
  d["behaviour"] = r.behaviour ? py::cast(std::string(shim::behaviourName(*r.behaviour))) : py::none();
  d["implementation"] =
      r.implementation ? py::cast(std::string(shim::implementationName(*r.implementation))) : py::none();
  d["reason"] = r.reason;
  d["warnings"] = r.warnings;
  d["error"] = r.error ? py::cast(*r.error) : py::none();
  return d;
}

}  // namespace

void bindShim(py::module_& m) {
  m.def(
      "resolve_backend",
      [](const std::string& backend, const py::dict& env, const py::dict& torch, bool gpu) {
        return resolutionDict(shim::resolveBackend(backend, settingsFrom(env), capabilitiesFrom(torch, gpu)));
      },
      py::arg("backend"), py::arg("env"), py::arg("torch"), py::arg("gpu"),
      "Resolves init_process_group's backend argument: env holds TORCH_DIST_USE_NCCL2, NCCL_MIGRATE_IMPL, "
      "PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF (None = unset); torch names the registered backend of each "
      "behaviour (version, legacy, rewritten, rewritten-lazy-p2p; None = this torch lacks it).");
  m.def(
      "default_device_index",
      [](std::optional<std::string> localRank, int globalRank, int deviceCount) -> std::optional<int> {
        auto index = shim::defaultDeviceIndex(localRank, globalRank, deviceCount);
        if (!index.ok()) throw py::value_error(index.error());
        return index.value();
      },
      py::arg("local_rank"), py::arg("global_rank"), py::arg("device_count"),
      "The CUDA device index a group binds to when the job names none (torch 2.15 nccl2's rule); None without "
      "devices. local_rank is LOCAL_RANK's text, or None when unset.");
}

}  // namespace nccl_migrate::python
