// The interpreter of the environment nccl-migrate was installed into, so `pip install` of the
// torch extra into that environment is all the torch-side commands need.
#include "python_interpreter.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "nccl_migrate/lint/own_executable.h"

namespace nccl_migrate::cli {
namespace {

namespace fs = std::filesystem;

bool isExecutable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
}

// The real file's folder, even when the command on PATH is a link to it.
fs::path binaryDirectory() {
  return lint::findOwnExecutable().path.parent_path();
}

}  // namespace

PythonChoice choosePython() {
  if (const char* chosen = std::getenv("NCCL_MIGRATE_PYTHON"); chosen && *chosen) {
    return {chosen, "NCCL_MIGRATE_PYTHON"};
  }
  if (fs::path dir = binaryDirectory(); !dir.empty()) {
    for (const char* name : {"python3", "python"}) {
      if (isExecutable(dir / name)) return {(dir / name).string(), "the Python beside nccl-migrate"};
    }
  }
  fs::path configured = NCCL_MIGRATE_DEFAULT_PYTHON;
  if (!configured.empty() && isExecutable(configured)) return {configured.string(), "the build's configured Python"};
  return {"python3", "python3 on PATH"};
}

}  // namespace nccl_migrate::cli
