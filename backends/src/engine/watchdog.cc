// The watchdog thread (see watchdog.h). Like torch's own watchdog it keeps every pending Work
// alive until it settles, so ops issued and never waited on are still held to their timeout.
#include "watchdog.h"

#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>

#include "engine_work.h"
#include "nccl_migrate/backends/shutdown.h"

namespace nccl_migrate::backends {
namespace {

class Watchdog {
 public:
  static Watchdog& instance() {
    // Function-local: constructed at the first op, after the flight recorder it writes to, so
    // at exit it is destroyed (and its thread stopped) before that recorder.
    static Watchdog watchdog;
    return watchdog;
  }

  ~Watchdog() { stop(); }

  // Stops the thread; it drops what it holds on its way out. Idempotent.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void add(const c10::intrusive_ptr<EngineWork>& work) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;  // the process is exiting
    pending_.emplace_back(work);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    wake_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::list<c10::intrusive_ptr<EngineWork>> batch;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
        if (stopping_) {
          pending_.clear();
          return;
        }
        batch.splice(batch.end(), pending_);
      }
      auto now = std::chrono::steady_clock::now();
      for (auto it = batch.begin(); it != batch.end();) {
        if ((*it)->watch(now)) it = batch.erase(it);
        else ++it;
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        pending_.splice(pending_.begin(), batch);
      }
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_for(lock, kPollInterval, [this] { return stopping_; })) {
        pending_.clear();
        return;
      }
    }
  }

  static constexpr std::chrono::milliseconds kPollInterval{20};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::list<c10::intrusive_ptr<EngineWork>> pending_;
  std::thread thread_;
};

}  // namespace

void watchUntilSettled(const c10::intrusive_ptr<EngineWork>& work) { Watchdog::instance().add(work); }

void stopWatchdogBeforeExit() { Watchdog::instance().stop(); }

}  // namespace nccl_migrate::backends
