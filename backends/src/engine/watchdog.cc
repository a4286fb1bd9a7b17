// Watchdog: see watchdog.h. A polling thread, started at the first op it is given.
#include "watchdog.h"

#include "engine_work.h"

namespace nccl_migrate::backends {

void Watchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  runTasks();  // queued after the thread left, or with no thread ever started
}

void Watchdog::post(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mutex_);
  tasks_.push_back(std::move(task));
  if (stopping_) return;  // stop() runs it
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  wake_.notify_one();
}

void Watchdog::watchUntilSettled(const c10::intrusive_ptr<EngineWork>& work) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return;  // the process is exiting
  pending_.emplace_back(work);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  // A polling watchdog sees the work at its next poll; waking it for every op would cost a
  // context switch per op. Only an idle one (nothing to watch) is woken.
  if (idle_) wake_.notify_one();
}

void Watchdog::runTasks() {
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

void Watchdog::loop() {
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

}  // namespace nccl_migrate::backends
