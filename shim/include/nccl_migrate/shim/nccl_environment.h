// torch's NCCL environment variables that change how a group's ops behave, parsed once for the
// toolkit's backends (C++ createBackend and the Python package alike).
#pragma once

#include "nccl_migrate/shim/job_settings.h"
#include "nccl_migrate/shim/outcome.h"

namespace nccl_migrate::shim {

struct NcclEnvironment {
  // TORCH_NCCL_BLOCKING_WAIT (NCCL_BLOCKING_WAIT): wait() blocks the host until the op ends.
  bool blockingWait = false;
  // TORCH_NCCL_USE_COMM_NONBLOCKING: communicators are made in NCCL's nonblocking mode.
  bool commNonblocking = false;
  // TORCH_NCCL_ASYNC_ERROR_HANDLING: 0 leaves a failed group as it is; any other mode aborts
  // its communicators so pending ops fail instead of hanging. torch's modes 1 and 3 also end
  // the process; the toolkit never does: the job sees DistBackendError and decides.
  int asyncErrorHandling = 3;
};

// A value torch would not take (a boolean other than 0/1/true/false, a mode outside 0-3) is a
// failure naming the variable and what to set.
Outcome<NcclEnvironment> ncclEnvironment(const JobSettings& settings);

}  // namespace nccl_migrate::shim
