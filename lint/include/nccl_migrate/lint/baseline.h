// Baselines: a saved JSON report whose findings are known and accepted; later runs report only
// findings not in it. Matching is by fingerprint (rule, path and the normalised source line), so
// findings survive edits that only move lines.
#pragma once

#include <filesystem>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {

// Removes from `report` every finding the baseline file lists; returns how many were removed.
// Throws ConfigError when the file cannot be read or is not a `--format json` report.
int applyBaseline(LintReport& report, const std::filesystem::path& baselineFile);

}  // namespace nccl_migrate::lint
