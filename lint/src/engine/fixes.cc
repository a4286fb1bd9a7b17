// Applying rule edits to files and rendering them as unified diffs.
#include "nccl_migrate/lint/fixes.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <cstdint>
#include <iostream>
#include <optional>
#include <ostream>
#include <sstream>

#include "engine/fix_check.h"
#include "engine/fix_layout.h"

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

namespace {

bool sameEdit(const Edit& a, const Edit& b) {
  return a.range.begin == b.range.begin && a.range.end == b.range.end && a.replacement == b.replacement;
}

// Two edits touch the same text, or insert at the same point (whose order would be a guess).
bool overlap(const Edit& a, const Edit& b) {
  if (a.range.begin == b.range.begin) return true;
  return a.range.begin < b.range.end && b.range.begin < a.range.end;
}

// The edits of the fixes that can all be applied: a fix's edits go in together or not at all
// (half a fix can break the code: the lambda without the removed comparison), in file order;
// an edit identical to one already taken (the same fix reported for two classes of one
// isinstance tuple) is applied once. The edits taken never overlap, so each new edit is checked
// against its two neighbours in begin order alone: linear-logarithmic in the number of edits.
struct CompatibleEdits {
  std::vector<Edit> edits;  // in file order
  int fixes = 0;            // how many fixes they make up
};

CompatibleEdits compatibleEdits(const std::string& text, const std::vector<const Finding*>& findings) {
  std::vector<const Fix*> fixes;
  for (const Finding* f : findings)
    if (f->fix && !f->fix->edits.empty()) fixes.push_back(&*f->fix);
  auto firstEdit = [](const Fix* f) {
    size_t first = f->edits.front().range.begin;
    for (const Edit& e : f->edits) first = std::min(first, e.range.begin);
    return first;
  };
  std::stable_sort(fixes.begin(), fixes.end(), [&](const Fix* a, const Fix* b) { return firstEdit(a) < firstEdit(b); });
  std::map<size_t, Edit> taken;  // by begin
  // Whether `e` is already taken (true), fits among the taken edits (false), or clashes (nullopt).
  auto against = [&](const Edit& e) -> std::optional<bool> {
    auto next = taken.lower_bound(e.range.begin);
    if (next != taken.end() && next->first == e.range.begin) {
      if (sameEdit(e, next->second)) return true;
      return std::nullopt;
    }
    if (next != taken.end() && next->second.range.begin < e.range.end) return std::nullopt;
    if (next != taken.begin() && e.range.begin < std::prev(next)->second.range.end) return std::nullopt;
    return false;
  };
  CompatibleEdits out;
  for (const Fix* fix : fixes) {
    std::vector<Edit> fresh;
    bool fits = true;
    for (const Edit& e : fix->edits) {
      bool definition = e.range.begin == kDefinitionSite;  // placed by layOutEdits
      if (!definition && (e.range.end < e.range.begin || e.range.end > text.size())) fits = false;
      std::optional<bool> known = against(e);
      if (!known) fits = false;
      for (const Edit& f : fresh)
        if (overlap(e, f)) fits = false;
      if (known && !*known) fresh.push_back(e);
    }
    if (!fits) continue;
    for (const Edit& e : fresh) taken.emplace(e.range.begin, e);
    ++out.fixes;
  }
  for (const auto& [begin, edit] : taken) out.edits.push_back(edit);
  return out;
}

}  // namespace

// One pass over the file: every edit is an offset into the original text, the definitions the
// fixes call placed and the lines they write laid out by the file's language first.
std::string applyFixes(const std::string& text, const std::vector<const Finding*>& findings) {
  std::string out;
  size_t at = 0;
  if (findings.empty()) return text;
  for (const Edit& e : layOutEdits(findings.front()->path, text, compatibleEdits(text, findings).edits)) {
    out += text.substr(at, e.range.begin - at);
    out += e.replacement;
    at = e.range.end;
  }
  return out + text.substr(at);
}

namespace {

// Which lines of a and b correspond: the common start and end, and between them a longest common
// subsequence where it is small enough to compute (fixes remove or change a few lines); a
// larger middle is shown as replaced. pairs[i] is the line of b matching line i of a, or npos.
std::vector<size_t> matchLines(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  constexpr size_t kNone = std::string::npos;
  std::vector<size_t> pairs(a.size(), kNone);
  size_t head = 0;
  while (head < a.size() && head < b.size() && a[head] == b[head]) pairs[head] = head, ++head;
  size_t tailA = a.size(), tailB = b.size();
  while (tailA > head && tailB > head && a[tailA - 1] == b[tailB - 1]) pairs[--tailA] = --tailB;
  size_t n = tailA - head, m = tailB - head;
  if (n == 0 || m == 0 || n * m > 4'000'000) return pairs;
  std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i][j] = a[head + i] == b[head + j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  for (size_t i = 0, j = 0; i < n && j < m;) {
    if (a[head + i] == b[head + j]) pairs[head + i] = head + j, ++i, ++j;
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) ++i;
    else ++j;
  }
  return pairs;
}

struct DiffLine {
  char mark;  // ' ', '-', '+'
  const std::string* text;
  size_t oldLine, newLine;  // 0-based positions before and after this line
};

std::vector<DiffLine> diffLines(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<size_t> pairs = matchLines(a, b);
  std::vector<DiffLine> out;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (i < a.size() && pairs[i] == std::string::npos) {
      out.push_back({'-', &a[i], i, j}), ++i;
    } else if (j < b.size() && (i == a.size() || pairs[i] > j)) {
      out.push_back({'+', &b[j], i, j}), ++j;
    } else {
      out.push_back({' ', &a[i], i, j}), ++i, ++j;
    }
  }
  return out;
}

}  // namespace

// Hunks of changed lines with up to 3 lines of context; close hunks merge.
std::string unifiedDiff(const std::string& path, const std::string& before, const std::string& after) {
  std::vector<std::string> a = splitLines(before), b = splitLines(after);
  std::vector<DiffLine> lines = diffLines(a, b);
  std::vector<size_t> changed;
  for (size_t k = 0; k < lines.size(); ++k)
    if (lines[k].mark != ' ') changed.push_back(k);
  if (changed.empty()) return "";
  std::ostringstream out;
  out << "--- " << path << "\n+++ " << path << '\n';
  size_t c = 0;
  while (c < changed.size()) {
    size_t start = changed[c] >= 3 ? changed[c] - 3 : 0;
    size_t last = changed[c];
    while (c + 1 < changed.size() && changed[c + 1] <= last + 7) last = changed[++c];
    size_t end = std::min(lines.size(), last + 4);
    size_t oldCount = 0, newCount = 0;
    for (size_t k = start; k < end; ++k) {
      oldCount += lines[k].mark != '+';
      newCount += lines[k].mark != '-';
    }
    out << "@@ -" << lines[start].oldLine + (oldCount ? 1 : 0) << ',' << oldCount << " +"
        << lines[start].newLine + (newCount ? 1 : 0) << ',' << newCount << " @@\n";
    for (size_t k = start; k < end; ++k) out << lines[k].mark << *lines[k].text << '\n';
    ++c;
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
    if (std::optional<std::string> broken = fixBreaksSyntax(path, before, after)) {
      out << "warning: " << path << ": fixes not applied: " << *broken << "; please report this with the file\n";
      continue;
    }
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    if (!file) {
      out << "warning: " << path << ": cannot write the fixed file; check its permissions\n";
      continue;
    }
    file << after;
    fixed += compatibleEdits(before, findings).fixes;  // a fix held back for overlapping another is not counted
  }
  return fixed;
}

int diffFiles(const std::vector<const Finding*>& fixes, std::ostream& out, const LintOptions* relint, FixSafety most) {
  int shown = 0;
  for (const auto& [path, findings] : byFile(fixes)) {
    std::string before = readFile(path);
    std::string after = applyFixes(before, findings);
    int count = compatibleEdits(before, findings).fixes;
    // The rounds --fix runs, on the text in memory: a fix held back for overlapping another is
    // shown too, so the diff is what --fix writes.
    for (int round = 1; relint && round < kMaxFixRounds; ++round) {
      LintReport again = lintSource(path, after, *relint);
      std::vector<const Finding*> next = applicableFixes(again, most);
      std::string further = applyFixes(after, next);
      if (further == after) break;
      count += compatibleEdits(after, next).fixes;
      after = std::move(further);
    }
    if (std::optional<std::string> broken = fixBreaksSyntax(path, before, after)) {
      std::cerr << "warning: " << path << ": fixes not shown: " << *broken << "; please report this with the file\n";
      continue;
    }
    std::string diff = unifiedDiff(path, before, after);
    if (diff.empty()) continue;
    out << diff;
    shown += count;
  }
  return shown;
}

}  // namespace nccl_migrate::lint
