// Process exit. Pending works hold tensors whose Python objects may only be released while the
// interpreter is alive, so the Python package calls this from an atexit hook: callbacks that
// other threads run for ops finish (ExitGate; afterwards they release nothing), and the watchdog
// thread lets go of everything it holds and stops; ops issued afterwards are not watched.
#pragma once

#include <chrono>

namespace nccl_migrate::backends {

// How long the exit waits for callbacks already running on other threads (an op's future and
// its Python callbacks); one that takes longer is stuck in a library call.
inline constexpr std::chrono::milliseconds kExitSectionsBound{2000};

void prepareForExit();

}  // namespace nccl_migrate::backends
