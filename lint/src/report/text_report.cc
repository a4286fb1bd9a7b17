// The text format: ruff's concise `path:line:col: CODE message` (`path:cell N:line:col: ...` in a
// notebook), with an excerpt on terminals.
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

}  // namespace

void writeText(const LintReport& report, bool excerpts, std::ostream& findings, std::ostream& summary) {
  LineCache lines;
  for (const Finding& f : report.findings) {
    bool fixable = f.fix && f.fix->safety == FixSafety::Safe;
    findings << f.path << ':';
    if (f.where.cell) findings << "cell " << f.where.cell << ':';  // ruff's notebook form
    findings << f.where.line << ':' << f.where.column << ": " << f.code << (fixable ? " [*] " : " ") << f.message << '\n';
    if (!excerpts || f.where.cell) continue;  // a notebook's file lines are JSON, not the cell's
    std::string source = lines.line(f.path, f.where.line);
    if (source.empty()) continue;
    std::string number = std::to_string(f.where.line);
    findings << "  " << number << " | " << source << '\n'
             << "  " << std::string(number.size(), ' ') << " | " << std::string(std::max(0, f.where.column - 1), ' ')
             << "^\n";
  }
  for (const std::string& warning : report.warnings) summary << "warning: " << warning << '\n';
  size_t n = report.findings.size();
  summary << (n == 0 ? std::string("No migration hazards found")
                     : "Found " + std::to_string(n) + (n == 1 ? " migration hazard" : " migration hazards"))
          << " in " << report.filesScanned << (report.filesScanned == 1 ? " file" : " files") << ".";
  size_t fixable = 0;
  for (const Finding& f : report.findings) fixable += f.fix && f.fix->safety == FixSafety::Safe;
  if (fixable) summary << " [*] " << fixable << " fixable with --fix.";
  summary << '\n';
}

}  // namespace nccl_migrate::lint
