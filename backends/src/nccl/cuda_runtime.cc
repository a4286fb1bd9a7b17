// DeviceRuntime over torch's CUDA layer: its stream pool and current streams, its events and its
// caching allocator, so the communicator's streams are the ones torch and the job see.
#include "device_runtime.h"

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

class CudaRuntime final : public DeviceRuntime {
 public:
  StreamRef currentStream(c10::Device device) override {
    return refOf(c10::cuda::getCurrentCUDAStream(device.index()));
  }
  StreamRef newStream(c10::Device device, bool highPriority) override {
    return refOf(c10::cuda::getStreamFromPool(highPriority, device.index()));
  }
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
};

}  // namespace

std::shared_ptr<DeviceRuntime> cudaRuntime() {
  static auto runtime = std::make_shared<CudaRuntime>();
  return runtime;
}

}  // namespace nccl_migrate::backends::nccl
