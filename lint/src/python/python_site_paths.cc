// sitePathsFromFiles: see python_site_paths.h. Each step follows what the program it stands for does
// (the shell's PATH search, pyenv's shim and its version files, CPython's getpath and `site`, and
// python_environment.cc's script); wherever the files leave a doubt, it answers nothing and the
// interpreter is asked as before.
#include "python/python_site_paths.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace nccl_migrate::lint {
namespace fs = std::filesystem;
namespace {

// Variables that move sys.path, the user's site folder or pyenv's choice of version: with any of
// them set, the interpreter is asked.
constexpr const char* kMovingVariables[] = {
    "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE", "PYTHONPLATLIBDIR", "PYTHONSAFEPATH",
    "PYTHONEXECUTABLE", "__PYVENV_LAUNCHER__", "PYENV_DIR", "PYENV_HOOK_PATH",
};

constexpr size_t kSmallFile = 64 * 1024;

bool isDirectory(const std::string& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool isFile(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool exists(const std::string& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

std::optional<std::string> readSmall(const std::string& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec) || fs::file_size(p, ec) > kSmallFile || ec) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string dirname(const std::string& p) {
  size_t slash = p.rfind('/');
  if (slash == std::string::npos) return "";
  std::string head = p.substr(0, slash + 1);
  // posixpath.dirname keeps a root of slashes, and drops the trailing ones otherwise.
  if (head.find_first_not_of('/') != std::string::npos) head.erase(head.find_last_not_of('/') + 1);
  return head;
}

// posixpath.normpath of an absolute path: `.` and empty parts dropped, `..` taken back, and a
// leading `//` (two slashes exactly) kept.
std::string normPath(const std::string& path) {
  size_t initialSlashes = path.starts_with("//") && !path.starts_with("///") ? 2 : path.starts_with("/") ? 1 : 0;
  std::vector<std::string> parts;
  for (size_t b = 0; b <= path.size();) {
    size_t e = path.find('/', b);
    if (e == std::string::npos) e = path.size();
    std::string part = path.substr(b, e - b);
    b = e + 1;
    if (part.empty() || part == ".") continue;
    if (part != ".." || (!initialSlashes && parts.empty()) || (!parts.empty() && parts.back() == "..")) parts.push_back(part);
    else if (!parts.empty()) parts.pop_back();
  }
  std::string out(initialSlashes, '/');
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "/" : "") + parts[i];
  return out.empty() ? "." : out;
}

// Where `program` runs from after `cd /`: a path as given (python_environment.cc makes a relative
// one absolute first), else the first executable file of that name in PATH. A PATH with an empty
// or relative entry (the current folder, which `cd /` changes) is left to the shell.
std::optional<std::string> locate(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    if (!program.starts_with("/")) return std::nullopt;
    return program;
  }
  const char* path = std::getenv("PATH");
  if (!path || !*path) return std::nullopt;
  std::string entries = path;
  for (size_t b = 0; b <= entries.size();) {
    size_t e = entries.find(':', b);
    if (e == std::string::npos) e = entries.size();
    std::string dir = entries.substr(b, e - b);
    b = e + 1;
    if (!dir.starts_with("/")) return std::nullopt;
    std::string candidate = (dir.ends_with("/") ? dir : dir + "/") + program;
    if (isFile(candidate) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

// The lines of a pyenv shim for `root` (pyenv 2's `pyenv rehash` writes them): a shim holds these
// and no others.
std::set<std::string> shimLines(const std::string& root) {
  return {"#!/usr/bin/env bash",
          "set -e",
          "[ -n \"$PYENV_DEBUG\" ] && set -x",
          "",
          "program=\"${0##*/}\"",
          "export PYENV_ROOT=\"" + root + "\"",
          "SHIM_PATH=${0%/*}",
          "if [[ $SHIM_PATH != \"" + root + "/shims\" ]]; then",
          "  export _PYENV_SHIM_PATH=\"$SHIM_PATH\"",
          "fi",
          "exec \"" + root + "/libexec/pyenv\" exec \"$program\" \"$@\""};
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// pyenv's root when `file` is one of its shims in <root>/shims; nothing otherwise.
std::optional<std::string> pyenvShimRoot(const std::string& file) {
  std::optional<std::string> text = readSmall(file);
  if (!text || !text->starts_with("#!/usr/bin/env bash\n")) return std::nullopt;
  static const std::regex kRoot("\nexport PYENV_ROOT=\"([^\"$`\\\\]+)\"\n");
  std::smatch m;
  if (!std::regex_search(*text, m, kRoot)) return std::nullopt;
  std::string root = m[1].str();
  if (!root.starts_with("/") || root.ends_with("/") || dirname(file) != root + "/shims") return std::nullopt;
  std::set<std::string> allowed = shimLines(root);
  std::vector<std::string> lines = splitLines(*text);
  if (std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return !allowed.contains(l); })) return std::nullopt;
  if (std::find(lines.begin(), lines.end(), "exec \"" + root + "/libexec/pyenv\" exec \"$program\" \"$@\"") == lines.end())
    return std::nullopt;
  // pyenv reads its hooks and plugins from where it is installed: here, the root itself.
  std::error_code ec;
  if (fs::canonical(root + "/libexec/pyenv", ec) != fs::path(root + "/libexec/pyenv") || ec) return std::nullopt;
  return root;
}

// Hooks that leave a found command as it is: pyenv's own pip-rehash (only for pip, easy_install and
// conda, and `-m pip`), and pyenv-virtualenv's `which` hooks (only for a command the version lacks).
bool knownHook(const std::string& command, const std::string& name) {
  if (command == "exec") return name == "pip-rehash.bash";
  if (command == "which") return name == "conda.bash" || name == "python-config.bash" || name == "system-site-packages.bash";
  return false;
}

// Whether the hooks pyenv would source for the commands a shim runs are all known ones.
bool onlyKnownHooks(const std::string& root) {
  std::vector<std::string> folders = {root + "/pyenv.d", "/usr/etc/pyenv.d", "/usr/local/etc/pyenv.d", "/etc/pyenv.d",
                                      "/usr/lib/pyenv/hooks"};
  std::error_code ec;
  for (const fs::directory_entry& plugin : fs::directory_iterator(root + "/plugins", ec))
    folders.push_back(plugin.path().string() + "/etc/pyenv.d");
  for (const std::string& folder : folders) {
    for (const char* command : {"version-name", "which", "exec"}) {
      std::error_code listed;
      for (const fs::directory_entry& hook : fs::directory_iterator(folder + "/" + command, listed)) {
        std::string name = hook.path().filename().string();
        if (name.ends_with(".bash") && !knownHook(command, name)) return false;
      }
    }
  }
  return true;
}

// The version names a pyenv version file sets, joined by `:` as pyenv-version-file-read joins them:
// each line's first word, blank lines and comments skipped. Nothing for a file pyenv would doubt.
std::optional<std::string> readVersionFile(const std::string& file) {
  std::optional<std::string> text = readSmall(file);
  if (!text || text->size() > 1000) return std::nullopt;
  std::string joined;
  for (std::string line : splitLines(*text)) {
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    std::string word = line.substr(b, line.find_first_of(" \t\r", b) - b);
    if (word.starts_with("#")) continue;
    if (word == ".." || word.find('/') != std::string::npos) return std::nullopt;
    joined += (joined.empty() ? "" : ":") + word;
  }
  return joined;
}

// The program a pyenv shim for `program` runs from / : the version named by PYENV_VERSION, else
// by /.python-version, else by <root>/version, when it is one installed version (not `system`, not a
// prefix pyenv would complete, not several).
std::optional<std::string> pyenvCommand(const std::string& root, const std::string& program) {
  if (!onlyKnownHooks(root)) return std::nullopt;
  std::string version;
  if (const char* v = std::getenv("PYENV_VERSION"); v && *v) {
    version = v;
  } else {
    // pyenv-version-file from / : /.python-version when it is a file (even an empty one), else the
    // global version file; a file with no version in it means `system`.
    std::string file = isFile("/.python-version") ? "/.python-version" : root + "/version";
    if (exists(file)) {
      std::optional<std::string> read = readVersionFile(file);
      if (!read) return std::nullopt;
      version = *read;
    }
  }
  if (version.empty() || version == "system" || version.find(':') != std::string::npos) return std::nullopt;
  std::string prefix = root + "/versions/" + version;
  if (!isDirectory(prefix)) return std::nullopt;
  std::string command = prefix + "/bin/" + program;
  if (!isFile(command) || ::access(command.c_str(), X_OK) != 0) return std::nullopt;
  return command;
}

// `key = value` lines of a pyvenv.cfg, as site.venv reads them (keys lowered, both sides stripped).
std::vector<std::pair<std::string, std::string>> configLines(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  auto strip = [](std::string s) {
    size_t b = s.find_first_not_of(" \t\r\f\v");
    if (b == std::string::npos) return std::string();
    return s.substr(b, s.find_last_not_of(" \t\r\f\v") + 1 - b);
  };
  for (const std::string& line : splitLines(text)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = strip(line.substr(0, eq));
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
    out.emplace_back(key, strip(line.substr(eq + 1)));
  }
  return out;
}

// Whether a .pth file's text is plain enough that its lines are read here as Python reads them:
// printable ASCII, tabs and line ends (Python also splits lines at form feeds and other separators,
// and strips Unicode blanks).
bool plainText(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u >= 0x20 && u < 0x7f) || u == '\t' || u == '\n' || u == '\r';
  });
}

// The script's add(): a site folder, then the folders its .pth files name, in order. False when a
// .pth file is one this cannot read as Python would.
bool addSiteFolder(const std::string& folder, std::vector<std::string>& path) {
  if (!isDirectory(folder) || std::find(path.begin(), path.end(), folder) != path.end()) return true;
  path.push_back(folder);
  std::vector<std::string> pths;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, ec)) {
    std::string name = entry.path().filename().string();
    if (name.ends_with(".pth")) pths.push_back(name);
  }
  std::sort(pths.begin(), pths.end());
  for (const std::string& name : pths) {
    std::string file = folder + "/" + name;
    std::error_code sized;
    if (fs::is_regular_file(file, sized) && fs::file_size(file, sized) > kSmallFile) return false;
    std::optional<std::string> text = readSmall(file);
    if (!text) {
      if (isDirectory(file)) return false;  // Python's open() fails too, but not quietly for every reason
      continue;
    }
    if (!plainText(*text)) return false;
    std::string normalized = *text;
    for (size_t i = 0; i < normalized.size(); ++i)
      if (normalized[i] == '\r') normalized[i] = '\n';  // \r and \r\n end lines; the blank lines between drop
    for (std::string line : splitLines(normalized)) {
      line.erase(line.find_last_not_of(" \t") + 1);
      if (line.empty() || line.starts_with("#") || line.starts_with("import ") || line.starts_with("import\t")) continue;
      std::string target = normPath(line.starts_with("/") ? line : folder + "/" + line);
      if (isDirectory(target) && std::find(path.begin(), path.end(), target) == path.end()) path.push_back(target);
    }
  }
  return true;
}

// The interpreter at `executable` (as sys.executable names it): CPython 3.8 or later installed
// under its own prefix (bin/python3.N beside lib/python3.N), or a virtual environment of one.
std::optional<SitePaths> fromExecutable(const std::string& executable) {
  std::error_code ec;
  std::string real = fs::canonical(executable, ec).string();
  if (ec) return std::nullopt;
  static const std::regex kName("python3\\.([0-9]+)");
  std::smatch m;
  std::string name = fs::path(real).filename().string();
  if (!std::regex_match(name, m, kName) || std::stoi(m[1].str()) < 8) return std::nullopt;
  std::string series = "python3." + m[1].str();
  std::string realBin = dirname(real), base = dirname(realBin);
  std::string stdlib = base + "/lib/" + series;
  // getpath finds the prefix by its landmarks, searching up from the executable's folder; a build
  // folder, a ._pth file, a lib64 platform library folder or a distribution's `site` (Debian's
  // dist-packages) are left to the interpreter.
  // A macOS framework build (<Name>.framework/Versions/3.N) keeps its user site folder elsewhere
  // (~/Library/<Name>/3.N/lib/python/site-packages): left to the interpreter too.
  static const std::regex kFramework(".*/[^/]+\\.framework/Versions/[^/]+");
  if (base.empty() || base == "/" || base == "/usr" || !isFile(stdlib + "/os.py") || !isDirectory(stdlib + "/lib-dynload") ||
      exists(realBin + "/lib/" + series + "/os.py") || exists(realBin + "/pybuilddir.txt") ||
      exists(base + "/lib64/" + series) || std::regex_match(base, kFramework))
    return std::nullopt;
  std::string exeDir = dirname(normPath(executable)), sitePrefix = dirname(exeDir);
  for (const std::string& folder : {exeDir, realBin}) {
    std::error_code listed;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder, listed))
      if (entry.path().filename().string().ends_with("._pth")) return std::nullopt;
    if (listed) return std::nullopt;
  }
  std::optional<std::string> site = readSmall(stdlib + "/site.py");
  if (!site || site->find("dist-packages") != std::string::npos) return std::nullopt;

  // sys.path[1:] with -S: the zip, the standard library and its extension modules.
  std::string version = m[1].str();
  std::vector<std::string> path = {base + "/lib/python3" + version + ".zip", stdlib, stdlib + "/lib-dynload"};
  // site.venv: a pyvenv.cfg beside the executable or one folder up makes it a virtual environment.
  std::vector<std::string> prefixes = {base};
  std::optional<bool> userSite;  // site.ENABLE_USER_SITE: unset until check_enableusersite
  bool virtualEnvironment = false;
  std::string config = isFile(exeDir + "/pyvenv.cfg") ? exeDir + "/pyvenv.cfg" : sitePrefix + "/pyvenv.cfg";
  if (isFile(config)) {
    // getpath reads the other one first: both there would leave a doubt.
    if (isFile(exeDir + "/pyvenv.cfg") && isFile(sitePrefix + "/pyvenv.cfg")) return std::nullopt;
    std::optional<std::string> text = readSmall(config);
    if (!text) return std::nullopt;
    std::string systemSite = "true", home;
    for (const auto& [key, value] : configLines(*text)) {
      if (key == "include-system-site-packages") {
        systemSite = value;
        std::transform(systemSite.begin(), systemSite.end(), systemSite.begin(), [](unsigned char c) { return std::tolower(c); });
      } else if (key == "home") {
        home = value;
      }
    }
    // The base interpreter getpath finds through `home` must be the one the executable links to.
    if (normPath(home) != realBin) return std::nullopt;
    virtualEnvironment = true;
    if (systemSite == "true") {
      prefixes.insert(prefixes.begin(), sitePrefix);
    } else {
      prefixes = {sitePrefix};
      userSite = false;
    }
  }
  // site.venv adds the environment's site folder at once, before the user's, so that the
  // environment takes precedence; the prefixes after it find it already there.
  if (virtualEnvironment && !addSiteFolder(sitePrefix + "/lib/" + series + "/site-packages", path)) return std::nullopt;
  if (!userSite) userSite = ::getuid() == ::geteuid() && ::getgid() == ::getegid();
  if (*userSite) {
    const char* home = std::getenv("HOME");
    if (!home || !*home) return std::nullopt;
    std::string user = home;
    user.erase(user.find_last_not_of('/') + 1);
    if (!addSiteFolder(user + "/.local/lib/" + series + "/site-packages", path)) return std::nullopt;
  }
  std::set<std::string> seen;
  for (const std::string& prefix : prefixes) {
    if (!seen.insert(prefix).second) continue;
    if (!addSiteFolder(prefix + "/lib/" + series + "/site-packages", path)) return std::nullopt;
  }
  return SitePaths{path, {stdlib, stdlib}};
}

}  // namespace

std::optional<SitePaths> sitePathsFromFiles(const std::string& interpreter) {
  for (const char* name : kMovingVariables)
    if (std::getenv(name)) return std::nullopt;
  std::optional<std::string> program = locate(interpreter.empty() ? "python3" : interpreter);
  if (!program) return std::nullopt;
  if (std::optional<std::string> root = pyenvShimRoot(*program)) {
    program = pyenvCommand(*root, fs::path(*program).filename().string());
    if (!program) return std::nullopt;
  }
  return fromExecutable(*program);
}

std::vector<fs::path> keptSearchPath(const std::vector<std::string>& path, const std::vector<std::string>& stdlib) {
  auto isUnder = [](const fs::path& p, const fs::path& folder) {
    auto [a, b] = std::mismatch(folder.begin(), folder.end(), p.begin(), p.end());
    return a == folder.end();
  };
  std::vector<fs::path> folders;
  for (const std::string& s : stdlib)
    if (!s.empty()) folders.push_back(fs::path(s).lexically_normal());
  // A CPython outside a virtual environment keeps its site folder inside the standard library's
  // (lib/python3.N/site-packages): that folder, and what its .pth files name inside it, are the
  // installed modules, not the standard library.
  auto inStandardLibrary = [&](const fs::path& p) {
    return std::any_of(folders.begin(), folders.end(),
                       [&](const fs::path& s) { return isUnder(p, s) && !isUnder(p, s / "site-packages"); });
  };
  std::vector<fs::path> out;
  for (const std::string& entry : path) {
    if (entry.empty()) continue;  // "": the current folder, the tree itself
    fs::path p = fs::path(entry).lexically_normal();
    if (inStandardLibrary(p)) continue;
    std::error_code ec;
    if (!fs::is_directory(p, ec)) continue;  // zip files and missing folders
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace nccl_migrate::lint
