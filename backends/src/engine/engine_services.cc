// EngineServices: see engine_services.h.
#include "nccl_migrate/backends/engine_services.h"

#include "nccl_migrate/backends/shutdown.h"
#include "common/exit_gate.h"
#include "engine_work.h"  // the watchdog holds works
#include "watchdog.h"

namespace nccl_migrate::backends {

std::shared_ptr<EngineServices> EngineServices::fresh(size_t flightRecorderCapacity,
                                                      std::vector<std::shared_ptr<OpObserver>> extra) {
  auto services = std::make_shared<EngineServices>();
  services->flightRecorder = std::make_shared<FlightRecorder>(flightRecorderCapacity);
  services->observers.push_back(services->flightRecorder);
  for (auto& observer : extra) services->observers.push_back(std::move(observer));
  services->registry = std::make_shared<BackendRegistry>();
  services->watchdog = std::make_shared<Watchdog>();
  return services;
}

const std::shared_ptr<EngineServices>& EngineServices::process() {
  static const std::shared_ptr<EngineServices> services = fresh(FlightRecorder::capacityFromEnvironment());
  return services;
}

void prepareForExit() {
  // First the gate, so that the works the watchdog lets go of below keep what Gloo's worker
  // may still hold; then the watchdog, whose queued hooks and dumps run while Python is alive.
  ExitGate::close(kExitSectionsBound);
  EngineServices::process()->watchdog->stop();
}

}  // namespace nccl_migrate::backends
