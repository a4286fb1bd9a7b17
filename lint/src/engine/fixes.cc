// Applying rule edits to files and rendering them as unified diffs.
#include "nccl_migrate/lint/fixes.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>

namespace nccl_migrate::lint {
namespace {

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::map<std::string, std::vector<const Finding*>> byFile(const std::vector<const Finding*>& fixes) {
  std::map<std::string, std::vector<const Finding*>> files;
  for (const Finding* f : fixes) files[f->path].push_back(f);
  return files;
}

}  // namespace

std::string applyFixes(const std::string& text, const std::vector<const Finding*>& findings) {
  std::vector<Edit> edits;
  for (const Finding* f : findings) {
    if (f->fix) edits.insert(edits.end(), f->fix->edits.begin(), f->fix->edits.end());
  }
  std::stable_sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.range.begin < b.range.begin; });
  std::string out;
  size_t at = 0;
  for (const Edit& e : edits) {
    if (e.range.begin < at || e.range.end > text.size()) continue;  // overlaps an earlier edit
    out += text.substr(at, e.range.begin - at);
    out += e.replacement;
    at = e.range.end;
  }
  return out + text.substr(at);
}

// Fixes replace text within lines, so both versions have lines that correspond one to one;
// each changed line becomes a hunk with up to 3 lines of context, and close hunks merge.
std::string unifiedDiff(const std::string& path, const std::string& before, const std::string& after) {
  std::vector<std::string> a = splitLines(before), b = splitLines(after);
  if (a.size() != b.size()) {  // a fix that adds lines: show the whole file
    std::ostringstream out;
    out << "--- " << path << "\n+++ " << path << "\n@@ -1," << a.size() << " +1," << b.size() << " @@\n";
    for (const auto& l : a) out << '-' << l << '\n';
    for (const auto& l : b) out << '+' << l << '\n';
    return out.str();
  }
  std::vector<size_t> changed;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) changed.push_back(i);
  if (changed.empty()) return "";
  std::ostringstream out;
  out << "--- " << path << "\n+++ " << path << '\n';
  size_t k = 0;
  while (k < changed.size()) {
    size_t start = changed[k] >= 3 ? changed[k] - 3 : 0;
    size_t last = changed[k];
    while (k + 1 < changed.size() && changed[k + 1] <= last + 7) last = changed[++k];
    size_t end = std::min(a.size(), last + 4);
    out << "@@ -" << start + 1 << ',' << end - start << " +" << start + 1 << ',' << end - start << " @@\n";
    for (size_t i = start; i < end; ++i) {
      if (a[i] == b[i]) out << ' ' << a[i] << '\n';
      else out << '-' << a[i] << "\n+" << b[i] << '\n';
    }
    ++k;
  }
  return out.str();
}

std::vector<const Finding*> applicableFixes(const LintReport& report, FixSafety most) {
  std::vector<const Finding*> out;
  for (const Finding& f : report.findings) {
    if (!f.fix || f.fix->safety == FixSafety::None) continue;
    if (f.fix->safety == FixSafety::Safe || most == FixSafety::Unsafe) out.push_back(&f);
  }
  return out;
}

int fixFiles(const std::vector<const Finding*>& fixes, std::ostream& out) {
  int fixed = 0;
  for (const auto& [path, findings] : byFile(fixes)) {
    std::string before = readFile(path);
    std::string after = applyFixes(before, findings);
    if (after == before) continue;
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    if (!file) {
      out << "warning: " << path << ": cannot write the fixed file; check its permissions\n";
      continue;
    }
    file << after;
    fixed += static_cast<int>(findings.size());
  }
  return fixed;
}

int diffFiles(const std::vector<const Finding*>& fixes, std::ostream& out) {
  int shown = 0;
  for (const auto& [path, findings] : byFile(fixes)) {
    std::string before = readFile(path);
    std::string diff = unifiedDiff(path, before, applyFixes(before, findings));
    if (diff.empty()) continue;
    out << diff;
    shown += static_cast<int>(findings.size());
  }
  return shown;
}

}  // namespace nccl_migrate::lint
