// Torch-side subcommands run as `python -m nccl_migrate_launcher ...` in a child process: the
// CLI stays free of torch, and the child gets the job's environment unchanged. The launcher
// checks torch before importing it, so a missing or mismatched torch is one line, not a traceback.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "commands.h"
#include "python_interpreter.h"

namespace nccl_migrate::cli {

std::string versionText() {
  return std::string("nccl-migrate ") + NCCL_MIGRATE_VERSION + "\n";
}

int runInPython(const std::string& command, const std::vector<std::string>& args) {
  PythonChoice python = choosePython();
  std::vector<std::string> argv = {python.interpreter, "-m", "nccl_migrate_launcher", command};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  // An in-tree build puts its package directory on the path, so it works without installing.
  if (std::string packageDir = NCCL_MIGRATE_PYTHON_PACKAGE_DIR; !packageDir.empty()) {
    if (const char* existing = std::getenv("PYTHONPATH"); existing && *existing) packageDir += std::string(":") + existing;
    setenv("PYTHONPATH", packageDir.c_str(), 1);
  }
  execvp(python.interpreter.c_str(), cargv.data());
  std::cerr << "nccl-migrate " << command << ": cannot start Python '" << python.interpreter << "' (" << python.why
            << "): " << std::strerror(errno)
            << "\n  install nccl-migrate into a Python environment (pip install \"nccl-migrate[torch]\"), or set "
               "NCCL_MIGRATE_PYTHON to an interpreter that has it\n";
  return 2;
}

}  // namespace nccl_migrate::cli
