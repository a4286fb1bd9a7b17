// Rule documentation generated from rule metadata: docs/rules/*.md, `rules --explain`, SARIF help.
#include <sstream>

#include "nccl_migrate/lint/report_format.h"

namespace nccl_migrate::lint {
namespace {

std::string languageNames(const RuleInfo& info) {
  std::string out;
  for (Language l : info.languages) {
    if (!out.empty()) out += ", ";
    switch (l) {
      case Language::Python: out += "Python"; break;
      case Language::Cpp: out += "C/C++/CUDA"; break;
      case Language::Shell: out += "shell"; break;
      case Language::Dockerfile: out += "Dockerfile"; break;
      case Language::Config: out += "YAML/TOML/JSON/.env"; break;
    }
  }
  return out;
}

std::string safetyText(FixSafety safety) {
  switch (safety) {
    case FixSafety::Safe: return "safe: `--fix` applies it";
    case FixSafety::Unsafe: return "unsafe: applied only with `--unsafe-fixes`";
    case FixSafety::None: return "no automatic fix";
  }
  return "";
}

}  // namespace

std::string ruleMarkdown(const Rule& rule) {
  const RuleInfo& info = rule.info();
  std::ostringstream md;
  md << "# " << info.code << " " << info.slug << "\n\n"
     << info.summary << ".\n\n"
     << "- Languages: " << languageNames(info) << "\n"
     << "- On by default: " << (info.enabledByDefault ? "yes" : "no") << "\n"
     << "- Fix: " << safetyText(info.fixSafety) << "\n\n"
     << "## Why\n\n" << info.rationale << "\n\n";
  if (!info.example.empty()) md << "## Example\n\n```\n" << info.example << "\n```\n\n";
  md << "## What to do\n\n" << info.fix << "\n\n"
     << "Suppress one finding with `# noqa: " << info.code << "` (Python, shell, YAML) or `// NOLINT(" << info.code
     << ")` (C/C++/CUDA).\n";
  return md.str();
}

std::string rulesIndexMarkdown() {
  std::ostringstream md;
  md << "# Lint rules\n\n"
     << "Generated from the rule metadata by `nccl-migrate rules --write-docs docs/rules`; do not edit.\n\n"
     << "| Code | Name | Summary | Languages | Default | Fix |\n| --- | --- | --- | --- | --- | --- |\n";
  for (const Rule* rule : allRules()) {
    const RuleInfo& info = rule->info();
    md << "| [" << info.code << "](" << info.code << ".md) | " << info.slug << " | " << info.summary << " | "
       << languageNames(info) << " | " << (info.enabledByDefault ? "on" : "off") << " | "
       << (info.fixSafety == FixSafety::Safe ? "safe" : info.fixSafety == FixSafety::Unsafe ? "unsafe" : "-") << " |\n";
  }
  return md.str();
}

std::string ruleExplanation(const Rule& rule) { return ruleMarkdown(rule); }

}  // namespace nccl_migrate::lint
