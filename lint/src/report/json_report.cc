// The JSON format; it is also the baseline file format.
#include <ostream>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include "nccl_migrate/lint/report_format.h"

namespace nccl_migrate::lint {

const char* fixSafetyName(FixSafety safety) {
  switch (safety) {
    case FixSafety::Safe: return "safe";
    case FixSafety::Unsafe: return "unsafe";
    case FixSafety::None: return "none";
  }
  return "none";
}

void writeJson(const LintReport& report, std::ostream& out) {
  std::string buffer;
  llvm::raw_string_ostream stream(buffer);
  llvm::json::OStream json(stream, /*IndentSize=*/2);
  json.object([&] {
    json.attributeArray("findings", [&] {
      for (const Finding& f : report.findings) {
        const Rule* rule = findRule(f.code);
        json.object([&] {
          json.attribute("path", f.path);
          if (f.where.cell) json.attribute("cell", f.where.cell);
          json.attribute("line", f.where.line);
          json.attribute("column", f.where.column);
          json.attribute("code", f.code);
          json.attribute("slug", rule ? rule->info().slug : "");
          json.attribute("message", f.message);
          json.attribute("fingerprint", f.fingerprint);
          if (!f.fix) return json.attribute("fix", nullptr);
          json.attributeObject("fix", [&] {
            json.attribute("title", f.fix->title);
            json.attribute("applicability", fixSafetyName(f.fix->safety));
            json.attributeArray("edits", [&] {
              for (const Edit& e : f.fix->edits) {
                json.object([&] {
                  json.attribute("begin_offset", static_cast<int64_t>(e.range.begin));
                  json.attribute("end_offset", static_cast<int64_t>(e.range.end));
                  json.attribute("replacement", e.replacement);
                });
              }
            });
          });
        });
      }
    });
    json.attributeArray("warnings", [&] {
      for (const std::string& w : report.warnings) json.value(w);
    });
    json.attribute("files_scanned", report.filesScanned);
    json.attribute("files_parsed", report.filesParsed);
  });
  stream.flush();
  out << buffer << '\n';
}

}  // namespace nccl_migrate::lint
