// Clang's resource directory: an installed wheel carries its own copy, found relative to the
// binary, so the AST tier works where no Clang is installed; an in-tree build uses the pinned one.
#include "cpp/clang_resource_dir.h"

#include <filesystem>

#include <llvm/Support/FileSystem.h>

namespace nccl_migrate::lint {
namespace {

std::string findResourceDir() {
  namespace fs = std::filesystem;
  // Any symbol of this binary anchors the lookup; /proc/self/exe resolves pipx's and other links.
  static int anchor;
  std::string exe = llvm::sys::fs::getMainExecutable(nullptr, &anchor);
  if (!exe.empty()) {
    std::error_code ec;
    fs::path shipped = (fs::path(exe).parent_path() / NCCL_MIGRATE_CLANG_RESOURCE_FROM_BINARY).lexically_normal();
    if (fs::exists(shipped / "include" / "stddef.h", ec)) return shipped.string();
  }
  return NCCL_MIGRATE_CLANG_RESOURCE_DIR;
}

}  // namespace

const std::string& clangResourceDir() {
  static const std::string dir = findResourceDir();
  return dir;
}

}  // namespace nccl_migrate::lint
