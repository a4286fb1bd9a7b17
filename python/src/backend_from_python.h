// Making a toolkit backend from Python's arguments: torch's objects (its Store, its Gloo
// backends) cross into C++ here. Shared by nccl_migrate._C and the tests' simulated-device module,
// which differ only in the communicator factory they give each group.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/chrono.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "nccl_migrate/backends/communicator_factories.h"
#include "nccl_migrate/backends/communicator_policy.h"
#include "nccl_migrate/backends/migrate_backend.h"

namespace nccl_migrate::python {

namespace py = pybind11;

// torch registers its c10d classes with its own holder type; taking the raw pointer and
// re-owning it through the intrusive count works whatever that holder is.
template <typename T>
inline c10::intrusive_ptr<T> owned(const py::object& object, const char* what) {
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
inline backends::GlooBackendMaker glooMakerFrom(py::function make) {
  auto callable = std::shared_ptr<py::function>(new py::function(std::move(make)), [](py::function* f) {
    // A non-Python thread taking the GIL during interpreter shutdown is ended by Python
    // mid-destructor; the callable is not worth that: leave it to the dying interpreter.
#if PY_VERSION_HEX >= 0x030D0000  // Python 3.13 made Py_IsFinalizing public and removed _Py_IsFinalizing
    if (!Py_IsInitialized() || Py_IsFinalizing()) return;
#else
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
#endif
    py::gil_scoped_acquire gil;
    delete f;
  });
  return [callable](const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix, int rank, int size,
                    std::chrono::milliseconds timeout) {
    py::gil_scoped_acquire gil;
    try {
      return owned<c10d::Backend>((*callable)(store, prefix, rank, size, timeout), "Backend (ProcessGroupGloo)");
    } catch (py::error_already_set& e) {
      // The members met (the engine's meeting came first), so a connect that fails in Gloo's or
      // the store's words (a RuntimeError, torch's DistError among them) is a member that died
      // or hung since: DistBackendError, a peer's failure. Anything else (a TypeError, a bad
      // GLOO_SOCKET_IFNAME) is this rank's own and keeps its type.
      if (!e.matches(PyExc_RuntimeError)) throw;
      std::string what = py::str(py::type::of(e.value()).attr("__name__")).cast<std::string>() + ": " +
                         py::str(e.value()).cast<std::string>();
      C10_THROW_ERROR(DistBackendError, "Gloo could not connect the members: " + what);
    }
  };
}

inline backends::PolicyMaker policyMakerFor(const std::string& behaviour, bool lazyInit) {
  if (behaviour == "legacy") return [](int rank, int size) { return backends::makeLegacyPolicy(rank, size); };
  if (behaviour == "rewritten") {
    return [lazyInit](int rank, int size) { return backends::makeRewrittenPolicy(rank, size, lazyInit); };
  }
  if (behaviour == "rewritten-lazy-p2p") {
    return [lazyInit](int rank, int size) { return backends::makeRewrittenLazyP2PPolicy(rank, size, lazyInit); };
  }
  throw py::value_error("unknown behaviour '" + behaviour + "'; expected legacy, rewritten or rewritten-lazy-p2p");
}

// pg_options' NCCL settings as the Python package passes them (blocking, max_ctas, min_ctas,
// cga_cluster_size, split_share, high_priority_stream), over what the environment set.
inline backends::DeviceCommOptions deviceCommOptionsFrom(const py::dict& given, backends::DeviceCommOptions options) {
  auto field = [&](const char* name, std::optional<int>& into) {
    if (given.contains(name)) into = given[name].cast<int>();
  };
  field("blocking", options.blocking);
  field("max_ctas", options.maxCtas);
  field("min_ctas", options.minCtas);
  field("cga_cluster_size", options.cgaClusterSize);
  field("split_share", options.splitShare);
  if (given.contains("high_priority_stream")) options.highPriorityStream = given["high_priority_stream"].cast<bool>();
  return options;
}

// Binds create_backend(behaviour, store, rank, size, timeout, group_name, group_desc, global_ranks,
// bound_device, lazy_init, make_gloo, enable_reconfigure) into `m`, making each group's
// communicator factory with `factoryFor` (the production one in _C; tests pass another).
inline void bindCreateBackend(py::module_& m, std::function<backends::FactoryMaker(backends::GlooBackendMaker)> factoryFor) {
  auto create = [factoryFor](const std::string& behaviour, const py::object& store, int rank, int size,
                             std::chrono::milliseconds timeout, const std::string& groupName,
                             const std::string& groupDesc, std::vector<uint64_t> globalRanks,
                             std::optional<at::Device> boundDevice, bool lazyInit, py::function makeGloo,
                             bool enableReconfigure, const py::dict& deviceComms) -> c10::intrusive_ptr<c10d::Backend> {
  auto cppStore = owned<c10d::Store>(store, "Store");
  backends::GroupOptions options{groupName, groupDesc, timeout, std::move(globalRanks), boundDevice,
                                 enableReconfigure};
  backends::applyNcclEnvironment(options);
  options.deviceComms = deviceCommOptionsFrom(deviceComms, options.deviceComms);
  auto makePolicy = policyMakerFor(behaviour, lazyInit);
  backends::FactoryMaker makeFactory = factoryFor(glooMakerFrom(std::move(makeGloo)));
  // Eager policies rendezvous with the other ranks here; let their Python threads run.
  py::gil_scoped_release release;
  return c10::make_intrusive<backends::MigrateBackend>(cppStore, rank, size, std::move(options), std::move(makePolicy),
                                                      std::move(makeFactory));
  };
  m.def("create_backend", create, py::arg("behaviour"), py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"), py::arg("group_name"), py::arg("group_desc"), py::arg("global_ranks"),
        py::arg("bound_device"), py::arg("lazy_init"), py::arg("make_gloo"), py::arg("enable_reconfigure") = false,
        py::arg("device_comms") = py::dict());
}

}  // namespace nccl_migrate::python
