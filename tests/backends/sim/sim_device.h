// The simulated device: a DeviceRuntime on the CPU for tests. A test double, never a backend
// users can select. Streams are worker threads that run their work in order; the job's own
// "current stream" is the host itself by default (CPU tensors are read and written by the
// host in program order), and a test may make a worker stream current to see what the host
// does not wait for. Events complete when their stream reaches them; ops issued to a stream
// that is being captured are recorded, not run, and their events report Captured. A stream that
// waits on a captured event joins that capture until its origin ends it, as in CUDA.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <c10/core/Storage.h>

#include "nccl/device_runtime.h"

namespace nccl_migrate::sim {

class SimStream {
 public:
  explicit SimStream(std::string name, bool host);
  ~SimStream();
  // Host stream: runs `task` now, on the caller. Worker stream: queues it (or records it, while
  // captured).
  void enqueue(std::function<void()> task);
  bool isHost() const { return host_; }
  const std::string& name() const { return name_; }
  // Set by a test: this stream is the origin of a graph capture (cudaStreamBeginCapture) until it
  // is cleared (cudaStreamEndCapture).
  std::atomic<bool> capturing{false};
  // Whether work issued on this stream now is captured: it is a capture's origin, or joined one
  // by waiting on an event recorded during it, for as long as that capture lasts.
  bool isCapturing() const;
  // The origin of the capture this stream is in, or nullptr.
  SimStream* captureOrigin();
  // Waiting on an event recorded in `origin`'s capture brings this stream into it (CUDA's
  // cross-stream capture); it leaves when that capture ends.
  void joinCapture(SimStream* origin) { joined_ = origin; }
  // Tasks queued and not yet finished.
  size_t pending();
  // recordStream, as torch's caching allocator keeps it: the memory is not reused before the
  // stream has passed the work queued up to the moment the job frees it (not merely up to the
  // recordStream call: a grouped op is queued at the group's end, later). The job's freeing is
  // seen as the storage having no other owner, at the next enqueue.
  void holdUntilFreed(c10::Storage storage);

 private:
  void run();
  std::string name_;
  bool host_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<c10::Storage> held_;  // recorded on this stream and not yet freed by the job
  size_t running_ = 0;
  size_t captured_ = 0;
  bool stopping_ = false;
  std::atomic<SimStream*> joined_{nullptr};
  std::thread worker_;
};

class SimRuntime final : public backends::nccl::DeviceRuntime {
 public:
  // One per process, never destroyed: its worker threads may be blocked on peers at exit.
  static std::shared_ptr<SimRuntime> instance();

  backends::nccl::StreamRef currentStream(c10::Device device) override;
  backends::nccl::StreamRef newStream(c10::Device device, bool highPriority) override;
  // torch's stream pool (c10::cuda::getStreamFromPool), which a job and torch's own backends draw
  // from: kPoolStreams worker streams per priority per device, made on first use and handed out
  // round robin by one counter per device and priority for the whole process, so the 33rd
  // stream asked for is the first again.
  backends::nccl::StreamRef poolStream(c10::Device device, bool highPriority);
  static constexpr size_t kPoolStreams = 32;
  std::unique_ptr<backends::nccl::DeviceEvent> newEvent(c10::Device device) override;
  void recordStream(const at::Tensor& tensor, const backends::nccl::StreamRef& stream) override;
  void copy(const at::Tensor& dst, const at::Tensor& src, const backends::nccl::StreamRef& stream) override;
  void completeInStreamOrder(const backends::nccl::StreamRef& stream, std::function<void()> mark) override;
  bool capturing(const backends::nccl::StreamRef& stream) override;
  std::optional<size_t> freeMemory(c10::Device device) override;
  std::shared_ptr<void> makeCurrent(c10::Device device) override;

  // Test controls.
  static SimStream& streamOf(const backends::nccl::StreamRef& ref);
  // Makes `stream` the calling thread's current stream (nullptr: the host again).
  void setCurrentStream(SimStream* stream);
  std::shared_ptr<SimStream> makeWorkerStream(const std::string& name);
  // Every event recorded from now on reports a device error (a sticky CUDA error).
  std::atomic<bool> failEvents{false};
  // Device memory the simulated communicators hold.
  std::atomic<size_t> usedBytes{0};
  static constexpr size_t kTotalBytes = size_t(80) << 30;  // an H100's

 private:
  SimRuntime();
  std::shared_ptr<SimStream> host_;
  std::mutex streamsMutex_;
  std::deque<std::shared_ptr<SimStream>> streams_;  // kept for the life of the process
  struct Pool {
    std::vector<std::shared_ptr<SimStream>> streams;
    size_t handedOut = 0;
  };
  std::map<std::pair<c10::DeviceIndex, bool>, Pool> pools_;  // by device and priority, under streamsMutex_
  backends::nccl::CommunicatorStreams own_;  // the communicators' streams: worker streams, as CUDA's
};

}  // namespace nccl_migrate::sim
