// DeviceRuntime over torch's CUDA layer: its current streams, its events and its caching
// allocator, so the job's streams are the ones torch sees; each communicator's stream is one of
// its own (CommunicatorStreams), made at the priorities of torch's pool.
#include "device_runtime.h"

#include <tuple>

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace nccl_migrate::backends::nccl {
namespace {

c10::cuda::CUDAStream streamOf(const StreamRef& ref) {
  return c10::cuda::getStreamFromExternal(ref.forNccl(), ref.device.index());
}

StreamRef refOf(const c10::cuda::CUDAStream& stream) {
  return {stream.stream(), stream.device()};
}

// This thread's stream-capture mode set to relaxed for the guard's lifetime.
struct RelaxedCaptureMode {
  cudaStreamCaptureMode previous = cudaStreamCaptureModeRelaxed;
  RelaxedCaptureMode() { (void)cudaThreadExchangeStreamCaptureMode(&previous); }
  ~RelaxedCaptureMode() { (void)cudaThreadExchangeStreamCaptureMode(&previous); }
};

class CudaEvent final : public DeviceEvent {
 public:
  explicit CudaEvent(c10::Device device) : device_(device) {}
  void record(const StreamRef& stream) override { event_.record(streamOf(stream)); }
  void block(const StreamRef& stream) override { event_.block(streamOf(stream)); }
  EventStatus query() noexcept override {
    try {
      // On the event's device: a query from the watchdog thread must not create a context on
      // device 0 of every rank.
      c10::cuda::CUDAGuard guard(device_);
      // Under torch's default (global) capture mode, a query from another thread while a
      // stream is captured invalidates that capture: query in relaxed mode, as torch does.
      RelaxedCaptureMode relaxed;
      bool done = event_.query();
      return {done ? EventState::Done : EventState::Pending, ""};
    } catch (const std::exception& e) {
      // Captured events cannot be queried and sticky errors surface here; either way the
      // watchdog must see a state, not an exception.
      return {EventState::Failed, e.what()};
    }
  }

 private:
  c10::Device device_;
  at::cuda::CUDAEvent event_;
};

// A new stream of `device`, flagged and prioritized as torch's pool makes its own
// (c10/cuda/CUDAStream.cpp: cudaStreamNonBlocking; priority 0, or the highest torch supports,
// CUDAStream::priority_range(), for a high-priority one).
void* makeStream(c10::Device device, bool highPriority) {
  c10::cuda::CUDAGuard guard(device);
  RelaxedCaptureMode relaxed;  // another thread may be capturing in torch's global mode
  int priority = highPriority ? std::get<1>(c10::cuda::CUDAStream::priority_range()) : 0;
  cudaStream_t stream = nullptr;
  cudaError_t made = cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, priority);
  if (made != cudaSuccess) (void)cudaGetLastError();  // reported here, not by torch's next check
  TORCH_CHECK(made == cudaSuccess, "could not create a stream for a communicator on ", device.str(), ": ",
              cudaGetErrorString(made));
  return stream;
}

// Whether the device has passed everything issued on `handle`. Anything but done (still
// running, in a capture the job has not ended, or an error) keeps the stream from reuse.
bool streamIdle(void* handle, c10::Device device) {
  c10::cuda::CUDAGuard guard(device);
  RelaxedCaptureMode relaxed;
  auto stream = static_cast<cudaStream_t>(handle);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  // Querying a stream in capture would invalidate the job's capture.
  // Every answer but success is cleared from the thread's last error (cudaGetLastError), so
  // that torch's next check (C10_CUDA_CHECK reads it) does not report it as its own:
  // cudaErrorNotReady is no error at all (torch clears it so too), and any other error counts
  // only as "not idle" here. A sticky error (the context is broken) stays in the context
  // whatever is cleared: torch's next CUDA call meets it there.
  cudaError_t asked = cudaStreamIsCapturing(stream, &capture);
  if (asked != cudaSuccess) (void)cudaGetLastError();
  if (asked != cudaSuccess || capture != cudaStreamCaptureStatusNone) return false;
  cudaError_t status = cudaStreamQuery(stream);
  if (status != cudaSuccess) (void)cudaGetLastError();
  return status == cudaSuccess;
}

class CudaRuntime final : public DeviceRuntime {
 public:
  StreamRef currentStream(c10::Device device) override {
    return refOf(c10::cuda::getCurrentCUDAStream(device.index()));
  }
  StreamRef newStream(c10::Device device, bool highPriority) override { return own_.take(device, highPriority); }
  std::unique_ptr<DeviceEvent> newEvent(c10::Device device) override { return std::make_unique<CudaEvent>(device); }
  void recordStream(const at::Tensor& tensor, const StreamRef& stream) override {
    if (tensor.defined() && tensor.is_cuda()) {
      c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), streamOf(stream));
    }
  }
  void copy(const at::Tensor& dst, const at::Tensor& src, const StreamRef& stream) override {
    c10::cuda::CUDAStreamGuard onStream(streamOf(stream));
    const_cast<at::Tensor&>(dst).copy_(src, /*non_blocking=*/true);
  }
  void completeInStreamOrder(const StreamRef& stream, std::function<void()> mark) override {
    // As torch's NCCL backends complete a future: the stream current while it is marked is where
    // c10::ivalue::Future records the events its consumers' streams wait for.
    c10::cuda::CUDAStreamGuard onStream(streamOf(stream));
    mark();
  }
  bool capturing(const StreamRef& stream) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(stream.forNccl(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone;
  }
  std::optional<size_t> freeMemory(c10::Device device) override {
    c10::cuda::CUDAGuard guard(device);
    size_t freeBytes = 0, totalBytes = 0;
    if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) return std::nullopt;
    return freeBytes;
  }
  std::shared_ptr<void> makeCurrent(c10::Device device) override {
    return std::make_shared<c10::cuda::CUDAGuard>(device);
  }

 private:
  CommunicatorStreams own_{makeStream, streamIdle};
};

}  // namespace

std::shared_ptr<DeviceRuntime> cudaRuntime() {
  static auto runtime = std::make_shared<CudaRuntime>();
  return runtime;
}

}  // namespace nccl_migrate::backends::nccl
