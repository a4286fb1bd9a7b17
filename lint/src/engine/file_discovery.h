// Which files a run lints: walking directories, .gitignore files, `exclude` globs, languages.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "nccl_migrate/lint/config.h"
#include "nccl_migrate/lint/source_model.h"

namespace nccl_migrate::lint {

// Whether a glob (`exclude`, `per-file-ignores`) matches a path: against the whole path and each
// trailing part of it, so "tests/*" and "*.cu" work from any root; "**" crosses directories.
bool globMatchesPath(const std::string& pattern, const std::filesystem::path& path);

// Files under `roots` in a stable order. Files named directly are always included; inside
// directories, hidden and build directories, .gitignore'd and excluded paths are skipped, and only
// files of a language the linter reads are kept. Throws std::invalid_argument for a missing root.
std::vector<std::filesystem::path> discoverFiles(const std::vector<std::filesystem::path>& roots, const LintConfig& config);

// Language by file name: extension, Dockerfile names, .env files, shell shebangs for files
// without an extension (read from `firstLine`, may be empty).
std::optional<Language> languageByName(const std::filesystem::path& path, const std::string& firstLine = "");

}  // namespace nccl_migrate::lint
