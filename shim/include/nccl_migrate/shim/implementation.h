// Who implements an NCCL behaviour: torch's built-in backend or the toolkit's, and how the user
// chooses between them with NCCL_MIGRATE_IMPL.
#pragma once

#include <optional>
#include <string_view>

#include "nccl_migrate/shim/backend_name.h"
#include "nccl_migrate/shim/outcome.h"

namespace nccl_migrate::shim {

enum class Implementation { Torch, Toolkit };

// What the user asked for. Auto is the default: torch's implementation where it exists and can
// run here, the toolkit's otherwise.
enum class ImplementationChoice { Auto, Torch, Toolkit };

inline constexpr std::string_view kImplementationVariable = "NCCL_MIGRATE_IMPL";

std::string_view implementationName(Implementation implementation);     // "torch", "toolkit"
std::string_view choiceName(ImplementationChoice choice);               // "auto", "torch", "toolkit"

// Reads NCCL_MIGRATE_IMPL's value (nullopt when unset). Unset and empty mean auto; any other
// value than auto, torch or toolkit (exact, lowercase) is an error that lists the valid ones.
Outcome<ImplementationChoice> parseImplementationChoice(std::optional<std::string_view> value);

// The names the toolkit registers its backends under: migrate-legacy, migrate-nccl2,
// migrate-lazy. They run CUDA tensors over NCCL and CPU tensors over Gloo.
std::string_view toolkitBackendName(Behaviour behaviour);

}  // namespace nccl_migrate::shim
