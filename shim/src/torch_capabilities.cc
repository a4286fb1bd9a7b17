// Presets for the torch releases the resolution table covers (see torch_capabilities.h).
#include "nccl_migrate/shim/torch_capabilities.h"

namespace nccl_migrate::shim {

const std::optional<std::string>& TorchCapabilities::builtInBackend(Behaviour behaviour) const {
  switch (behaviour) {
    case Behaviour::Legacy: return legacy;
    case Behaviour::Rewritten: return rewritten;
    case Behaviour::RewrittenLazyP2P: return rewrittenLazyP2P;
  }
  return legacy;
}

TorchCapabilities torch2_15() { return {"2.15", "nccl-legacy", "nccl2", "nccl-lazy", false}; }

TorchCapabilities torchWithoutLegacy() { return {"next release", std::nullopt, "nccl2", "nccl-lazy", false}; }

TorchCapabilities torchBeforeRewrite() { return {"2.13", "nccl", std::nullopt, std::nullopt, false}; }

}  // namespace nccl_migrate::shim
