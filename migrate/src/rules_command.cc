// `nccl-migrate rules`: the rule catalogue, one rule's explanation, and docs/rules/ generation
// (with a check mode CI uses to prove the committed docs match the metadata).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "commands.h"
#include "nccl_migrate/lint/report_format.h"
#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::cli {
namespace {
namespace fs = std::filesystem;

constexpr const char* kRulesUsage = R"(usage: nccl-migrate rules [--explain CODE | --write-docs DIR | --check-docs DIR]

  (no option)        list every rule: code, name, default, summary
  --explain CODE     print one rule's documentation (CODE may be a code or a name)
  --write-docs DIR   write DIR/README.md and DIR/<CODE>.md from the rule metadata
  --check-docs DIR   exit 1 when DIR differs from what --write-docs would write

exit status: 0 success, 1 docs out of date, 2 usage error
)";

std::map<std::string, std::string> generatedDocs() {
  std::map<std::string, std::string> docs{{"README.md", lint::rulesIndexMarkdown()}};
  for (const lint::Rule* rule : lint::allRules()) docs[rule->info().code + ".md"] = lint::ruleMarkdown(*rule);
  return docs;
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int writeDocs(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  for (const auto& [name, text] : generatedDocs()) {
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    if (!out) {
      std::cerr << "nccl-migrate rules: cannot write " << (dir / name).string() << "; check the directory's permissions\n";
      return 2;
    }
    out << text;
  }
  return 0;
}

int checkDocs(const fs::path& dir) {
  int stale = 0;
  auto docs = generatedDocs();
  for (const auto& [name, text] : docs) {
    if (readFile(dir / name) != text) {
      std::cerr << (dir / name).string() << ": out of date with the rule metadata\n";
      ++stale;
    }
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!docs.contains(entry.path().filename().string())) {
      std::cerr << entry.path().string() << ": no rule has this page; delete it\n";
      ++stale;
    }
  }
  if (stale) std::cerr << "run: nccl-migrate rules --write-docs " << dir.string() << '\n';
  return stale ? 1 : 0;
}

}  // namespace

int runRules(const std::vector<std::string>& args) {
  if (args.empty()) {
    for (const lint::Rule* rule : lint::allRules()) {
      const lint::RuleInfo& info = rule->info();
      std::cout << info.code << "  " << info.slug << (info.enabledByDefault ? "" : " (off by default)") << "  "
                << info.summary << '\n';
    }
    return 0;
  }
  if (args[0] == "-h" || args[0] == "--help") {
    std::cout << kRulesUsage;
    return 0;
  }
  if (args.size() != 2) {
    std::cerr << "nccl-migrate rules: expected one option with its value\n\n" << kRulesUsage;
    return 2;
  }
  if (args[0] == "--explain") {
    const lint::Rule* rule = lint::findRule(args[1]);
    if (!rule) {
      std::cerr << "nccl-migrate rules: no rule '" << args[1] << "'; `nccl-migrate rules` lists them\n";
      return 2;
    }
    std::cout << lint::ruleExplanation(*rule);
    return 0;
  }
  if (args[0] == "--write-docs") return writeDocs(args[1]);
  if (args[0] == "--check-docs") return checkDocs(args[1]);
  std::cerr << "nccl-migrate rules: unknown option '" << args[0] << "'\n\n" << kRulesUsage;
  return 2;
}

}  // namespace nccl_migrate::cli
