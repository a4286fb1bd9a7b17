// Process exit. Pending works hold tensors whose Python objects may only be released while the
// interpreter is alive, so the Python package calls this from an atexit hook: the watchdog
// thread lets go of everything it holds and stops; ops issued afterwards are not watched.
#pragma once

namespace nccl_migrate::backends {

void stopWatchdogBeforeExit();

}  // namespace nccl_migrate::backends
