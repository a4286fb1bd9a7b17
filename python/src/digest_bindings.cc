// nccl_migrate._C.word_digest: the word digest of a tensor's bytes, on the GPU for a CUDA
// tensor and on the host otherwise, so the A/B recorder never copies a CUDA tensor to the host
// to hash it. word_digest_enqueue is the GPU form that does not wait: the digest runs on the
// tensor's stream and its 16 bytes come back later, so recording costs the job's CPU no stall.
#include "digest_bindings.h"

#include <cstdint>
#include <memory>
#include <utility>

#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

#include "nccl_migrate/digest/word_digest.h"

#if NCCL_MIGRATE_HAVE_DEVICE_DIGEST
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "nccl_migrate/digest/word_digest_cuda.h"
#endif

namespace py = pybind11;

namespace nccl_migrate::python {
namespace {

using Lanes = std::pair<std::uint64_t, std::uint64_t>;

// The tensor's elements in logical order, as one dense buffer (a copy only when they are not).
at::Tensor denseBytesOf(const at::Tensor& tensor) {
  return tensor.resolve_conj().resolve_neg().contiguous();
}

// A digest enqueued on a CUDA stream: its lane sums travel to pinned host memory on that stream,
// and an event says when they are there.
class PendingWordDigest {
 public:
#if NCCL_MIGRATE_HAVE_DEVICE_DIGEST
  // On the tensor's current stream: after the op that wrote it, before the job's next kernel.
  PendingWordDigest(const at::Tensor& tensor, const at::Tensor& dense) : bytes_(dense.nbytes()) {
    c10::cuda::CUDAGuard onItsDevice(dense.device());
    const auto stream = c10::cuda::getCurrentCUDAStream(dense.device().index());
    if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) {
      // Captured work runs at replay, not now: there would be nothing to read back.
      throw py::value_error("word_digest: the stream is capturing a CUDA graph");
    }
    // The job may free the tensor as soon as the op returns; made on another stream, its memory
    // could then be reused there before this stream reads it. Tell the allocator to wait.
    tensor.record_stream(stream.unwrap());
    auto sums = at::empty({2}, dense.options().dtype(at::kLong));
    C10_CUDA_CHECK(digest::enqueueWordDigestSums(dense.data_ptr(), bytes_,
                                                 reinterpret_cast<unsigned long long*>(sums.data_ptr()), stream));
    host_ = at::empty({2}, at::TensorOptions().dtype(at::kLong).pinned_memory(true));
    host_.copy_(sums, /*non_blocking=*/true);
    event_ = std::make_unique<at::cuda::CUDAEvent>();
    event_->record(stream);
  }

  // Both may be called from the record writer's thread: on the event's device, so a thread that
  // never touched CUDA does not make another device's context (device 0's) current, or create it.
  bool ready() const {
    c10::cuda::CUDAGuard onItsDevice(event_->device_index());
    return event_->query();
  }

  Lanes result() {
    {
      py::gil_scoped_release released;
      c10::cuda::CUDAGuard onItsDevice(event_->device_index());
      event_->synchronize();
    }
    const auto* lanes = static_cast<const std::uint64_t*>(host_.data_ptr());
    const digest::WordDigest value = digest::finish(lanes[0], lanes[1], bytes_);
    return {value.a, value.b};
  }

 private:
  std::size_t bytes_;
  at::Tensor host_;
  std::unique_ptr<at::cuda::CUDAEvent> event_;
#else
  PendingWordDigest(const at::Tensor&, const at::Tensor&) {
    throw py::value_error("word_digest: this build has no CUDA kernel (built without the CUDA toolkit); "
                          "hash a host copy instead");
  }
  bool ready() const { return true; }
  Lanes result() { return {}; }
#endif
};

PendingWordDigest enqueue(const at::Tensor& tensor) {
  if (!tensor.is_cuda()) throw py::value_error("word_digest_enqueue: a CUDA tensor is needed, got one on " +
                                               tensor.device().str());
  return PendingWordDigest(tensor, denseBytesOf(tensor));
}

Lanes wordDigest(const at::Tensor& tensor) {
  if (tensor.is_cuda()) return enqueue(tensor).result();
  if (!tensor.is_cpu()) {
    throw py::value_error("word_digest: tensors on " + tensor.device().str() + " are not supported (CPU or CUDA)");
  }
  const at::Tensor dense = denseBytesOf(tensor);
  py::gil_scoped_release released;
  const digest::WordDigest value = digest::wordDigestOnHost(dense.data_ptr(), dense.nbytes());
  return {value.a, value.b};
}

}  // namespace

void bindDigest(py::module_& m) {
  py::class_<PendingWordDigest>(m, "PendingWordDigest",
                                "A word digest running on a CUDA stream; result() waits for it.")
      .def("ready", &PendingWordDigest::ready, "Whether the stream has computed it (never waits).")
      .def("result", &PendingWordDigest::result, "The two lanes, once the stream has computed them.");
  m.def("word_digest_enqueue", &enqueue, py::arg("tensor"),
        "Starts the word digest of a CUDA tensor on its current stream, after the work already there; "
        "returns at once.");
  m.def("word_digest", &wordDigest, py::arg("tensor"),
        "The word digest (two 64-bit lanes) of a tensor's elements: on the GPU, on the tensor's "
        "current stream, for a CUDA tensor; on the host otherwise. Same bytes, same value, either way.");
  m.attr("device_digest_compiled") = py::bool_(NCCL_MIGRATE_HAVE_DEVICE_DIGEST != 0);
}

}  // namespace nccl_migrate::python
