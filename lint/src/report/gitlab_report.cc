// GitLab Code Quality (the report a merge request widget reads): a JSON array of issues, each
// with a description, check name, fingerprint, severity and a path relative to the project.
#include <filesystem>
#include <ostream>

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

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
  std::string buffer;
  llvm::raw_string_ostream stream(buffer);
  llvm::json::OStream json(stream, 2);
  json.array([&] {
    for (const Finding& f : report.findings) {
      json.object([&] {
        json.attribute("description", f.code + " " + f.message);
        json.attribute("check_name", f.code);
        json.attribute("fingerprint", f.fingerprint);
        json.attribute("severity", "major");
        json.attributeObject("location", [&] {
          json.attribute("path", projectPath(f.path));
          json.attributeObject("lines", [&] { json.attribute("begin", f.where.line); });
        });
      });
    }
  });
  stream.flush();
  out << buffer << '\n';
}

}  // namespace nccl_migrate::lint
