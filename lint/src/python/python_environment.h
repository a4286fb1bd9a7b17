// The Python environment lint runs in, as type checkers see it: an interpreter's sys.path (its
// standard library left out), through which imports that leave the linted tree are resolved, so
// that an installed package's wrappers count like the tree's own.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nccl_migrate::lint {

class PythonEnvironment {
 public:
  PythonEnvironment() = default;
  explicit PythonEnvironment(std::vector<std::filesystem::path> searchPath) : searchPath_(std::move(searchPath)) {}

  // Asks `interpreter` (empty: python3 on PATH) once for its sys.path. Without one, or when it
  // fails, the environment is empty and `note` says why, in one line. The interpreter starts
  // without `site` (-S) and works out the site folders and their .pth files' folders itself, in
  // the order `site` adds them: the answer costs a tenth of a full start where a .pth imports
  // something. It is the interpreter's sys.path but for what code would add: no `.pth` import line,
  // sitecustomize or usercustomize runs, so a folder only they put on the path is not searched.
  // Where files alone decide that sys.path (python_site_paths.h), it is read from them instead, and
  // the interpreter does not start.
  static PythonEnvironment ask(const std::string& interpreter, std::string& note);
  // The same, always from the interpreter.
  static PythonEnvironment askInterpreter(const std::string& interpreter, std::string& note);

  // The source of a dotted module (`pkg/mod.py` or `pkg/mod/__init__.py` in the first folder of
  // the path holding it); nothing when it is not installed or is too large to be a wrapper's.
  std::optional<std::string> moduleSource(const std::string& dotted) const;

  const std::vector<std::filesystem::path>& searchPath() const { return searchPath_; }

 private:
  std::vector<std::filesystem::path> searchPath_;
};

// A PythonEnvironment asked for on first use: a run whose tree needs no installed module never
// starts the interpreter (group_wrappers.h decides which modules a tree needs). Not thread-safe:
// the wrapper table reads installed modules from one thread.
class PythonEnvironmentOnDemand {
 public:
  explicit PythonEnvironmentOnDemand(std::string interpreter) : interpreter_(std::move(interpreter)) {}

  // As PythonEnvironment::moduleSource; the first call asks the interpreter.
  std::optional<std::string> moduleSource(const std::string& dotted);

  bool asked() const { return environment_.has_value(); }
  // Why no environment was read, once asked (PythonEnvironment::ask); empty otherwise.
  const std::string& note() const { return note_; }

 private:
  std::string interpreter_;
  std::optional<PythonEnvironment> environment_;
  std::string note_;
};

// What `interpreter` (empty: python3 on PATH) prints for its sys.path when PythonEnvironment asks it,
// with its exit status; nothing when it could not be started.
std::optional<std::string> printedSysPath(const std::string& interpreter, int& status);

// What the interpreter printed: a JSON list of sys.path, or an object with "path" and "stdlib"
// (folders left out, with what lies under them). Empty when it is neither.
std::vector<std::filesystem::path> searchPathFromJson(const std::string& printed);

// Whether `topLevel` (the first component of a dotted module) names a module of Python's standard
// library, which never creates process groups: its imports are not resolved.
bool isStandardLibraryModule(std::string_view topLevel);

}  // namespace nccl_migrate::lint
