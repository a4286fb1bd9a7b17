// Output formats for a LintReport, handled once here so rules never format anything.
#pragma once

#include <iosfwd>
#include <string>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {

// `path:line:col: CODE message` (`path:cell N:line:col: ...` in a notebook), one finding a line ([*] marks a fix `--fix` applies); with
// `excerpts`, each finding is followed by its source line and a caret. Warnings and a one-line
// summary go to `summary`.
void writeText(const LintReport& report, bool excerpts, std::ostream& findings, std::ostream& summary);

// {"findings": [{"path", "cell" (notebooks), "line", "column", "code", "slug", "message", "fingerprint", "fix"}],
//  "warnings": [...], "files_scanned", "files_parsed"}. A baseline file is this output.
void writeJson(const LintReport& report, std::ostream& out);

// SARIF 2.1.0 for GitHub code scanning: stable ruleIds, the rule catalogue, partialFingerprints.
void writeSarif(const LintReport& report, const std::string& toolVersion, std::ostream& out);
// GitLab Code Quality JSON (artifacts:reports:codequality).
void writeGitlab(const LintReport& report, std::ostream& out);

// The Markdown page of one rule, and the index of all rules, generated from rule metadata.
std::string ruleMarkdown(const Rule& rule);
std::string rulesIndexMarkdown();
// The plain-text explanation `nccl-migrate rules --explain CODE` prints.
std::string ruleExplanation(const Rule& rule);

}  // namespace nccl_migrate::lint
