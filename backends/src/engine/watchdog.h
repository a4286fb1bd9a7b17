// One process-wide thread that watches every pending op of every toolkit backend: it settles
// ops that finished or failed (so their flight-recorder entries complete and failures reach
// their group) and fails ops that outlive their timeout, so nothing waits forever on a dead
// peer even when nobody calls wait(). Works stay alive until settled, as in torch.
#pragma once

#include <functional>

#include <c10/util/intrusive_ptr.h>

namespace nccl_migrate::backends {

class EngineWork;

void watchUntilSettled(const c10::intrusive_ptr<EngineWork>& work);

// Runs `task` on the watchdog thread, soon; tasks still queued when the watchdog stops run
// before it exits. For failure handling (abort hooks, dumps, aborts) that the thread which
// saw the failure must not wait for.
void runOnWatchdog(std::function<void()> task);

}  // namespace nccl_migrate::backends
