// The thread that watches every pending op of the toolkit backends sharing it (one per process
// in production): it settles ops that finished or failed (so their observers hear of it and
// failures reach their group) and fails ops that outlive their timeout, so nothing waits forever
// on a dead peer even when nobody calls wait(). Works stay alive until settled, as in torch.
#pragma once

#include <functional>
#include <memory>
#include <thread>

#include <c10/util/intrusive_ptr.h>

namespace nccl_migrate::backends {

class EngineWork;

class Watchdog {
 public:
  Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() { stop(); }

  void watchUntilSettled(const c10::intrusive_ptr<EngineWork>& work);
  // Runs `task` on the watchdog thread, soon; tasks still queued when the watchdog stops run
  // before it exits. For failure handling (abort hooks, dumps, aborts) that the thread which
  // saw the failure must not wait for.
  void post(std::function<void()> task);
  // Stops the thread; it runs the queued tasks and drops what it holds on its way out.
  // Idempotent. Called on the watchdog's own thread (a task or a settled op let go of the last
  // owner), it lets the thread finish on its own instead of waiting for itself.
  void stop();

  struct State;  // what the thread works on; the thread co-owns it, so it may outlive this object

 private:
  void startThreadLocked();

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace nccl_migrate::backends
