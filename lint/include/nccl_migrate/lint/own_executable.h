// Where the running nccl-migrate binary lives, so it can find what is installed beside it (the
// C/C++ frontend module, the environment's Python). /proc/self/exe answers where /proc is
// mounted; a bare chroot or a restricted container has no /proc, so argv[0] and PATH follow.
#pragma once

#include <filesystem>
#include <string>

namespace nccl_migrate::lint {

struct OwnExecutable {
  std::filesystem::path path;  // empty when no way found it
  std::string tried;           // each way asked and its answer, one "\n  " line each
};

// main() calls this first, with argv[0] as the shell gave it: a relative path is read against the
// working directory at start, before anything changes it.
void rememberInvocation(const char* argv0);

// /proc/self/exe, else argv[0] when it names a file (it holds a '/'), else argv[0] searched on
// PATH as the shell found it. Symbolic links are resolved, so a link on PATH leads to the real
// install.
OwnExecutable findOwnExecutable();
// The same, reading `selfLink` in place of /proc/self/exe (tests name one that is not there).
OwnExecutable findOwnExecutableVia(const std::filesystem::path& selfLink);

}  // namespace nccl_migrate::lint
