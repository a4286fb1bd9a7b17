// Asking an interpreter for its sys.path and reading installed modules (python_environment.h).
#include "python/python_environment.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace nccl_migrate::lint {
namespace fs = std::filesystem;
namespace {

// The standard library never creates process groups: it is left out of the path.
// `-c` puts the working directory first on sys.path; it is dropped before any module is imported,
// and the interpreter runs from /, so no file of the linted tree (a json.py) is ever run.
constexpr const char* kAskPath =
    "import sys; sys.path.pop(0); import json, sysconfig; p = sysconfig.get_paths(); "
    "print(json.dumps({'path': sys.path, 'stdlib': [p['stdlib'], p['platstdlib']]}))";

constexpr std::uintmax_t kLargestModule = 2u << 20;
constexpr int kAskSeconds = 10;

std::string shellQuoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool isUnder(const fs::path& path, const fs::path& folder) {
  auto [a, b] = std::mismatch(folder.begin(), folder.end(), path.begin(), path.end());
  return a == folder.end();
}

}  // namespace

std::vector<fs::path> searchPathFromJson(const std::string& printed) {
  nlohmann::json parsed = nlohmann::json::parse(printed, nullptr, false);
  const nlohmann::json* path = parsed.is_array() ? &parsed : parsed.is_object() && parsed.contains("path") ? &parsed["path"] : nullptr;
  if (!path || !path->is_array()) return {};
  std::vector<fs::path> stdlib;
  if (parsed.is_object() && parsed.contains("stdlib") && parsed["stdlib"].is_array())
    for (const nlohmann::json& s : parsed["stdlib"])
      if (s.is_string() && !s.get<std::string>().empty()) stdlib.push_back(fs::path(s.get<std::string>()).lexically_normal());
  std::vector<fs::path> out;
  for (const nlohmann::json& entry : *path) {
    if (!entry.is_string() || entry.get<std::string>().empty()) continue;  // "": the current folder, the tree itself
    fs::path p = fs::path(entry.get<std::string>()).lexically_normal();
    if (std::any_of(stdlib.begin(), stdlib.end(), [&](const fs::path& s) { return isUnder(p, s); })) continue;
    std::error_code ec;
    if (!fs::is_directory(p, ec)) continue;  // zip files and missing folders
    out.push_back(std::move(p));
  }
  return out;
}

PythonEnvironment PythonEnvironment::ask(const std::string& interpreter, std::string& note) {
  std::string program = interpreter.empty() ? "python3" : interpreter;
  // A path named from here keeps naming it after the `cd /` below.
  if (fs::path(program).has_parent_path() && fs::path(program).is_relative()) program = fs::absolute(program).string();
  // Bounded: an interpreter that hangs (a broken .pth) must not hang the lint.
  std::string command = "cd / && timeout " + std::to_string(kAskSeconds) + " " + shellQuoted(program) + " -c " +
                        shellQuoted(kAskPath) + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    note = "no Python environment read (" + program + " could not be started): imports from installed packages are not resolved";
    return {};
  }
  std::string printed;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) printed.append(buffer, n);
  int status = pclose(pipe);
  if (status != 0 || printed.empty()) {
    if (!interpreter.empty())
      note = "no Python environment read (" + program + " did not print its sys.path): imports from installed packages are "
             "not resolved; check --python or `python` in the configuration";
    return {};
  }
  return PythonEnvironment(searchPathFromJson(printed));
}

std::optional<std::string> PythonEnvironment::moduleSource(const std::string& dotted) const {
  fs::path relative;
  for (size_t b = 0; b <= dotted.size();) {
    size_t e = dotted.find('.', b);
    if (e == std::string::npos) e = dotted.size();
    if (e == b) return std::nullopt;
    relative /= dotted.substr(b, e - b);
    b = e + 1;
  }
  for (const fs::path& folder : searchPath_) {
    for (const fs::path& candidate : {folder / relative.string().append(".py"), folder / relative / "__init__.py"}) {
      std::error_code ec;
      std::uintmax_t size = fs::file_size(candidate, ec);
      if (ec) continue;
      if (size > kLargestModule) return std::nullopt;
      std::ifstream in(candidate, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      return text.str();
    }
  }
  return std::nullopt;
}

}  // namespace nccl_migrate::lint
