// Directory walking with .gitignore semantics (the subset real repositories use: globs, `**`,
// anchored and directory-only patterns, negation).
#include "file_discovery.h"

#include <fnmatch.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <stdexcept>

namespace nccl_migrate::lint {
namespace fs = std::filesystem;
namespace {

bool glob(const std::string& pattern, const std::string& text) {
  int flags = pattern.find("**") == std::string::npos ? FNM_PATHNAME : 0;
  return fnmatch(pattern.c_str(), text.c_str(), flags) == 0;
}

struct IgnorePattern {
  std::string glob;
  bool negate = false;
  bool directoryOnly = false;
  bool anchored = false;  // contains a slash: matched against the path from the .gitignore's folder
};

struct IgnoreFile {
  fs::path base;
  std::vector<IgnorePattern> patterns;
};

std::optional<IgnoreFile> readIgnoreFile(const fs::path& dir) {
  std::ifstream in(dir / ".gitignore");
  if (!in) return std::nullopt;
  std::error_code ec;
  IgnoreFile file{fs::absolute(dir, ec).lexically_normal(), {}};
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    IgnorePattern p;
    if (line[0] == '!') {
      p.negate = true;
      line = line.substr(1);
    }
    if (!line.empty() && line.back() == '/') {
      p.directoryOnly = true;
      line.pop_back();
    }
    p.anchored = line.find('/') != std::string::npos;
    if (!line.empty() && line[0] == '/') line = line.substr(1);
    if (line.starts_with("**/")) {  // "**/x" matches x at any depth, like an unanchored pattern
      line = line.substr(3);
      p.anchored = line.find('/') != std::string::npos;
    }
    p.glob = line;
    file.patterns.push_back(std::move(p));
  }
  return file;
}

// `absolute` relative to `base`, both absolute and normal. A .gitignore's folder is above every
// path walked under it, so this is mostly cutting a prefix: path arithmetic for every file and
// every .gitignore above it was a good part of the walk.
std::string relativeTo(const std::string& absolute, const fs::path& base) {
  const std::string& prefix = base.native();
  bool under = absolute.size() > prefix.size() && absolute.starts_with(prefix) &&
               (prefix.ends_with('/') || absolute[prefix.size()] == '/');
  if (!under) return fs::path(absolute).lexically_relative(base).generic_string();
  return absolute.substr(prefix.size() + (prefix.ends_with('/') ? 0 : 1));
}

// Last matching pattern wins, across files from the root down. `absolute`: the path, absolute and
// normal; `name`: its last component.
bool ignoredByGit(const std::vector<IgnoreFile>& files, const std::string& absolute, const std::string& name, bool isDirectory) {
  bool ignored = false;
  for (const IgnoreFile& file : files) {
    std::optional<std::string> rel;  // only anchored patterns need it
    for (const IgnorePattern& p : file.patterns) {
      if (p.directoryOnly && !isDirectory) continue;
      if (p.anchored && !rel) rel = relativeTo(absolute, file.base);
      if (glob(p.glob, p.anchored ? *rel : name)) ignored = !p.negate;
    }
  }
  return ignored;
}

bool isSkippedDirectory(const fs::path& dir) {
  std::string name = dir.filename().string();
  if (name.size() > 1 && name[0] == '.') return true;  // .git, .venv, .tox ...
  return name == "__pycache__" || name == "node_modules" || name == "build" || name.starts_with("build-") ||
         name == "site-packages";
}

bool excluded(const LintConfig& config, const fs::path& path) {
  return std::any_of(config.exclude.begin(), config.exclude.end(),
                     [&](const std::string& pattern) { return globMatchesPath(pattern, path); });
}

std::string firstLineOf(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

void walk(const fs::path& dir, const LintConfig& config, std::vector<IgnoreFile>& ignores, std::vector<fs::path>& out) {
  bool pushed = false;
  if (config.respectGitignore) {
    if (auto file = readIgnoreFile(dir)) {
      ignores.push_back(std::move(*file));
      pushed = true;
    }
  }
  std::error_code ec;
  std::vector<fs::directory_entry> entries;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
       it.increment(ec)) {
    entries.push_back(*it);
  }
  std::sort(entries.begin(), entries.end());
  // Made absolute once for the folder: an entry's absolute path is then this and its name.
  std::string absoluteDir = config.respectGitignore ? fs::absolute(dir, ec).lexically_normal().native() : "";
  if (!absoluteDir.ends_with('/')) absoluteDir += '/';
  for (const fs::directory_entry& entry : entries) {
    const fs::path& path = entry.path();
    bool isDirectory = entry.is_directory(ec) && !entry.is_symlink(ec);
    if (excluded(config, path)) continue;
    if (config.respectGitignore) {
      std::string name = path.filename().native();
      if (ignoredByGit(ignores, absoluteDir + name, name, isDirectory)) continue;
    }
    if (isDirectory) {
      if (!isSkippedDirectory(path)) walk(path, config, ignores, out);
      continue;
    }
    if (!entry.is_regular_file(ec)) continue;
    bool needsShebang = !path.has_extension() && !path.filename().string().starts_with(".");
    if (languageByName(path, needsShebang ? firstLineOf(path) : "")) out.push_back(path);
  }
  if (pushed) ignores.pop_back();
}

// Whether lexically_normal would leave `path` as it is: no empty, "." or ".." component (a
// trailing '/' it keeps).
bool isLexicallyNormal(std::string_view path) {
  if (path.empty()) return true;
  for (size_t begin = path.starts_with('/') ? 1 : 0; begin < path.size();) {
    size_t end = std::min(path.find('/', begin), path.size());
    std::string_view component = path.substr(begin, end - begin);
    if (component.empty() || component == "." || component == "..") return false;
    begin = end + 1;
  }
  return true;
}

}  // namespace

bool globMatchesPath(const std::string& pattern, const fs::path& path) {
  std::string p = pattern;
  if (!p.empty() && p.back() == '/') p.pop_back();
  if (p.starts_with("./")) p = p.substr(2);
  // Walked paths are mostly normal already, and lexically_normal costs as much as the match.
  std::string text = isLexicallyNormal(path.native()) ? path.generic_string() : path.lexically_normal().generic_string();
  if (text.starts_with("./")) text = text.substr(2);
  // Try the whole path, then each suffix that starts after a '/'.
  for (size_t at = 0;;) {
    if (glob(p, text.substr(at))) return true;
    size_t slash = text.find('/', at);
    if (slash == std::string::npos) return false;
    at = slash + 1;
  }
}

std::optional<Language> languageByName(const fs::path& path, const std::string& firstLine) {
  static const std::vector<std::string> kPython = {".py", ".pyi", ".ipynb"};
  static const std::vector<std::string> kCpp = {".h", ".hh", ".hpp", ".hxx", ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh"};
  static const std::vector<std::string> kShell = {".sh", ".bash", ".zsh", ".ksh", ".sbatch", ".slurm"};
  static const std::vector<std::string> kConfig = {".yaml", ".yml", ".toml", ".json", ".env"};
  std::string ext = path.extension().string();
  std::string name = path.filename().string();
  auto in = [&](const std::vector<std::string>& list) { return std::find(list.begin(), list.end(), ext) != list.end(); };
  if (in(kPython)) return Language::Python;
  if (in(kCpp)) return Language::Cpp;
  if (in(kShell)) return Language::Shell;
  if (name == "Dockerfile" || name == "Containerfile" || name.starts_with("Dockerfile.") || ext == ".dockerfile") {
    return Language::Dockerfile;
  }
  if (name == ".env" || name.starts_with(".env.") || in(kConfig)) return Language::Config;
  if (firstLine.starts_with("#!") &&
      (firstLine.find("sh") != std::string::npos) && firstLine.find("python") == std::string::npos) {
    return Language::Shell;
  }
  return std::nullopt;
}

std::vector<fs::path> discoverFiles(const std::vector<fs::path>& roots, const LintConfig& config) {
  std::vector<fs::path> files;
  for (const fs::path& root : roots) {
    std::error_code ec;
    if (!fs::exists(root, ec)) throw std::invalid_argument(root.string() + ": no such file or directory");
    if (!fs::is_directory(root, ec)) {
      files.push_back(root);
      continue;
    }
    std::vector<IgnoreFile> ignores;
    // .gitignore files above the root still apply to it, as git applies them.
    if (config.respectGitignore) {
      fs::path absolute = fs::absolute(root, ec).lexically_normal();
      std::vector<fs::path> parents;
      for (fs::path dir = absolute.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
        parents.push_back(dir);
        if (fs::exists(dir / ".git", ec)) break;
      }
      for (auto it = parents.rbegin(); it != parents.rend(); ++it) {
        if (auto file = readIgnoreFile(*it)) ignores.push_back(std::move(*file));
      }
    }
    walk(root, config, ignores, files);
  }
  return files;
}

}  // namespace nccl_migrate::lint
