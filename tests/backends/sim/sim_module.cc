// _nccl_migrate_sim: the toolkit's backends with their NCCL communicators over the simulated
// device, for the Python suites only (built under tests/, never installed). Its create_backend
// is nccl_migrate._C's, with CPU tensors served by the NCCL communicator on the simulated
// device instead of Gloo.
#include "backend_from_python.h"
#include "sim_nccl.h"

namespace py = pybind11;

PYBIND11_MODULE(_nccl_migrate_sim, m) {
  m.doc() = "Test double: nccl_migrate backends whose NCCL communicators run on a simulated device";
  nccl_migrate::python::bindCreateBackend(m, [](nccl_migrate::backends::GlooBackendMaker) {
    return [](const c10::intrusive_ptr<c10d::Store>& store, const nccl_migrate::backends::GroupOptions& o) {
      auto seams = nccl_migrate::sim::simulatedSeams(store);
      return nccl_migrate::backends::makeCommunicatorFactory(store, nullptr, o.groupName, o.connectTimeout(), seams, c10::kCPU,
                                                             o.deviceComms);
    };
  });
  m.def("device_memory_used", [] { return nccl_migrate::sim::SimRuntime::instance()->usedBytes.load(); },
        "Bytes the simulated communicators of this process hold.");
}
