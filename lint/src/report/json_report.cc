// The JSON format; it is also the baseline file format.
#include <ostream>

#include "json_document.h"
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
  Json findings = Json::array();
  for (const Finding& f : report.findings) {
    const Rule* rule = findRule(f.code);
    Json finding = {{"path", f.path}};
    if (f.where.cell) finding["cell"] = f.where.cell;
    finding["line"] = f.where.line;
    finding["column"] = f.where.column;
    finding["code"] = f.code;
    finding["slug"] = rule ? rule->info().slug : "";
    finding["message"] = f.message;
    finding["fingerprint"] = f.fingerprint;
    finding["fix"] = nullptr;
    if (f.fix) {
      Json edits = Json::array();
      for (const Edit& e : f.fix->edits) {
        edits.push_back({{"begin_offset", static_cast<int64_t>(e.range.begin)},
                         {"end_offset", static_cast<int64_t>(e.range.end)},
                         {"replacement", e.replacement}});
      }
      finding["fix"] = {{"title", f.fix->title}, {"applicability", fixSafetyName(f.fix->safety)}, {"edits", std::move(edits)}};
    }
    findings.push_back(std::move(finding));
  }
  Json root = {{"findings", std::move(findings)},
               {"warnings", report.warnings},
               {"files_scanned", report.filesScanned},
               {"files_parsed", report.filesParsed}};
  writeJsonDocument(root, out);
}

void writeJsonDocument(const Json& document, std::ostream& out) {
  // Text that was not UTF-8 was repaired when read; anything else is replaced, never thrown on.
  out << document.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';
}

}  // namespace nccl_migrate::lint
