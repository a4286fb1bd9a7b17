// GitLab Code Quality (the report a merge request widget reads): a JSON array of issues, each
// with a description, check name, fingerprint, severity and a path relative to the project.
#include <filesystem>
#include <ostream>

#include "json_document.h"
#include "nccl_migrate/lint/report_format.h"

namespace nccl_migrate::lint {
namespace {

// GitLab resolves paths against the project root, where its CI job runs.
std::string projectPath(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path relative = fs::absolute(path, ec).lexically_normal().lexically_relative(fs::current_path(ec));
  if (relative.empty() || *relative.begin() == "..") return fs::path(path).lexically_normal().generic_string();
  return relative.generic_string();
}

}  // namespace

void writeGitlab(const LintReport& report, std::ostream& out) {
  Json issues = Json::array();
  for (const Finding& f : report.findings) {
    issues.push_back({{"description", f.code + " " + f.message},
                      {"check_name", f.code},
                      {"fingerprint", f.fingerprint},
                      {"severity", "major"},
                      {"location", {{"path", projectPath(f.path)}, {"lines", {{"begin", f.where.line}}}}}});
  }
  writeJsonDocument(issues, out);
}

}  // namespace nccl_migrate::lint
