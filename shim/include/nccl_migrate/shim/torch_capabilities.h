// What the installed torch can do for NCCL: which behaviours it has built in, under which
// registered name, and whether this machine has a GPU to run them. The Python side fills this in
// from the live torch; the presets describe the torch releases the resolution table covers.
#pragma once

#include <optional>
#include <string>

#include "nccl_migrate/shim/backend_name.h"

namespace nccl_migrate::shim {

struct TorchCapabilities {
  std::string version;  // shown to users in reasons and errors, e.g. "2.15"
  // The name torch registers each behaviour under, or nullopt when this torch lacks it.
  std::optional<std::string> legacy;            // "nccl-legacy" (2.14+), "nccl" before 2.14
  std::optional<std::string> rewritten;         // "nccl2"
  std::optional<std::string> rewrittenLazyP2P;  // "nccl-lazy"
  bool gpuPresent = false;

  const std::optional<std::string>& builtInBackend(Behaviour behaviour) const;
};

// torch 2.15: legacy as "nccl-legacy", rewritten as "nccl2", lazy p2p as "nccl-lazy".
TorchCapabilities torch2_15();
// A release after legacy is removed: rewritten and lazy p2p only.
TorchCapabilities torchWithoutLegacy();
// torch 2.13 and older: only the legacy ProcessGroupNCCL, registered as "nccl".
TorchCapabilities torchBeforeRewrite();

}  // namespace nccl_migrate::shim
