// nccl_migrate._C: the Python face of the backends and the shim. Objects torch created in
// Python (its Store, its Gloo backends) cross into C++ here, and our backends go back out as
// torch Backend objects.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/chrono.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#if NCCL_MIGRATE_TORCH_HAS_HEALTH_CHECK
#include <torch/csrc/distributed/c10d/hooks/HealthCheck.hpp>
#endif
#include <torch/csrc/utils/pybind.h>

#include "nccl_migrate/backends/communicator_factories.h"
#include "nccl_migrate/backends/engine_services.h"
#include "nccl_migrate/backends/migrate_backend.h"
#include "nccl_migrate/backends/shutdown.h"
#include "nccl_migrate/shim/backend_name.h"
#include "backend_from_python.h"
#include "digest_bindings.h"
#include "shim_bindings.h"
#include "torch_features.h"

namespace py = pybind11;
using namespace nccl_migrate;
using python::owned;

namespace {

py::dict infoDict(const backends::CommunicatorInfo& info) {
  py::dict d;
  d["key"] = info.key;
  d["purpose"] = info.purpose;
  d["device"] = info.device.str();
  d["rank"] = info.rank;
  d["size"] = info.size;
  d["group_ranks"] = info.groupRanks;
  d["implementation"] = info.implementation;
  d["created_at"] = std::chrono::duration<double>(info.createdAt.time_since_epoch()).count();
  d["creation_seconds"] = std::chrono::duration<double>(info.creationTime).count();
  d["device_memory_bytes"] = info.deviceMemoryBytes ? py::cast(*info.deviceMemoryBytes) : py::none();
  return d;
}

backends::MigrateBackend& ours(const c10::intrusive_ptr<c10d::Backend>& backend) {
  auto* migrate = dynamic_cast<backends::MigrateBackend*>(backend.get());
  if (!migrate) throw py::type_error("not an nccl_migrate backend: " + backend->getBackendName());
  return *migrate;
}

py::list communicatorsOf(const py::object& backend) {
  auto cpp = owned<c10d::Backend>(backend, "Backend");
  backends::MigrateBackend& migrate = ours(cpp);
  py::list out;
  for (const backends::CommunicatorInfo& info : migrate.communicators()) {
    py::dict d = infoDict(info);
    d["group"] = migrate.groupName();
    d["policy"] = migrate.policyName();
    out.append(d);
  }
  return out;
}

py::list listOf(const std::vector<backends::LiveCommunicator>& communicators) {
  py::list out;
  for (const backends::LiveCommunicator& live : communicators) {
    py::dict d = infoDict(live.info);
    d["group"] = live.groupName;
    d["policy"] = live.policy;
    out.append(d);
  }
  return out;
}

py::bytes flightRecorderDump() {
  std::string bytes;
  {
    py::gil_scoped_release release;
    bytes = backends::EngineServices::process()->flightRecorder->dumpPickle();
  }
  return py::bytes(bytes);
}

py::object resolveNcclName(const std::string& name, std::optional<std::string> useNccl2) {
  auto resolution = shim::resolveNcclName(name, useNccl2 ? std::optional<std::string_view>(*useNccl2) : std::nullopt);
  if (!resolution) return py::none();
  py::dict d;
  d["behaviour"] = std::string(shim::behaviourName(resolution->behaviour));
  d["why"] = resolution->why;
  d["warning"] = resolution->warning ? py::cast(*resolution->warning) : py::none();
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "nccl-migrate native module: toolkit backends and backend-name resolution";
  // Our backends as a Python type of their own, derived from torch's Backend binding, so torch
  // finds what it calls on a group's split source: on a device-bound world, every rank that is
  // not a member of a new group calls perform_nocolor_split on the world's backend.
  py::class_<backends::MigrateBackend, c10d::Backend, c10::intrusive_ptr<backends::MigrateBackend>>(
      m, "MigrateBackend", "A toolkit backend (migrate-legacy, migrate-nccl2, migrate-lazy).")
      .def(
          "perform_nocolor_split",
          // A group's communicators meet in a rendezvous of its own members, never as an NCCL
          // split of the parent's communicator, so a non-member has nothing to take part in.
          [](backends::MigrateBackend&, const at::Device&) {}, py::arg("device"));
  python::bindCreateBackend(m, [](backends::GlooBackendMaker gloo) -> backends::FactoryMaker {
    return [gloo](const c10::intrusive_ptr<c10d::Store>& store, const backends::GroupOptions& o) {
      return backends::makeCommunicatorFactory(store, gloo, o.groupName, o.connectTimeout(), o.deviceComms);
    };
  });
  m.def("communicators", &communicatorsOf, py::arg("backend"),
        "Live communicators of a toolkit backend: key, purpose, device, ranks, implementation, cost.");
  m.def("created_communicators", [] { return listOf(backends::EngineServices::process()->registry->created()); },
        "Every communicator toolkit backends of this process created, including destroyed groups'.");
  m.def("process_communicators", [] { return listOf(backends::EngineServices::process()->registry->live()); },
        "Live communicators of every toolkit backend in this process, with their group and policy.");
  m.def("flight_recorder_dump", &flightRecorderDump, "The flight recorder's contents in torch's pickle format.");
  m.def("flight_recorder_dump_to_file", [](uint64_t rank) { return backends::EngineServices::process()->flightRecorder->dumpToFile(rank); },
        py::arg("rank"), "Writes the dump where torch writes its own (TORCH_FR_DUMP_TEMP_FILE); returns the path.");
  m.def("resolve_nccl_name", &resolveNcclName, py::arg("name"), py::arg("use_nccl2"));
  m.def("prepare_for_exit", [] { backends::prepareForExit(); }, py::call_guard<py::gil_scoped_release>(),
        "Waits for ops' callbacks running on other threads, then stops the watchdog thread, releasing the works it "
        "holds; from then on other threads release nothing Python has seen. Called at interpreter exit.");
  m.def("nccl_compiled", &backends::ncclCompiled);
#if NCCL_MIGRATE_TORCH_HAS_HEALTH_CHECK
  m.def("unhealthy_backends", [] { return c10d::HealthCheck::get()->unhealthyBackends(); },
        "Backends torch's process-wide health check marks unhealthy (HealthCheckHook sets them on abort).");
#else
  m.def(
      "unhealthy_backends",
      []() -> std::vector<std::string> {
        throw std::runtime_error("the torch nccl_migrate was built against has no c10d::HealthCheck "
                                 "(hooks/HealthCheck.hpp); nccl_migrate._C.torch_features() lists what it lacks");
      },
      "Unavailable: the torch this module was built against has no c10d::HealthCheck.");
#endif
  nccl_migrate::python::bindShim(m);
  nccl_migrate::python::bindDigest(m);
  nccl_migrate::python::bindTorchFeatures(m);
  m.def("nccl_build_version", &backends::ncclBuildVersion);
}
