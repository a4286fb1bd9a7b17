// The device seam under the NCCL communicator: streams, events, record-stream and the caller's
// current stream. The CUDA implementation goes through torch's own CUDA layer (its streams, its
// caching allocator); tests put a simulated device on the CPU in its place.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <cuda_runtime_api.h>

namespace nccl_migrate::backends::nccl {

// A stream of one device. For CUDA the handle is the cudaStream_t; a simulated device passes
// its own handle, which reaches its NcclApi unchanged.
struct StreamRef {
  void* handle = nullptr;
  c10::Device device{c10::kCPU};
  cudaStream_t forNccl() const { return static_cast<cudaStream_t>(handle); }
  bool operator==(const StreamRef& other) const { return handle == other.handle && device == other.device; }
};

enum class EventState {
  Pending,   // the stream has not reached the event yet
  Done,      // it has
  Captured,  // recorded during graph capture: it happens on each replay, never now
  Failed,    // the device reported an error (sticky CUDA errors, a failed launch)
};

struct EventStatus {
  EventState state = EventState::Pending;
  std::string error;  // for Failed
};

class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  // Marks the work issued on `stream` so far.
  virtual void record(const StreamRef& stream) = 0;
  // Makes `stream` wait for what the event marks; the host does not wait.
  virtual void block(const StreamRef& stream) = 0;
  // Never throws: the watchdog polls it, and an exception there would end the process.
  virtual EventStatus query() noexcept = 0;
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  // The stream the calling thread issues work on for `device` (torch's current stream).
  virtual StreamRef currentStream(c10::Device device) = 0;
  // A stream of the communicator's own.
  virtual StreamRef newStream(c10::Device device, bool highPriority) = 0;
  virtual std::unique_ptr<DeviceEvent> newEvent(c10::Device device) = 0;
  // The allocator keeps `tensor`'s memory from reuse until `stream` has passed the work issued
  // on it so far.
  virtual void recordStream(const at::Tensor& tensor, const StreamRef& stream) = 0;
  // dst.copy_(src), in `stream`'s order.
  virtual void copy(const at::Tensor& dst, const at::Tensor& src, const StreamRef& stream) = 0;
  // Runs `mark` so that whatever it marks complete is ordered after the work issued on `stream`
  // so far: how an op's future is completed, as torch's NCCL backends complete theirs (legacy
  // ProcessGroupNCCL::collective() marks it with the NCCL stream current, nccl2's
  // WorkNCCL::getFuture() with the caller's stream current once that stream waits for the op).
  // CUDA runs it now, on the calling thread, with `stream` current: a CUDA future records its
  // events there, is complete on the host at once, and its consumers' streams wait for the
  // events. A device whose futures carry no events (the simulated one: the CPU's) runs it when
  // the stream gets there instead, so consumers see the outputs no earlier than a CUDA
  // consumer's stream would, and the host sees the future complete later than on CUDA.
  virtual void completeInStreamOrder(const StreamRef& stream, std::function<void()> mark) = 0;
  // Whether `stream` is being captured into a graph right now.
  virtual bool capturing(const StreamRef& stream) = 0;
  // Free memory of `device`, where the device can tell.
  virtual std::optional<size_t> freeMemory(c10::Device device) = 0;
  // Makes `device` current on the calling thread until the returned guard is released.
  virtual std::shared_ptr<void> makeCurrent(c10::Device device) = 0;
};

std::shared_ptr<DeviceRuntime> cudaRuntime();

}  // namespace nccl_migrate::backends::nccl
