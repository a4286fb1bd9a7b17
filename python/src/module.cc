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
#include "nccl_migrate/backends/flight_recorder.h"
#include "nccl_migrate/backends/migrate_backend.h"
#include "nccl_migrate/backends/shutdown.h"
#include "nccl_migrate/shim/backend_name.h"
#include "digest_bindings.h"
#include "shim_bindings.h"
#include "torch_features.h"

namespace py = pybind11;
using namespace nccl_migrate;

namespace {

// torch registers its c10d classes with its own holder type; taking the raw pointer and
// re-owning it through the intrusive count works whatever that holder is.
template <typename T>
c10::intrusive_ptr<T> owned(const py::object& object, const char* what) {
  T* raw = nullptr;
  try {
    raw = object.cast<T*>();
  } catch (const py::cast_error&) {
    throw py::type_error(std::string("expected a torch ") + what + ", got " +
                         py::str(py::type::of(object)).cast<std::string>());
  }
  return c10::intrusive_ptr<T>::reclaim_copy(raw);
}

// A Python callable kept alive by C++ and called from any thread: every touch takes the GIL.
backends::GlooBackendMaker glooMakerFrom(py::function make) {
  auto callable = std::shared_ptr<py::function>(new py::function(std::move(make)), [](py::function* f) {
    // A non-Python thread taking the GIL during interpreter shutdown is ended by Python
    // mid-destructor; the callable is not worth that: leave it to the dying interpreter.
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
    py::gil_scoped_acquire gil;
    delete f;
  });
  return [callable](const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix, int rank, int size,
                    std::chrono::milliseconds timeout) {
    py::gil_scoped_acquire gil;
    py::object gloo = (*callable)(store, prefix, rank, size, timeout);
    return owned<c10d::Backend>(gloo, "Backend (ProcessGroupGloo)");
  };
}

backends::PolicyMaker policyMakerFor(const std::string& behaviour, bool lazyInit) {
  if (behaviour == "legacy") return [](int rank, int size) { return backends::makeLegacyPolicy(rank, size); };
  if (behaviour == "rewritten") {
    return [lazyInit](int rank, int size) { return backends::makeRewrittenPolicy(rank, size, lazyInit); };
  }
  if (behaviour == "rewritten-lazy-p2p") {
    return [lazyInit](int rank, int size) { return backends::makeRewrittenLazyP2PPolicy(rank, size, lazyInit); };
  }
  throw py::value_error("unknown behaviour '" + behaviour + "'; expected legacy, rewritten or rewritten-lazy-p2p");
}

c10::intrusive_ptr<c10d::Backend> createBackend(const std::string& behaviour, const py::object& store, int rank,
                                                int size, std::chrono::milliseconds timeout,
                                                const std::string& groupName, const std::string& groupDesc,
                                                std::vector<uint64_t> globalRanks,
                                                std::optional<at::Device> boundDevice, bool lazyInit,
                                                py::function makeGloo, bool enableReconfigure) {
  auto cppStore = owned<c10d::Store>(store, "Store");
  backends::GroupOptions options{groupName, groupDesc, timeout, std::move(globalRanks), boundDevice,
                                 enableReconfigure};
  auto makePolicy = policyMakerFor(behaviour, lazyInit);
  auto gloo = glooMakerFrom(std::move(makeGloo));
  backends::FactoryMaker makeFactory = [gloo](const c10::intrusive_ptr<c10d::Store>& s,
                                              const backends::GroupOptions& o) {
    return backends::makeCommunicatorFactory(s, gloo, o.groupName, o.timeout);
  };
  // Eager policies rendezvous with the other ranks here; let their Python threads run.
  py::gil_scoped_release release;
  return c10::make_intrusive<backends::MigrateBackend>(cppStore, rank, size, std::move(options), std::move(makePolicy),
                                                      std::move(makeFactory));
}

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
    bytes = backends::FlightRecorder::instance().dumpPickle();
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
  m.def("create_backend", &createBackend, py::arg("behaviour"), py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"), py::arg("group_name"), py::arg("group_desc"), py::arg("global_ranks"),
        py::arg("bound_device"), py::arg("lazy_init"), py::arg("make_gloo"), py::arg("enable_reconfigure") = false);
  m.def("communicators", &communicatorsOf, py::arg("backend"),
        "Live communicators of a toolkit backend: key, purpose, device, ranks, implementation, cost.");
  m.def("created_communicators", [] { return listOf(backends::MigrateBackend::createdCommunicators()); },
        "Every communicator toolkit backends of this process created, including destroyed groups'.");
  m.def("process_communicators", [] { return listOf(backends::MigrateBackend::processCommunicators()); },
        "Live communicators of every toolkit backend in this process, with their group and policy.");
  m.def("flight_recorder_dump", &flightRecorderDump, "The flight recorder's contents in torch's pickle format.");
  m.def("flight_recorder_dump_to_file", [](uint64_t rank) { return backends::FlightRecorder::instance().dumpToFile(rank); },
        py::arg("rank"), "Writes the dump where torch writes its own (TORCH_FR_DUMP_TEMP_FILE); returns the path.");
  m.def("resolve_nccl_name", &resolveNcclName, py::arg("name"), py::arg("use_nccl2"));
  m.def("stop_watchdog", [] { backends::stopWatchdogBeforeExit(); }, py::call_guard<py::gil_scoped_release>(),
        "Stops the watchdog thread, releasing the works it holds; called at interpreter exit.");
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
