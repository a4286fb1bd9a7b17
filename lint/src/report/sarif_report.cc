// SARIF 2.1.0, as GitHub code scanning reads it: rules in tool.driver.rules with stable ids,
// relative artifact URIs under %SRCROOT%, and partialFingerprints for de-duplication.
#include <filesystem>
#include <ostream>

#include <algorithm>

#include "json_document.h"
#include "nccl_migrate/lint/report_format.h"

namespace nccl_migrate::lint {
namespace {

std::string artifactUri(const std::string& path) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (p.is_absolute()) {
    std::filesystem::path rel = std::filesystem::relative(p, std::filesystem::current_path(ec), ec);
    if (!ec && !rel.empty() && !rel.string().starts_with("..")) p = rel;
  }
  std::string uri = p.lexically_normal().generic_string();
  if (uri.starts_with("./")) uri = uri.substr(2);
  return uri;
}

int ruleIndex(const std::string& code) {
  const auto& rules = allRules();
  for (size_t i = 0; i < rules.size(); ++i)
    if (rules[i]->info().code == code) return static_cast<int>(i);
  return -1;
}

}  // namespace

void writeSarif(const LintReport& report, const std::string& toolVersion, std::ostream& out) {
  Json rules = Json::array();
  for (const Rule* rule : allRules()) {
    const RuleInfo& info = rule->info();
    rules.push_back({{"id", info.code},
                     {"name", info.slug},
                     {"shortDescription", {{"text", info.summary}}},
                     {"fullDescription", {{"text", info.rationale}}},
                     {"help", {{"text", info.fix}, {"markdown", ruleMarkdown(*rule)}}},
                     {"defaultConfiguration", {{"level", "warning"}, {"enabled", info.enabledByDefault}}}});
  }
  Json results = Json::array();
  for (const Finding& f : report.findings) {
    Json result = {{"ruleId", f.code}};
    if (int index = ruleIndex(f.code); index >= 0) result["ruleIndex"] = index;
    result["level"] = "warning";
    result["message"] = {{"text", f.message}};
    Json region = {{"startLine", f.where.line}, {"startColumn", std::max(1, f.where.column)}};
    Json artifact = {{"uri", artifactUri(f.path)}, {"uriBaseId", "%SRCROOT%"}};
    result["locations"] = Json::array({{{"physicalLocation", {{"artifactLocation", std::move(artifact)}, {"region", std::move(region)}}}}});
    result["partialFingerprints"] = {{"nccl-migrate/v1", f.fingerprint}};
    results.push_back(std::move(result));
  }
  std::error_code ec;
  Json srcroot = {{"uri", "file://" + std::filesystem::current_path(ec).generic_string() + "/"}};
  Json driver = {{"name", "nccl-migrate"}, {"version", toolVersion}, {"semanticVersion", toolVersion}, {"rules", std::move(rules)}};
  Json run = {{"tool", {{"driver", std::move(driver)}}},
              {"originalUriBaseIds", {{"%SRCROOT%", std::move(srcroot)}}},
              {"results", std::move(results)}};
  Json root = {{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
               {"version", "2.1.0"},
               {"runs", Json::array({std::move(run)})}};
  writeJsonDocument(root, out);
}

}  // namespace nccl_migrate::lint
