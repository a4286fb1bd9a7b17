// The device seam under the NCCL communicator: streams, events, record-stream and the caller's
// current stream. The CUDA implementation goes through torch's own CUDA layer (its streams, its
// caching allocator); tests put a simulated device on the CPU in its place.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <cuda_runtime_api.h>

namespace nccl_migrate::backends::nccl {

// A stream of one device. For CUDA the handle is the cudaStream_t; a simulated device passes
// its own handle, which reaches its NcclApi unchanged.
struct StreamRef {
  void* handle = nullptr;
  c10::Device device{c10::kCPU};
  // Set on a communicator's own stream (CommunicatorStreams): no one else gets the stream while
  // a copy of it lives.
  std::shared_ptr<void> owner;
  cudaStream_t forNccl() const { return static_cast<cudaStream_t>(handle); }
  bool operator==(const StreamRef& other) const { return handle == other.handle && device == other.device; }
};

// The streams communicators own, one each, made through a runtime's own two calls. torch's pool
// (c10::cuda::getStreamFromPool) hands out 32 streams per priority per device round robin,
// shared with every user in the process (c10/cuda/CUDAStream.h, "Stream pool note"), so the 33rd
// communicator, or one beside the job's or torch's own pool streams, would share a stream: its
// ops would queue behind another's stuck kernel, and so would the abort that should end it.
// A stream is never destroyed, as torch never destroys its pool's: the caching allocator records
// an event on every stream a freed block was recorded on (recordStream; CUDACachingAllocator.cpp,
// insert_events), which may come long after the communicator is gone. Once the last copy of its
// ref is gone, the stream waits for a later communicator, which gets it only when the device
// has passed everything issued on it: a stream with a stuck kernel is never handed out again.
// So a process keeps as many streams as it ever had communicators alive at once (per device and
// priority), where torch shares 32: with legacy pair communicators, up to world size - 1 of them.
class CommunicatorStreams {
 public:
  using Make = std::function<void*(c10::Device device, bool highPriority)>;
  using Idle = std::function<bool(void* handle, c10::Device device)>;
  CommunicatorStreams(Make make, Idle idle) : state_(std::make_shared<State>()) {
    state_->make = std::move(make);
    state_->idle = std::move(idle);
  }

  StreamRef take(c10::Device device, bool highPriority) {
    void* handle = reuse(device, highPriority);
    if (!handle) handle = state_->make(device, highPriority);
    // The state, not this object: a ref may outlive the runtime (a communicator leaked past the
    // process's static destructors).
    std::shared_ptr<void> owner(handle, [state = state_, device, highPriority](void* released) {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->released.push_back({released, device, highPriority});
    });
    return {handle, device, std::move(owner)};
  }

 private:
  struct Released {
    void* handle;
    c10::Device device;
    bool highPriority;
  };
  struct State {
    Make make;
    Idle idle;
    std::mutex mutex;
    std::vector<Released> released;
  };

  void* reuse(c10::Device device, bool highPriority) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto& released = state_->released;
    for (auto it = released.begin(); it != released.end(); ++it) {
      if (it->device == device && it->highPriority == highPriority && state_->idle(it->handle, device)) {
        void* handle = it->handle;
        released.erase(it);
        return handle;
      }
    }
    return nullptr;
  }

  std::shared_ptr<State> state_;
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
  // A stream of the communicator's own, never shared with another (CommunicatorStreams).
  virtual StreamRef newStream(c10::Device device, bool highPriority) = 0;
  virtual std::unique_ptr<DeviceEvent> newEvent(c10::Device device) = 0;
  // The allocator keeps `tensor`'s memory from reuse until `stream` has passed the work issued
  // on it so far.
  virtual void recordStream(const at::Tensor& tensor, const StreamRef& stream) = 0;
  // dst.copy_(src), in `stream`'s order.
  virtual void copy(const at::Tensor& dst, const at::Tensor& src, const StreamRef& stream) = 0;
  // Runs `mark` so that whatever it marks complete is ordered after the work issued on `stream`
  // so far: how an op's future is completed, as torch's NCCL backends complete theirs (legacy
  // ProcessGroupNCCL::collective() marks it at issue, right after the op's end event, with the
  // NCCL stream current; nccl2's WorkNCCL::getFuture() with the caller's stream current once that
  // stream waits for the op).
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
