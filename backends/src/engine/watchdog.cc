// The watchdog thread (see watchdog.h). Like torch's own watchdog it keeps every pending Work
// alive until it settles, so ops issued and never waited on are still held to their timeout.
#include "watchdog.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
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

  // Stops the thread; it runs the queued tasks and drops what it holds on its way out.
  // Idempotent.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    runTasks();  // queued after the thread left, or with no thread ever started
  }

  void post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
    if (stopping_) return;  // stop() runs it
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    wake_.notify_one();
  }

  void add(const c10::intrusive_ptr<EngineWork>& work) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;  // the process is exiting
    pending_.emplace_back(work);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    // A polling watchdog sees the work at its next poll; waking it for every op would cost a
    // context switch per op. Only an idle one (nothing to watch) is woken.
    if (idle_) wake_.notify_one();
  }

 private:
  void runTasks() {
    for (;;) {
      std::function<void()> task;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  void loop() {
    for (;;) {
      runTasks();
      std::list<c10::intrusive_ptr<EngineWork>> batch;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        idle_ = true;
        wake_.wait(lock, [this] { return stopping_ || !pending_.empty() || !tasks_.empty(); });
        idle_ = false;
        if (stopping_) {
          pending_.clear();
          lock.unlock();
          runTasks();
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
      if (wake_.wait_for(lock, kPollInterval, [this] { return stopping_ || !tasks_.empty(); }) && stopping_) {
        pending_.clear();
        lock.unlock();
        runTasks();
        return;
      }
    }
  }

  static constexpr std::chrono::milliseconds kPollInterval{20};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool idle_ = false;  // waiting for work, not polling
  std::list<c10::intrusive_ptr<EngineWork>> pending_;
  std::deque<std::function<void()>> tasks_;
  std::thread thread_;
};

}  // namespace

void watchUntilSettled(const c10::intrusive_ptr<EngineWork>& work) { Watchdog::instance().add(work); }

void runOnWatchdog(std::function<void()> task) { Watchdog::instance().post(std::move(task)); }

void stopWatchdogBeforeExit() { Watchdog::instance().stop(); }

}  // namespace nccl_migrate::backends
