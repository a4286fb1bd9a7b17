// The running binary's path: /proc/self/exe, else argv[0] and PATH (see own_executable.h).
#include "nccl_migrate/lint/own_executable.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

namespace nccl_migrate::lint {
namespace {
namespace fs = std::filesystem;

std::string& invocation() {
  static std::string argv0;
  return argv0;
}

fs::path& startDirectory() {
  static fs::path cwd;
  return cwd;
}

bool isExecutableFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path real = fs::canonical(p, ec);
  return ec ? p.lexically_normal() : real;
}

fs::path searchPath(const std::string& name, std::string& tried) {
  const char* path = std::getenv("PATH");
  if (!path || !*path) {
    tried += "\n  PATH: not set";
    return {};
  }
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    fs::path candidate = (dir.empty() ? startDirectory() : fs::path(dir)) / name;
    if (candidate.is_relative()) candidate = startDirectory() / candidate;
    if (isExecutableFile(candidate)) return resolved(candidate);
  }
  tried += "\n  PATH: no executable '" + name + "' in " + path;
  return {};
}

}  // namespace

void rememberInvocation(const char* argv0) {
  invocation() = argv0 ? argv0 : "";
  std::error_code ec;
  startDirectory() = fs::current_path(ec);
}

OwnExecutable findOwnExecutable() { return findOwnExecutableVia("/proc/self/exe"); }

OwnExecutable findOwnExecutableVia(const fs::path& selfLink) {
  OwnExecutable found;
  std::error_code ec;
  fs::path self = fs::read_symlink(selfLink, ec);
  if (!ec) {
    found.path = self;
    return found;
  }
  found.tried += "\n  " + selfLink.string() + ": " + ec.message();
  const std::string& argv0 = invocation();
  if (argv0.empty()) {
    found.tried += "\n  argv[0]: not known to this process";
    return found;
  }
  if (argv0.find('/') != std::string::npos) {
    fs::path named = argv0;
    if (named.is_relative()) named = startDirectory() / named;
    if (isExecutableFile(named)) {
      found.path = resolved(named);
      return found;
    }
    found.tried += "\n  argv[0] '" + argv0 + "': no executable file there";
    return found;
  }
  found.path = searchPath(argv0, found.tried);
  return found;
}

}  // namespace nccl_migrate::lint
