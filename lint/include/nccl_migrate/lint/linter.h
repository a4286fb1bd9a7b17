// The linter's entry point: files in, findings out, independent of any output format.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nccl_migrate/lint/config.h"
#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::lint {

struct LintReport {
  std::vector<Finding> findings;      // sorted by path, line, column, code
  // Files skipped (unreadable, binary, too large, crashed or timed out in a frontend) or repaired
  // (invalid UTF-8), each naming the file and why.
  std::vector<std::string> warnings;
  int filesScanned = 0;               // files of a known language
  int filesParsed = 0;                // files that passed the prefilter and reached a frontend
  int suppressed = 0;                 // findings silenced by noqa/NOLINT comments
};

// C/C++/CUDA parsing with Clang's AST (tier 2) instead of only the raw lexer.
struct CppAstOptions {
  std::filesystem::path compileCommandsDir;  // `-p DIR`: a directory with compile_commands.json
  std::vector<std::string> extraFlags;       // flags after `--` (a fixed compilation database)
  bool enabled() const { return !compileCommandsDir.empty() || !extraFlags.empty(); }
};

struct LintOptions {
  LintConfig config;
  CppAstOptions cppAst;
  unsigned jobs = 0;  // worker processes; 0 = every core
  // A file that takes longer is abandoned with a warning naming it (the others are still linted).
  std::chrono::milliseconds fileTimeout{std::chrono::seconds(60)};
  // Called after each file with (done, total); for a progress line.
  std::function<void(size_t, size_t)> progress;
  // Called in the worker process before each file is linted (and read, unless the run read it
  // already for its project tables, as it does Python files); tests use it to make one file fail.
  std::function<void(const std::filesystem::path&)> onFileStart;
};

// Language of a file by its name, or nullopt when the linter does not handle it.
std::optional<Language> languageOf(const std::filesystem::path& path);

// Lints files and directories (recursively; hidden and build directories, .gitignore'd and
// excluded paths are skipped), each file in a worker process so that one file's crash or timeout
// costs only that file's findings. Call it while the process runs no other threads. Throws std::invalid_argument naming the path when one does not exist,
// and std::runtime_error naming where it looked when the run has C/C++ files and the C/C++
// frontend module cannot be loaded.
LintReport lintPaths(const std::vector<std::filesystem::path>& paths, const LintOptions& options = {});

// Lints one in-memory source; the path only names it and picks the language.
LintReport lintSource(const std::filesystem::path& path, const std::string& text, const LintOptions& options = {});

}  // namespace nccl_migrate::lint
