// SARIF 2.1.0, as GitHub code scanning reads it: one run per invocation, rules in
// tool.driver.rules with stable ids, descriptions, help and a help URI, artifact URIs relative to
// %SRCROOT% (the working directory), and partialFingerprints for de-duplication across commits.
#include <cctype>
#include <filesystem>
#include <ostream>

#include <algorithm>

#include "json_document.h"
#include "nccl_migrate/lint/report_format.h"

namespace nccl_migrate::lint {
namespace {

// RFC 3986: everything but unreserved characters and the path separator is percent-encoded, so
// a file named with spaces or non-ASCII letters still makes a valid URI.
std::string percentEncoded(const std::string& path) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::filesystem::path workingDirectory() {
  std::error_code ec;
  return std::filesystem::current_path(ec);
}

// Code scanning matches results to files by paths relative to the checkout: a file under the
// working directory (the run's %SRCROOT%) is named relative to it; one outside it keeps an
// absolute file URI and no base.
struct ArtifactUri {
  std::string uri;
  bool underSourceRoot;
};

ArtifactUri artifactUri(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec).lexically_normal();
  fs::path relative = absolute.lexically_relative(workingDirectory());
  if (!relative.empty() && *relative.begin() != "..") return {percentEncoded(relative.generic_string()), true};
  return {"file://" + percentEncoded(absolute.generic_string()), false};
}

std::string sourceRootUri() {
  std::string dir = workingDirectory().generic_string();
  if (!dir.ends_with('/')) dir += '/';
  return "file://" + percentEncoded(dir);
}

std::string helpUri(const RuleInfo& info) { return std::string(NCCL_MIGRATE_RULE_DOCS_URL) + info.code + ".md"; }

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
                     {"helpUri", helpUri(info)},
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
    ArtifactUri uri = artifactUri(f.path);
    Json artifact = {{"uri", uri.uri}};
    if (uri.underSourceRoot) artifact["uriBaseId"] = "%SRCROOT%";
    result["locations"] = Json::array({{{"physicalLocation", {{"artifactLocation", std::move(artifact)}, {"region", std::move(region)}}}}});
    result["partialFingerprints"] = {{"nccl-migrate/v1", f.fingerprint}};
    results.push_back(std::move(result));
  }
  Json driver = {{"name", "nccl-migrate"}, {"version", toolVersion}, {"semanticVersion", toolVersion}, {"rules", std::move(rules)}};
  Json run = {{"tool", {{"driver", std::move(driver)}}},
              {"originalUriBaseIds", {{"%SRCROOT%", {{"uri", sourceRootUri()}}}}},
              {"results", std::move(results)}};
  Json root = {{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
               {"version", "2.1.0"},
               {"runs", Json::array({std::move(run)})}};
  writeJsonDocument(root, out);
}

}  // namespace nccl_migrate::lint
