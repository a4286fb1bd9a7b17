// The linter's entry point: files in, findings out, independent of any output format.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::lint {

struct LintReport {
  std::vector<Finding> findings;   // sorted by path, line, column, code
  std::vector<std::string> notes;  // files that could not be read or parsed at all
  int filesScanned = 0;            // files of a known language that passed the prefilter or not
  int filesParsed = 0;             // files that passed the prefilter and reached a frontend
};

// Language of a file by its name, or nullopt when the linter does not handle it.
std::optional<Language> languageOf(const std::filesystem::path& path);

// Lints files and directories (recursively; hidden and build directories are skipped).
// Throws std::invalid_argument naming the path when one does not exist.
LintReport lintPaths(const std::vector<std::filesystem::path>& paths);

// Lints one in-memory source; the path only names it and picks the language.
LintReport lintSource(const std::filesystem::path& path, const std::string& text);

}  // namespace nccl_migrate::lint
