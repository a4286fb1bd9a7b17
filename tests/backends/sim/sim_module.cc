// _nccl_migrate_sim: the toolkit's backends with their NCCL communicators over the simulated
// device, for the Python suites only (built under tests/, never installed). Its create_backend
// is nccl_migrate._C's, with CPU tensors served by the NCCL communicator on the simulated
// device instead of Gloo.
#include <future>
#include <memory>

#include "backend_from_python.h"
#include "sim_device.h"
#include "sim_nccl.h"

namespace py = pybind11;

namespace {

using nccl_migrate::sim::SimRuntime;
using nccl_migrate::sim::SimStream;

// A job's own stream on the simulated device, current on the thread that enters it (the host is
// the current stream otherwise): what the job issues while it is current, the host does not wait
// for, as with a CUDA stream. A stream is one per entry and lives as long as the process.
class JobStream {
 public:
  JobStream() : stream_(SimRuntime::instance()->makeWorkerStream("python-job")) {}
  JobStream& enter() {
    SimRuntime::instance()->setCurrentStream(stream_.get());
    return *this;
  }
  void exit(const py::args&) { SimRuntime::instance()->setCurrentStream(nullptr); }

  // Runs `fn` on the stream after what was issued on it so far, on the stream's own thread. An
  // exception it raises is kept and raised by the next synchronize().
  void enqueue(py::function fn) {
    auto held = std::shared_ptr<py::function>(new py::function(std::move(fn)), [](py::function* f) {
      py::gil_scoped_acquire gil;
      delete f;
    });
    auto failure = failure_;
    stream_->enqueue([held, failure] {
      py::gil_scoped_acquire gil;
      try {
        (*held)();
      } catch (const std::exception& e) {
        if (failure->empty()) *failure = e.what();
      }
    });
  }

  // Blocks the host until the stream has run what was issued on it so far.
  void synchronize() {
    auto reached = std::make_shared<std::promise<void>>();
    auto done = reached->get_future();
    stream_->enqueue([reached] { reached->set_value(); });
    {
      py::gil_scoped_release released;
      done.wait();
    }
    if (!failure_->empty()) {
      std::string what = *failure_;
      failure_->clear();
      throw std::runtime_error("a function run on the job stream raised: " + what);
    }
  }

 private:
  std::shared_ptr<SimStream> stream_;
  std::shared_ptr<std::string> failure_ = std::make_shared<std::string>();
};

}  // namespace

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
  py::class_<JobStream>(m, "JobStream",
                        "A stream of the job's own on the simulated device, current on this thread inside `with`.")
      .def(py::init<>())
      .def("__enter__", &JobStream::enter, py::return_value_policy::reference)
      .def("__exit__", &JobStream::exit)
      .def("enqueue", &JobStream::enqueue, py::arg("fn"),
           "Runs fn on this stream, after what was issued on it so far (on the stream's own thread).")
      .def("synchronize", &JobStream::synchronize, "Blocks the host until this stream has run what was issued on it.");
}
