// SimRuntime: see sim_device.h.
#include "sim_device.h"

#include <c10/util/Exception.h>

#include "common/exit_gate.h"

namespace nccl_migrate::sim {
namespace {

using backends::nccl::EventState;
using backends::nccl::EventStatus;
using backends::nccl::StreamRef;

thread_local SimStream* currentOverride = nullptr;

// What an event marks: generations recorded and reached, shared with the tasks that reach it.
struct EventMarks {
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t recorded = 0;
  uint64_t reached = 0;
  bool captured = false;
  SimStream* captureOrigin = nullptr;  // of the capture the last record was made in
  bool failed = false;

  void reach(uint64_t generation) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      reached = std::max(reached, generation);
    }
    cv.notify_all();
  }
  void awaitGeneration(uint64_t generation) {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return reached >= generation; });
  }
};

class SimEvent final : public backends::nccl::DeviceEvent {
 public:
  explicit SimEvent(SimRuntime& runtime) : runtime_(runtime), marks_(std::make_shared<EventMarks>()) {}

  void record(const StreamRef& ref) override {
    SimStream& stream = SimRuntime::streamOf(ref);
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(marks_->mutex);
      generation = ++marks_->recorded;
      marks_->captureOrigin = stream.captureOrigin();
      marks_->captured = marks_->captureOrigin != nullptr;
      marks_->failed = runtime_.failEvents.load();
    }
    if (marks_->captured) return;
    stream.enqueue([marks = marks_, generation] { marks->reach(generation); });
  }

  void block(const StreamRef& ref) override {
    SimStream& stream = SimRuntime::streamOf(ref);
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(marks_->mutex);
      if (marks_->captured) {
        // Waiting on captured work brings the stream into that capture (CUDA Programming Guide,
        // "CUDA Graphs", "Cross-stream Dependencies and Events"), until the capture ends.
        stream.joinCapture(marks_->captureOrigin);
        return;
      }
      generation = marks_->recorded;
    }
    if (generation == 0) return;
    stream.enqueue([marks = marks_, generation] { marks->awaitGeneration(generation); });
  }

  EventStatus query() noexcept override {
    std::lock_guard<std::mutex> lock(marks_->mutex);
    if (marks_->captured) return {EventState::Captured, ""};
    if (marks_->failed) return {EventState::Failed, "simulated sticky device error"};
    return {marks_->reached >= marks_->recorded ? EventState::Done : EventState::Pending, ""};
  }

 private:
  SimRuntime& runtime_;
  std::shared_ptr<EventMarks> marks_;
};

}  // namespace

SimStream::SimStream(std::string name, bool host) : name_(std::move(name)), host_(host) {
  if (!host_) worker_ = std::thread([this] { run(); });
}

SimStream::~SimStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.detach();
}

void SimStream::enqueue(std::function<void()> task) {
  if (host_) return task();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (isCapturing()) {
      ++captured_;  // recorded into the graph: runs on replay, not now
      return;
    }
    // Storages the job freed since the last enqueue: held until the stream passes what was
    // queued before now.
    std::vector<c10::Storage> freed;
    for (auto it = held_.begin(); it != held_.end();) {
      if (it->use_count() == 1) {
        freed.push_back(std::move(*it));
        it = held_.erase(it);
      } else {
        ++it;
      }
    }
    if (!freed.empty()) queue_.push_back([freed = std::move(freed)] {});
    queue_.push_back(std::move(task));
  }
  cv_.notify_all();
}

bool SimStream::isCapturing() const {
  if (capturing.load()) return true;
  SimStream* origin = joined_.load();
  return origin && origin->capturing.load();
}

SimStream* SimStream::captureOrigin() {
  if (capturing.load()) return this;
  SimStream* origin = joined_.load();
  return origin && origin->capturing.load() ? origin : nullptr;
}

void SimStream::holdUntilFreed(c10::Storage storage) {
  if (host_) return;  // the host ran everything queued on it already
  std::lock_guard<std::mutex> lock(mutex_);
  // Once per storage: the count that tells it freed is the job's owners plus this one. (A
  // storage recorded on two streams is never seen freed: kept, never reused too early.)
  for (const c10::Storage& held : held_) {
    if (held.unsafeGetStorageImpl() == storage.unsafeGetStorageImpl()) return;
  }
  held_.push_back(std::move(storage));
}

size_t SimStream::pending() {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size() + running_;
}

void SimStream::run() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    task();
    task = nullptr;  // what it holds (a storage kept for recordStream) goes before it counts as done
    std::lock_guard<std::mutex> lock(mutex_);
    --running_;
  }
}

SimRuntime::SimRuntime()
    : host_(std::make_shared<SimStream>("host", /*host=*/true)),
      own_([this](c10::Device device, bool) -> void* {
             return makeWorkerStream("sim:" + std::to_string(device.index()) + "/comm").get();
           },
           [](void* handle, c10::Device) {
             auto* stream = static_cast<SimStream*>(handle);
             return stream->pending() == 0 && !stream->isCapturing();  // CUDA's query answers no in capture
           }) {}

std::shared_ptr<SimRuntime> SimRuntime::instance() {
  static auto* runtime = new std::shared_ptr<SimRuntime>(new SimRuntime());  // never destroyed
  return *runtime;
}

SimStream& SimRuntime::streamOf(const StreamRef& ref) {
  TORCH_CHECK(ref.handle, "simulated device: a null stream");
  return *static_cast<SimStream*>(ref.handle);
}

StreamRef SimRuntime::currentStream(c10::Device device) {
  return {currentOverride ? currentOverride : host_.get(), device};
}

StreamRef SimRuntime::newStream(c10::Device device, bool highPriority) { return own_.take(device, highPriority); }

StreamRef SimRuntime::poolStream(c10::Device device, bool highPriority) {
  std::lock_guard<std::mutex> lock(streamsMutex_);
  Pool& pool = pools_[{device.index(), highPriority}];
  if (pool.streams.empty()) {
    for (size_t i = 0; i < kPoolStreams; ++i) {
      pool.streams.push_back(std::make_shared<SimStream>(
          "sim:" + std::to_string(device.index()) + (highPriority ? "/pool-high/" : "/pool/") + std::to_string(i),
          /*host=*/false));
    }
  }
  return {pool.streams[pool.handedOut++ % kPoolStreams].get(), device};
}

std::shared_ptr<SimStream> SimRuntime::makeWorkerStream(const std::string& name) {
  auto stream = std::make_shared<SimStream>(name, /*host=*/false);
  std::lock_guard<std::mutex> lock(streamsMutex_);
  streams_.push_back(stream);
  return stream;
}

void SimRuntime::setCurrentStream(SimStream* stream) { currentOverride = stream; }

std::unique_ptr<backends::nccl::DeviceEvent> SimRuntime::newEvent(c10::Device) {
  return std::make_unique<SimEvent>(*this);
}

void SimRuntime::recordStream(const at::Tensor& tensor, const StreamRef& ref) {
  if (!tensor.defined()) return;
  streamOf(ref).holdUntilFreed(tensor.storage());
}

void SimRuntime::copy(const at::Tensor& dst, const at::Tensor& src, const StreamRef& ref) {
  streamOf(ref).enqueue([dst, src]() mutable { dst.copy_(src); });
}

// A CUDA future is complete at once and its consumers' streams wait on the events it recorded
// (c10::ivalue::Future::markCompleted records them on the current streams; wait() and then()
// make the consumer's current stream wait). The simulation's futures are the CPU's, with no
// events: the mark runs when the stream gets there, which is when a CUDA consumer's stream would
// see the outputs. What it marks is the engine's to decide (the op's outputs, never its error).
// The stream's thread runs it, as Gloo's worker runs a host op's completion: once the
// interpreter's exit has begun it keeps what the mark holds (exit_gate.h).
void SimRuntime::completeInStreamOrder(const StreamRef& ref, std::function<void()> mark) {
  streamOf(ref).enqueue([mark = std::move(mark)]() mutable {
    backends::ExitGate::Section section;
    if (!section) return backends::ExitGate::keep(std::move(mark));
    mark();
    mark = nullptr;  // what it holds goes inside the section
  });
}

bool SimRuntime::capturing(const StreamRef& ref) { return streamOf(ref).isCapturing(); }

std::optional<size_t> SimRuntime::freeMemory(c10::Device) {
  size_t used = usedBytes.load();  // more than the device has: none free, never a wrapped count
  return used >= kTotalBytes ? 0 : kTotalBytes - used;
}

std::shared_ptr<void> SimRuntime::makeCurrent(c10::Device) { return nullptr; }

}  // namespace nccl_migrate::sim
