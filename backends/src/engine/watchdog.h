// The thread that watches every pending op of the toolkit backends sharing it (one per process
// in production): it settles ops that finished or failed (so their observers hear of it and
// failures reach their group) and fails ops that outlive their timeout, so nothing waits forever
// on a dead peer even when nobody calls wait(). Works stay alive until settled, as in torch.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include <c10/util/intrusive_ptr.h>

namespace nccl_migrate::backends {

class EngineWork;

class Watchdog {
 public:
  Watchdog() = default;
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() { stop(); }

  void watchUntilSettled(const c10::intrusive_ptr<EngineWork>& work);
  // Runs `task` on the watchdog thread, soon; tasks still queued when the watchdog stops run
  // before it exits. For failure handling (abort hooks, dumps, aborts) that the thread which
  // saw the failure must not wait for.
  void post(std::function<void()> task);
  // Stops the thread; it runs the queued tasks and drops what it holds on its way out.
  // Idempotent.
  void stop();

 private:
  void runTasks();
  void loop();

  static constexpr std::chrono::milliseconds kPollInterval{20};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool idle_ = false;  // waiting for work, not polling
  std::list<c10::intrusive_ptr<EngineWork>> pending_;
  std::deque<std::function<void()>> tasks_;
  std::thread thread_;
};

}  // namespace nccl_migrate::backends
