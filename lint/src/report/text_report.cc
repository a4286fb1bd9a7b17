// The text forms, after ruff's output formats of the same names: full (the whole message, the
// source line with a caret and the fix on offer) and concise (one short line a finding), and the
// summaries that count the fixes each flag applies.
#include <fstream>
#include <ostream>
#include <unordered_map>

#include "nccl_migrate/lint/report_format.h"

namespace nccl_migrate::lint {
namespace {

// Source lines for excerpts, read once per file.
class LineCache {
 public:
  std::string line(const std::string& path, int number) {
    auto [it, inserted] = files_.try_emplace(path);
    if (inserted) {
      std::ifstream in(path);
      std::string l;
      while (std::getline(in, l)) it->second.push_back(l);
    }
    if (number < 1 || number > static_cast<int>(it->second.size())) return "";
    return it->second[number - 1];
  }

 private:
  std::unordered_map<std::string, std::vector<std::string>> files_;
};

bool safelyFixable(const Finding& f) { return f.fix && f.fix->safety == FixSafety::Safe; }

// `path:line:col: CODE ` (`path:cell N:line:col: ...` in a notebook, as ruff writes it), with
// `[*] ` after the code where `--fix` applies the finding's fix.
void writeLocationAndCode(const Finding& f, std::ostream& out) {
  out << f.path << ':';
  if (f.where.cell) out << "cell " << f.where.cell << ':';
  out << f.where.line << ':' << f.where.column << ": " << f.code << (safelyFixable(f) ? " [*] " : " ");
}

// The caret under byte column `column` of `source`: a tab stays a tab and a multi-byte UTF-8
// character takes one column, so the caret lands under the character on a terminal.
std::string caretLine(const std::string& source, int column) {
  std::string out;
  for (size_t i = 0; i < source.size() && static_cast<int>(i) < column - 1; ++i) {
    unsigned char c = static_cast<unsigned char>(source[i]);
    if ((c & 0xC0) == 0x80) continue;  // a UTF-8 continuation byte
    out += c == '\t' ? '\t' : ' ';
  }
  return out + '^';
}

std::string fixLine(const Fix& fix) {
  return "fix: " + fix.title +
         (fix.safety == FixSafety::Safe ? " (safe: --fix applies it)" : " (unsafe: --fix --unsafe-fixes applies it)");
}

// Calls `at(i)` for each byte of `text` outside brackets and quotes, until it returns false.
template <typename Visit>
void forEachTopLevel(const std::string& text, Visit at) {
  int depth = 0;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"' || c == '`') quoted = !quoted;
    else if (quoted) continue;
    else if (c == '(' || c == '[' || c == '{') ++depth;
    else if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    else if (depth == 0 && !at(i)) return;
  }
}

// Whether `text` has a separator ("; ", ", ") at `i`.
bool separatorAt(const std::string& text, size_t i, const std::string& marks) {
  return marks.find(text[i]) != std::string::npos && i + 1 < text.size() && text[i + 1] == ' ';
}

// Rules write "<what was found and what it does>: <why>; <what to do>", so the first "; ", ": "
// or ". " outside brackets and quotes ends the part a concise line keeps. A break after a single
// word is a key or a setting's name (`ALLOC: "backend:..."`, `PYTORCH_CUDA_ALLOC_CONF=backend:
// ...`), not the end of a clause.
std::string leadClause(const std::string& message) {
  size_t end = message.size();
  bool words = false;
  forEachTopLevel(message, [&](size_t i) {
    words = words || message[i] == ' ';
    if (words && separatorAt(message, i, ";:.")) end = i;
    return end == message.size();
  });
  return message.substr(0, end);
}

// The clause's longest head that ends before a ", " and fits `limit`, or "" where none does
// ("x wraps a model moved with Net().cuda() (line 7), and nothing on this path ...").
std::string headBeforeComma(const std::string& clause, size_t limit) {
  size_t end = 0;
  bool words = false;
  forEachTopLevel(clause, [&](size_t i) {
    if (i > limit) return false;
    words = words || clause[i] == ' ';
    if (words && separatorAt(clause, i, ",")) end = i;
    return true;
  });
  return clause.substr(0, end);
}

// What the finding is about: the message's first word outside brackets and quotes (the call,
// class, cast or setting that was found), without a trailing colon.
std::string subjectOf(const std::string& message) {
  size_t end = message.size();
  forEachTopLevel(message, [&](size_t i) {
    if (message[i] == ' ') end = i;
    return end == message.size();
  });
  std::string subject = message.substr(0, end);
  while (!subject.empty() && subject.back() == ':') subject.pop_back();
  return subject;
}

// The last resort for the limit: cut at a space, marked as cut.
std::string shortened(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t cut = text.rfind(' ', limit - 3);
  return text.substr(0, cut == std::string::npos || cut == 0 ? limit - 3 : cut) + "...";
}

struct FixCounts {
  size_t safe = 0, unsafe = 0;
};

FixCounts fixCounts(const LintReport& report) {
  FixCounts counts;
  for (const Finding& f : report.findings) {
    if (!f.fix) continue;
    (f.fix->safety == FixSafety::Safe ? counts.safe : counts.unsafe) += 1;
  }
  return counts;
}

std::string plural(size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Which flags fix how many findings, as ruff counts them: the safe ones with `--fix` (the `[*]`
// lines), the others only with `--unsafe-fixes` as well. Empty where no finding has a fix.
std::string fixAvailability(FixCounts counts) {
  if (counts.safe && counts.unsafe) {
    return "[*] " + std::to_string(counts.safe) + " fixable with --fix; " + std::to_string(counts.unsafe) +
           " more with --fix --unsafe-fixes.";
  }
  if (counts.safe) return "[*] " + std::to_string(counts.safe) + " fixable with --fix.";
  if (counts.unsafe) return std::to_string(counts.unsafe) + " fixable with --fix --unsafe-fixes.";
  return "";
}

void writeSummary(const LintReport& report, std::ostream& summary) {
  for (const std::string& warning : report.warnings) summary << "warning: " << warning << '\n';
  size_t n = report.findings.size();
  summary << (n == 0 ? std::string("No migration hazards found") : "Found " + plural(n, "migration hazard", "migration hazards"))
          << " in " << plural(static_cast<size_t>(report.filesScanned), "file", "files") << ".";
  std::string fixes = fixAvailability(fixCounts(report));
  if (!fixes.empty()) summary << ' ' << fixes;
  summary << '\n';
}

}  // namespace

std::string conciseMessage(const Finding& finding) {
  if (finding.message.size() <= kConciseMessageLimit) return finding.message;
  std::string lead = leadClause(finding.message);
  if (lead.size() <= kConciseMessageLimit) return lead;
  std::string head = headBeforeComma(lead, kConciseMessageLimit);
  if (!head.empty()) return head;
  // A first clause long in itself (a long expression quoted): its subject and the rule's summary.
  const Rule* rule = findRule(finding.code);
  std::string summary = rule ? rule->info().summary : "";
  std::string subject = subjectOf(finding.message);
  if (!summary.empty() && !subject.empty() && subject.size() + 2 + summary.size() <= kConciseMessageLimit) {
    return subject + ": " + summary;
  }
  return shortened(summary.empty() ? lead : summary, kConciseMessageLimit);
}

void writeText(const LintReport& report, bool excerpts, std::ostream& findings, std::ostream& summary) {
  LineCache lines;
  for (const Finding& f : report.findings) {
    writeLocationAndCode(f, findings);
    findings << f.message << '\n';
    std::string gutter = "  ";
    // A notebook's file lines are JSON, not the cell's: it gets no excerpt.
    std::string source = excerpts && !f.where.cell ? lines.line(f.path, f.where.line) : "";
    if (!source.empty()) {
      std::string number = std::to_string(f.where.line);
      gutter = "  " + std::string(number.size(), ' ') + " ";
      findings << "  " << number << " | " << source << '\n' << gutter << "| " << caretLine(source, f.where.column) << '\n';
    }
    if (f.fix) findings << gutter << "= " << fixLine(*f.fix) << '\n';
    findings << '\n';
  }
  writeSummary(report, summary);
}

void writeConcise(const LintReport& report, std::ostream& findings, std::ostream& summary) {
  for (const Finding& f : report.findings) {
    writeLocationAndCode(f, findings);
    findings << conciseMessage(f) << '\n';
  }
  writeSummary(report, summary);
}

void writeDiffSummary(const LintReport& report, int shown, FixSafety most, std::ostream& out) {
  FixCounts counts = fixCounts(report);
  const std::string seeUnsafe = " (--diff --unsafe-fixes shows them).";
  if (most != FixSafety::Unsafe) {
    if (shown == 0 && counts.unsafe == 0) out << "No fixes available.\n";
    else if (shown == 0) out << "No fixes --fix applies; " << counts.unsafe << " with --fix --unsafe-fixes" << seeUnsafe << '\n';
    else {
      out << shown << " fix(es) shown; run with --fix to apply them.";
      if (counts.unsafe) out << ' ' << counts.unsafe << " more with --fix --unsafe-fixes" << seeUnsafe;
      out << '\n';
    }
    return;
  }
  if (shown == 0) out << "No fixes available.\n";
  else if (counts.unsafe == 0) out << shown << " fix(es) shown; run with --fix to apply them (all are safe).\n";
  else if (counts.safe == 0) out << shown << " fix(es) shown; run with --fix --unsafe-fixes to apply them.\n";
  else {
    out << shown << " fix(es) shown; run with --fix --unsafe-fixes to apply them (--fix alone applies the "
        << plural(counts.safe, "safe one", "safe ones") << ").\n";
  }
}

}  // namespace nccl_migrate::lint
