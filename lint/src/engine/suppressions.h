// Inline suppressions, handled once for every language: `# noqa: NM201`, `# noqa-next-line: NM201`,
// file-wide `# nccl-migrate: noqa: NM301`, `// NOLINT(NM201)`, `// NOLINTNEXTLINE(NM201)`.
// Codes may be written as codes or slugs; other tools' codes in the same comment are left alone.
#pragma once

#include <vector>

#include "nccl_migrate/lint/config.h"
#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::lint {

// Drops suppressed findings from `findings` (returns how many) and appends an NM001 finding for
// each code in a suppression that silenced nothing, when `reportUnused`.
int applySuppressions(const SourceModel& model, const LintConfig& config, bool reportUnused,
                      std::vector<Finding>& findings);

}  // namespace nccl_migrate::lint
