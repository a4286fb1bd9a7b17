// The one list of rules. Adding a rule: one file in rules/, one accessor in registry.h, one line here.
#include "registry.h"

namespace nccl_migrate::lint {

const std::vector<const Rule*>& allRules() {
  static const std::vector<const Rule*> rules = {
      &legacyClassCheckRule(),
  };
  return rules;
}

}  // namespace nccl_migrate::lint
