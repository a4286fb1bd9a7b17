// An interpreter's sys.path worked out from files, without starting it: what PythonEnvironment::ask
// would print, for the layouts where files alone decide it (a virtual environment, a CPython
// installed under its own prefix, a pyenv shim), so that lint need not start an interpreter (0.03 s
// of CPU, 0.1 s through a pyenv shim's bash scripts). Anything it cannot decide exactly (environment
// variables that move the path, a distribution's patched `site`, a macOS framework build's user
// site folder, pyenv hooks it does not know) it leaves to the interpreter. Like the script, it runs
// no code: a folder that only a `.pth` import line, sitecustomize or usercustomize would add is not
// on the path it gives.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace nccl_migrate::lint {

// What the interpreter the run names would print for its path (python_environment.cc's script,
// run from /): the folders in sys.path order, and the standard library's folders. Nothing when the
// files cannot decide it; the interpreter must then be asked.
struct SitePaths {
  std::vector<std::string> path;
  std::vector<std::string> stdlib;
};
std::optional<SitePaths> sitePathsFromFiles(const std::string& interpreter);

// The environment's search path from what the interpreter printed (or sitePathsFromFiles gave):
// each folder normalized, the current folder, the standard library (but for the site-packages folder
// inside it, where a CPython outside a virtual environment installs) and what is no folder left out.
std::vector<std::filesystem::path> keptSearchPath(const std::vector<std::string>& path, const std::vector<std::string>& stdlib);

}  // namespace nccl_migrate::lint
