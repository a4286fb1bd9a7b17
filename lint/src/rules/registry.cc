// The one list of rules. Adding a rule: one file in rules/, one accessor in registry.h, one line
// here; docs/rules/ is regenerated from the metadata (`nccl-migrate rules --write-docs docs/rules`).
#include "registry.h"

namespace nccl_migrate::lint {

const std::vector<const Rule*>& allRules() {
  static const std::vector<const Rule*> rules = {
      &unusedSuppressionRule(),     &multiGpuProcessGroupRule(), &initWithoutDeviceIdRule(),
      &legacyClassCheckRule(),      &backendNameComparisonRule(), &legacyOnlyAttributeRule(),
      &legacyClassConstructionRule(),
      &cudaMallocAsyncRule(),       &eagerGroupCreationRule(),   &pinnedLegacyBackendRule(),
      &p2pOnEagerBackendRule(),
  };
  return rules;
}

const Rule* findRule(const std::string& codeOrSlug) {
  for (const Rule* rule : allRules()) {
    if (rule->info().code == codeOrSlug || rule->info().slug == codeOrSlug) return rule;
  }
  return nullptr;
}

}  // namespace nccl_migrate::lint
