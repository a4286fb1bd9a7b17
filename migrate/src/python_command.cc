// Torch-side subcommands run as `python -m nccl_migrate ...` in a child process: the CLI stays
// free of torch, and the child gets the job's environment unchanged.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "commands.h"

namespace nccl_migrate::cli {
namespace {

// NCCL_MIGRATE_PYTHON wins; then the interpreter this build was configured with (the
// project's .venv); then python3 on PATH.
std::string pythonInterpreter() {
  if (const char* chosen = std::getenv("NCCL_MIGRATE_PYTHON"); chosen && *chosen) return chosen;
  std::filesystem::path configured = NCCL_MIGRATE_DEFAULT_PYTHON;
  std::error_code ec;
  if (!configured.empty() && std::filesystem::exists(configured, ec)) return configured.string();
  return "python3";
}

}  // namespace

std::string versionText() {
  return std::string("nccl-migrate ") + NCCL_MIGRATE_VERSION + "\n";
}

int runInPython(const std::string& command, const std::vector<std::string>& args) {
  std::string python = pythonInterpreter();
  std::vector<std::string> argv = {python, "-m", "nccl_migrate", command};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  // Put the in-tree package on the path so a build works without installing it.
  std::string pythonPath = NCCL_MIGRATE_PYTHON_PACKAGE_DIR;
  if (const char* existing = std::getenv("PYTHONPATH"); existing && *existing) pythonPath += std::string(":") + existing;
  setenv("PYTHONPATH", pythonPath.c_str(), 1);
  execvp(python.c_str(), cargv.data());
  std::cerr << "nccl-migrate " << command << ": cannot start Python '" << python << "': " << std::strerror(errno)
            << "\n  set NCCL_MIGRATE_PYTHON to an interpreter with torch installed (tools/setup.sh makes .venv)\n";
  return 2;
}

}  // namespace nccl_migrate::cli
