// Text and JSON renderings of lint results.
#include "nccl_migrate/lint/report_format.h"

#include <ostream>
#include <unordered_map>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

namespace nccl_migrate::lint {
namespace {

std::string slugOf(const std::string& code) {
  static const std::unordered_map<std::string, std::string> slugs = [] {
    std::unordered_map<std::string, std::string> m;
    for (const Rule* rule : allRules()) m[rule->info().code] = rule->info().slug;
    return m;
  }();
  auto it = slugs.find(code);
  return it == slugs.end() ? "" : it->second;
}

}  // namespace

void writeText(const LintReport& report, std::ostream& findings, std::ostream& summary) {
  for (const Finding& f : report.findings) {
    findings << f.path << ':' << f.where.line << ':' << f.where.column << ": " << f.code << ' ' << f.message << '\n';
  }
  for (const std::string& note : report.notes) summary << "note: " << note << '\n';
  size_t n = report.findings.size();
  summary << (n == 0 ? std::string("No migration hazards found")
                     : "Found " + std::to_string(n) + (n == 1 ? " migration hazard" : " migration hazards"))
          << " in " << report.filesScanned << (report.filesScanned == 1 ? " file" : " files") << ".\n";
}

void writeJson(const LintReport& report, std::ostream& out) {
  std::string buffer;
  llvm::raw_string_ostream stream(buffer);
  llvm::json::OStream json(stream, /*IndentSize=*/2);
  json.object([&] {
    json.attributeArray("findings", [&] {
      for (const Finding& f : report.findings) {
        json.object([&] {
          json.attribute("path", f.path);
          json.attribute("line", f.where.line);
          json.attribute("column", f.where.column);
          json.attribute("code", f.code);
          json.attribute("slug", slugOf(f.code));
          json.attribute("message", f.message);
        });
      }
    });
    json.attributeArray("notes", [&] {
      for (const std::string& note : report.notes) json.value(note);
    });
    json.attribute("files_scanned", report.filesScanned);
    json.attribute("files_parsed", report.filesParsed);
  });
  stream.flush();
  out << buffer << '\n';
}

}  // namespace nccl_migrate::lint
