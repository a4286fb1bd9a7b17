// `nccl-migrate lint`: option parsing and exit codes around the lint engine.
#include <iostream>
#include <stdexcept>

#include "commands.h"
#include "nccl_migrate/lint/linter.h"
#include "nccl_migrate/lint/report_format.h"

namespace nccl_migrate::cli {
namespace {

constexpr const char* kLintUsage = R"(usage: nccl-migrate lint [--format text|json] [--list-rules] PATH...

Finds code that breaks or gets expensive under torch 2.15's rewritten NCCL backend.
PATH may be files or directories (searched recursively; hidden and build directories skipped).

options:
  --format text|json   output format (default text: path:line:col: CODE message)
  --list-rules         print the rule catalogue and exit
  -h, --help           show this help

exit status: 0 no findings, 1 findings, 2 usage error or unreadable input
)";

int listRules() {
  for (const lint::Rule* rule : lint::allRules()) {
    const lint::RuleInfo& info = rule->info();
    std::cout << info.code << "  " << info.slug << "  " << info.summary << '\n';
  }
  return 0;
}

}  // namespace

int runLint(const std::vector<std::string>& args) {
  std::string format = "text";
  std::vector<std::filesystem::path> paths;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kLintUsage;
      return 0;
    }
    if (a == "--list-rules") return listRules();
    if (a == "--format" || a.starts_with("--format=")) {
      if (a == "--format" && i + 1 >= args.size()) {
        std::cerr << "nccl-migrate lint: --format needs a value: text or json\n";
        return 2;
      }
      format = a == "--format" ? args[++i] : a.substr(std::string("--format=").size());
      if (format != "text" && format != "json") {
        std::cerr << "nccl-migrate lint: unknown format '" << format << "'; use text or json\n";
        return 2;
      }
      continue;
    }
    if (a.starts_with("-") && a != "-") {
      std::cerr << "nccl-migrate lint: unknown option '" << a << "'\n" << kLintUsage;
      return 2;
    }
    paths.emplace_back(a);
  }
  if (paths.empty()) {
    std::cerr << "nccl-migrate lint: no PATH given\n" << kLintUsage;
    return 2;
  }
  lint::LintReport report;
  try {
    report = lint::lintPaths(paths);
  } catch (const std::exception& e) {
    std::cerr << "nccl-migrate lint: " << e.what() << '\n';
    return 2;
  }
  if (format == "json") lint::writeJson(report, std::cout);
  else lint::writeText(report, std::cout, std::cerr);
  return report.findings.empty() ? 0 : 1;
}

}  // namespace nccl_migrate::cli
