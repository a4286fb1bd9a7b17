// Applying fixes and showing them as a diff; one engine for every rule's edits.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <limits>
#include <string>
#include <vector>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {

// A fix that calls a definition of its own (a helper function) carries it as one more edit, made
// by definitionEdit: the engine puts it once per file where the file's language keeps such
// definitions (after a Python module's imports, after a C/C++ file's includes), recognises it
// where the file already has it, and where the file uses its name for something else gives it
// another one, in the fix's calls too. Its name is the first identifier written with `(` right
// after it, outside `//` comment lines (`def _is_nccl_backend(`, `asNcclBackend(`).
inline constexpr size_t kDefinitionSite = std::numeric_limits<size_t>::max();
inline Edit definitionEdit(std::string definition) {
  return Edit{{kDefinitionSite, kDefinitionSite}, std::move(definition)};
}

// The text with the given findings' fixes applied (overlapping edits: the first one wins), the
// definitions they call put in place and the lines they write laid out as the file's language
// lays them out (engine/fix_layout.h).
std::string applyFixes(const std::string& text, const std::vector<const Finding*>& findings);

// A unified diff between two versions of a file.
std::string unifiedDiff(const std::string& path, const std::string& before, const std::string& after);

// Findings whose fix may be applied: safe ones, and unsafe ones too when `most` is Unsafe.
std::vector<const Finding*> applicableFixes(const LintReport& report, FixSafety most);

// How many times --fix lints and fixes again, from the fixed text, while anything changes (as
// ruff does): a fix held back for overlapping another is applied in a later round.
constexpr int kMaxFixRounds = 10;

// fixFiles rewrites each file with its fixes (problems go to `out`); diffFiles writes the same
// changes as a unified diff to `out` and touches nothing, and with `relint` (the run's options)
// shows the later rounds' fixes too, those of at most `most` safety. Both return how many
// findings they cover.
int fixFiles(const std::vector<const Finding*>& fixes, std::ostream& out);
int diffFiles(const std::vector<const Finding*>& fixes, std::ostream& out, const LintOptions* relint = nullptr,
              FixSafety most = FixSafety::Safe);

}  // namespace nccl_migrate::lint
