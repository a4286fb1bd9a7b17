// The Python environment lint runs in, as type checkers see it: an interpreter's sys.path (its
// standard library left out), through which imports that leave the linted tree are resolved, so
// that an installed package's wrappers count like the tree's own.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nccl_migrate::lint {

class PythonEnvironment {
 public:
  PythonEnvironment() = default;
  explicit PythonEnvironment(std::vector<std::filesystem::path> searchPath) : searchPath_(std::move(searchPath)) {}

  // Asks `interpreter` (empty: python3 on PATH) once for its sys.path. Without one, or when it
  // fails, the environment is empty and `note` says why, in one line.
  static PythonEnvironment ask(const std::string& interpreter, std::string& note);

  // The source of a dotted module (`pkg/mod.py` or `pkg/mod/__init__.py` in the first folder of
  // the path holding it); nothing when it is not installed or is too large to be a wrapper's.
  std::optional<std::string> moduleSource(const std::string& dotted) const;

  const std::vector<std::filesystem::path>& searchPath() const { return searchPath_; }

 private:
  std::vector<std::filesystem::path> searchPath_;
};

// What the interpreter printed: a JSON list of sys.path, or an object with "path" and "stdlib"
// (folders left out, with what lies under them). Empty when it is neither.
std::vector<std::filesystem::path> searchPathFromJson(const std::string& printed);

}  // namespace nccl_migrate::lint
