// nccl_migrate._C: the Python face of the backends and the shim. Objects torch created in
// Python (its Store, its Gloo backends) cross into C++ here, and our backends go back out as
// torch Backend objects.
#include <memory>

#include <pybind11/chrono.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "nccl_migrate/backends/communicator_factories.h"
#include "nccl_migrate/backends/migrate_backend.h"
#include "nccl_migrate/shim/backend_name.h"

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
    py::gil_scoped_acquire gil;
    delete f;
  });
  return [callable](const std::string& prefix, int rank, int size) {
    py::gil_scoped_acquire gil;
    py::object gloo = (*callable)(prefix, rank, size);
    return owned<c10d::Backend>(gloo, "Backend (ProcessGroupGloo)");
  };
}

std::unique_ptr<backends::CommunicatorPolicy> policyFor(const std::string& behaviour, int rank, int size, bool lazyInit) {
  if (behaviour == "legacy") return backends::makeLegacyPolicy(rank, size);
  if (behaviour == "rewritten") return backends::makeRewrittenPolicy(rank, size, lazyInit);
  throw py::value_error("unknown behaviour '" + behaviour + "'; expected legacy or rewritten");
}

c10::intrusive_ptr<c10d::Backend> createBackend(const std::string& behaviour, const py::object& store, int rank,
                                                int size, std::chrono::milliseconds timeout,
                                                const std::string& groupName, std::vector<uint64_t> globalRanks,
                                                std::optional<at::Device> boundDevice, bool lazyInit,
                                                py::function makeGloo) {
  auto cppStore = owned<c10d::Store>(store, "Store");
  backends::GroupOptions options{groupName, timeout, std::move(globalRanks), boundDevice};
  auto factory = backends::makeCommunicatorFactory(cppStore, glooMakerFrom(std::move(makeGloo)), groupName, timeout);
  auto policy = policyFor(behaviour, rank, size, lazyInit);
  // Eager policies rendezvous with the other ranks here; let their Python threads run.
  py::gil_scoped_release release;
  return c10::make_intrusive<backends::MigrateBackend>(rank, size, std::move(options), std::move(policy),
                                                      std::move(factory));
}

py::list communicatorsOf(const py::object& backend) {
  auto cpp = owned<c10d::Backend>(backend, "Backend");
  auto* ours = dynamic_cast<backends::MigrateBackend*>(cpp.get());
  if (!ours) throw py::type_error("not an nccl_migrate backend: " + cpp->getBackendName());
  py::list out;
  for (const backends::CommunicatorInfo& info : ours->communicators()) {
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
    out.append(d);
  }
  return out;
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
        py::arg("timeout"), py::arg("group_name"), py::arg("global_ranks"), py::arg("bound_device"),
        py::arg("lazy_init"), py::arg("make_gloo"));
  m.def("communicators", &communicatorsOf, py::arg("backend"),
        "Live communicators of a toolkit backend: key, purpose, device, ranks, implementation, cost.");
  m.def("resolve_nccl_name", &resolveNcclName, py::arg("name"), py::arg("use_nccl2"));
  m.def("nccl_compiled", &backends::ncclCompiled);
  m.def("nccl_build_version", &backends::ncclBuildVersion);
}
