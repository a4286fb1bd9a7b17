// Loads the C/C++ frontend module (see cpp_module.h) from where lint/CMakeLists.txt says an
// in-tree build or an installed nccl-migrate keeps it.
#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cpp/cpp_module.h"
#include "nccl_migrate/lint/own_executable.h"

namespace nccl_migrate::lint {
namespace {
namespace fs = std::filesystem;

// `tried` gets how the binary was looked for, when no way found it.
std::vector<fs::path> candidates(std::string& tried) {
  std::vector<fs::path> out;
  OwnExecutable self = findOwnExecutable();
  if (self.path.empty()) {
    tried += "\n  the nccl-migrate binary itself, to look beside it: not found" + self.tried;
  } else {
    out.push_back(self.path.parent_path() / NCCL_MIGRATE_LINT_CPP_MODULE_NAME);
    out.push_back((self.path.parent_path() / NCCL_MIGRATE_LINT_CPP_MODULE_FROM_BINARY / NCCL_MIGRATE_LINT_CPP_MODULE_NAME)
                      .lexically_normal());
  }
  // In-tree builds also know where they wrote the module (a test binary runs from elsewhere).
  fs::path built = NCCL_MIGRATE_LINT_CPP_MODULE_BUILT;
  if (!built.empty() && std::find(out.begin(), out.end(), built) == out.end()) out.push_back(built);
  return out;
}

const CppFrontendModule* load() {
  std::string tried;
  for (const fs::path& path : candidates(tried)) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      tried += "\n  " + path.string() + ": not there";
      continue;
    }
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      tried += "\n  " + path.string() + ": " + ::dlerror();
      continue;
    }
    using Entry = const CppFrontendModule* (*)();
    if (auto entry = reinterpret_cast<Entry>(::dlsym(handle, NCCL_MIGRATE_CPP_MODULE_ENTRY))) return entry();
    tried += "\n  " + path.string() + ": has no " NCCL_MIGRATE_CPP_MODULE_ENTRY;
  }
  throw CppFrontendMissing("the C/C++ frontend module could not be loaded; reinstall or rebuild nccl-migrate (" +
                           std::string(NCCL_MIGRATE_LINT_CPP_MODULE_NAME) + " belongs beside the nccl-migrate binary or in " +
                           "its <prefix>/" NCCL_MIGRATE_LINT_CPP_MODULE_DIR_NAME "). Tried:" + tried);
}

}  // namespace

const CppFrontendModule& cppFrontendModule() {
  static const CppFrontendModule* module = load();  // a failure is thrown again at the next call
  return *module;
}

SourceModel lexCpp(const std::string& path, const std::string& text) {
  return cppFrontendModule().lexCpp(path, text);
}

std::string addCppAstFacts(SourceModel& model, const std::string& text, const CppAstOptions& options) {
  return cppFrontendModule().addCppAstFacts(model, text, options);
}

}  // namespace nccl_migrate::lint
