// NCCL_MIGRATE_IMPL and the toolkit's backend names (see implementation.h).
#include "nccl_migrate/shim/implementation.h"

#include <string>

namespace nccl_migrate::shim {

std::string_view implementationName(Implementation implementation) {
  switch (implementation) {
    case Implementation::Torch: return "torch";
    case Implementation::Toolkit: return "toolkit";
  }
  return "unknown";
}

std::string_view choiceName(ImplementationChoice choice) {
  switch (choice) {
    case ImplementationChoice::Auto: return "auto";
    case ImplementationChoice::Torch: return "torch";
    case ImplementationChoice::Toolkit: return "toolkit";
  }
  return "unknown";
}

Outcome<ImplementationChoice> parseImplementationChoice(std::optional<std::string_view> value) {
  // Launchers often export a variable as empty to mean "not set"; treat it that way.
  if (!value || value->empty() || *value == "auto") return Outcome<ImplementationChoice>::success(ImplementationChoice::Auto);
  if (*value == "torch") return Outcome<ImplementationChoice>::success(ImplementationChoice::Torch);
  if (*value == "toolkit") return Outcome<ImplementationChoice>::success(ImplementationChoice::Toolkit);
  std::string var(kImplementationVariable);
  return Outcome<ImplementationChoice>::failure(
      var + "=\"" + std::string(*value) + "\" is not a valid value; valid values are auto, torch, toolkit (auto, "
      "the default, uses torch's implementation where it can run and the toolkit's otherwise). Set " + var +
      " to one of them or unset it.");
}

std::string_view toolkitBackendName(Behaviour behaviour) {
  switch (behaviour) {
    case Behaviour::Legacy: return "migrate-legacy";
    case Behaviour::Rewritten: return "migrate-nccl2";
    case Behaviour::RewrittenLazyP2P: return "migrate-lazy";
  }
  return "unknown";
}

}  // namespace nccl_migrate::shim
