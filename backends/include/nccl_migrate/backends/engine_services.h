// What the toolkit backends of a process share: the flight recorder, the watchdog thread, the
// observers of issued ops and the registry of backends and communicators. Production has one set per process (process()); a test makes its
// own (fresh()) and hands it to the backends it builds, so no state leaks between tests.
#pragma once

#include <memory>
#include <vector>

#include "nccl_migrate/backends/backend_registry.h"
#include "nccl_migrate/backends/flight_recorder.h"
#include "nccl_migrate/backends/op_observer.h"

namespace nccl_migrate::backends {

class Watchdog;  // engine/watchdog.h

struct EngineServices {
  std::shared_ptr<FlightRecorder> flightRecorder;
  // Every op goes to each, in order; the flight recorder is the first.
  std::vector<std::shared_ptr<OpObserver>> observers;
  std::shared_ptr<BackendRegistry> registry;
  // Last, so it is destroyed (and its thread stopped) before what the ops it settles report to.
  std::shared_ptr<Watchdog> watchdog;

  // The process's services: a flight recorder sized by TORCH_FR_BUFFER_SIZE.
  static const std::shared_ptr<EngineServices>& process();
  // A new set with its own recorder (of `flightRecorderCapacity` entries), watchdog and `extra`
  // observers after the recorder.
  static std::shared_ptr<EngineServices> fresh(size_t flightRecorderCapacity,
                                               std::vector<std::shared_ptr<OpObserver>> extra = {});
};

}  // namespace nccl_migrate::backends
