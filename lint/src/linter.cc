// File discovery, the cheap text prefilter, frontend dispatch and rule evaluation.
#include "nccl_migrate/lint/linter.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "frontends/frontends.h"

namespace nccl_migrate::lint {
namespace fs = std::filesystem;
namespace {

bool isSkippedDirectory(const fs::path& dir) {
  std::string name = dir.filename().string();
  if (name.size() > 1 && name[0] == '.') return true;  // .git, .venv, .tox ...
  return name == "__pycache__" || name == "node_modules" || name == "build" || name == "site-packages";
}

// A file is parsed only if it contains a trigger word of some rule for its language.
bool passesPrefilter(const std::string& text, Language language) {
  for (const Rule* rule : allRules()) {
    const RuleInfo& info = rule->info();
    if (!info.enabledByDefault) continue;
    if (std::find(info.languages.begin(), info.languages.end(), language) == info.languages.end()) continue;
    for (const std::string& word : info.triggers) {
      if (text.find(word) != std::string::npos) return true;
    }
  }
  return false;
}

void lintOne(const fs::path& path, const std::string& text, Language language, LintReport& report) {
  ++report.filesScanned;
  if (!passesPrefilter(text, language)) return;
  ++report.filesParsed;
  SourceModel model = language == Language::Python ? parsePython(path.string(), text) : lexCpp(path.string(), text);
  for (const Rule* rule : allRules()) {
    const RuleInfo& info = rule->info();
    if (!info.enabledByDefault) continue;
    if (std::find(info.languages.begin(), info.languages.end(), language) == info.languages.end()) continue;
    rule->check(model, report.findings);
  }
}

void lintFile(const fs::path& path, LintReport& report) {
  std::optional<Language> language = languageOf(path);
  if (!language) return;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    report.notes.push_back(path.string() + ": cannot be read; check its permissions");
    return;
  }
  std::stringstream text;
  text << in.rdbuf();
  lintOne(path, text.str(), *language, report);
}

void sortFindings(LintReport& report) {
  std::sort(report.findings.begin(), report.findings.end(), [](const Finding& a, const Finding& b) {
    return std::tie(a.path, a.where.line, a.where.column, a.code) <
           std::tie(b.path, b.where.line, b.where.column, b.code);
  });
}

}  // namespace

std::optional<Language> languageOf(const fs::path& path) {
  static const std::vector<std::string> kPython = {".py", ".pyi"};
  static const std::vector<std::string> kCpp = {".h", ".hh", ".hpp", ".hxx", ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh"};
  std::string ext = path.extension().string();
  if (std::find(kPython.begin(), kPython.end(), ext) != kPython.end()) return Language::Python;
  if (std::find(kCpp.begin(), kCpp.end(), ext) != kCpp.end()) return Language::Cpp;
  return std::nullopt;
}

LintReport lintPaths(const std::vector<fs::path>& paths) {
  LintReport report;
  for (const fs::path& root : paths) {
    std::error_code ec;
    if (!fs::exists(root, ec)) {
      throw std::invalid_argument(root.string() + ": no such file or directory");
    }
    if (!fs::is_directory(root, ec)) {
      lintFile(root, report);
      continue;
    }
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it->is_directory(ec) && isSkippedDirectory(it->path())) {
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec)) files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) lintFile(file, report);
  }
  sortFindings(report);
  return report;
}

LintReport lintSource(const fs::path& path, const std::string& text) {
  LintReport report;
  std::optional<Language> language = languageOf(path);
  if (!language) throw std::invalid_argument(path.string() + ": not a Python or C/C++/CUDA file name");
  lintOne(path, text, *language, report);
  sortFindings(report);
  return report;
}

}  // namespace nccl_migrate::lint
