// One process-wide thread that watches every pending op of every toolkit backend: it settles
// ops that finished or failed (so their flight-recorder entries complete and failures reach
// their group) and fails ops that outlive their timeout, so nothing waits forever on a dead
// peer even when nobody calls wait(). Works stay alive until settled, as in torch.
#pragma once

#include <c10/util/intrusive_ptr.h>

namespace nccl_migrate::backends {

class EngineWork;

void watchUntilSettled(const c10::intrusive_ptr<EngineWork>& work);

}  // namespace nccl_migrate::backends
