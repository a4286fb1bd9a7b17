// Output formats for a LintReport, handled once here so rules never format anything.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {

// The text forms, after ruff's output formats of the same names. Both write one summary line to
// `summary` (after a line for each warning) that counts the fixes `--fix` applies (the findings
// marked [*]) and those that need `--fix --unsafe-fixes` too.
//
// full (writeText): `path:line:col: CODE [*] message` (`path:cell N:line:col: ...` in a notebook)
// with the whole message, then, with `excerpts`, the source line and a caret under the column,
// then the fix on offer (its title and the flags that apply it), and a blank line.
void writeText(const LintReport& report, bool excerpts, std::ostream& findings, std::ostream& summary);
// concise: `path:line:col: CODE [*] message` with conciseMessage, one line a finding.
void writeConcise(const LintReport& report, std::ostream& findings, std::ostream& summary);

// The longest message a concise line holds: with the location and the code, a finding of a file
// named in 20 characters fits a 140-column terminal.
inline constexpr size_t kConciseMessageLimit = 100;
// A finding's message in at most kConciseMessageLimit characters: the whole message where it fits,
// else its first clause (what was found and what it does, without why or what to do), else the
// subject the message starts with and the rule's one-line summary.
std::string conciseMessage(const Finding& finding);

// The line `--diff` ends with: how many fixes it showed and the flags that apply them, and how
// many more `--unsafe-fixes` would add when `most` leaves them out.
void writeDiffSummary(const LintReport& report, int shown, FixSafety most, std::ostream& out);

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
