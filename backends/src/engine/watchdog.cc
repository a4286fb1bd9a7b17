// Watchdog: see watchdog.h. A polling thread, started at the first op or task it is given.
#include "watchdog.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>

#include "engine_work.h"

namespace nccl_migrate::backends {

struct Watchdog::State {
  static constexpr std::chrono::milliseconds kPollInterval{20};
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  bool idle = false;  // waiting for work, not polling
  std::list<c10::intrusive_ptr<EngineWork>> pending;
  std::deque<std::function<void()>> tasks;

  void runTasks() {
    for (;;) {
      std::function<void()> task;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (tasks.empty()) return;
        task = std::move(tasks.front());
        tasks.pop_front();
      }
      task();
    }
  }

  // Drops what the watchdog holds and runs what is still queued: its way out.
  void finish(std::unique_lock<std::mutex>& lock) {
    std::list<c10::intrusive_ptr<EngineWork>> dropped;
    dropped.swap(pending);
    lock.unlock();
    dropped.clear();
    runTasks();
  }

  static void loop(const std::shared_ptr<State>& self) {
    State& s = *self;
    for (;;) {
      s.runTasks();
      std::list<c10::intrusive_ptr<EngineWork>> batch;
      {
        std::unique_lock<std::mutex> lock(s.mutex);
        s.idle = true;
        s.wake.wait(lock, [&] { return s.stopping || !s.pending.empty() || !s.tasks.empty(); });
        s.idle = false;
        if (s.stopping) return s.finish(lock);
        batch.splice(batch.end(), s.pending);
      }
      auto now = std::chrono::steady_clock::now();
      for (auto it = batch.begin(); it != batch.end();) {
        if ((*it)->watch(now)) it = batch.erase(it);
        else ++it;
      }
      std::unique_lock<std::mutex> lock(s.mutex);
      s.pending.splice(s.pending.begin(), batch);
      if (s.wake.wait_for(lock, kPollInterval, [&] { return s.stopping || !s.tasks.empty(); }) && s.stopping) {
        return s.finish(lock);
      }
    }
  }
};

Watchdog::Watchdog() : state_(std::make_shared<State>()) {}

void Watchdog::startThreadLocked() {
  if (!thread_.joinable()) thread_ = std::thread([state = state_] { State::loop(state); });
}

void Watchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // it sees `stopping` when this call returns into its loop
      return;
    }
    thread_.join();
  }
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->finish(lock);  // queued after the thread left, or with no thread ever started
}

void Watchdog::post(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->tasks.push_back(std::move(task));
  if (state_->stopping) return;  // stop() runs it
  startThreadLocked();
  state_->wake.notify_one();
}

void Watchdog::watchUntilSettled(const c10::intrusive_ptr<EngineWork>& work) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->stopping) return;  // the process is exiting
  state_->pending.emplace_back(work);
  startThreadLocked();
  // A polling watchdog sees the work at its next poll; waking it for every op would cost a
  // context switch per op. Only an idle one (nothing to watch) is woken.
  if (state_->idle) state_->wake.notify_one();
}

}  // namespace nccl_migrate::backends
