// runTogetherWithin: see bounded_run.h.
#include "bounded_run.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace nccl_migrate::backends {

std::vector<size_t> runTogetherWithin(std::vector<std::function<void()>> tasks, std::chrono::milliseconds bound) {
  // Shared with the threads: a thread still running past the bound outlives this call.
  struct Progress {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<bool> returned;
    size_t left = 0;
  };
  auto progress = std::make_shared<Progress>();
  progress->returned.assign(tasks.size(), false);
  progress->left = tasks.size();
  for (size_t i = 0; i < tasks.size(); ++i) {
    std::thread([task = std::move(tasks[i]), progress, i]() mutable {
      task();
      task = nullptr;  // what it holds goes before it counts as returned
      std::lock_guard<std::mutex> lock(progress->mutex);
      progress->returned[i] = true;
      --progress->left;
      progress->changed.notify_all();
    }).detach();
  }
  std::unique_lock<std::mutex> lock(progress->mutex);
  progress->changed.wait_for(lock, bound, [&] { return progress->left == 0; });
  std::vector<size_t> running;
  for (size_t i = 0; i < progress->returned.size(); ++i) {
    if (!progress->returned[i]) running.push_back(i);
  }
  return running;
}

}  // namespace nccl_migrate::backends
