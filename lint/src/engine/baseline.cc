// Baselines are `--format json` reports; findings match on their fingerprints.
#include "nccl_migrate/lint/baseline.h"

#include <fstream>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace nccl_migrate::lint {

int applyBaseline(LintReport& report, const std::filesystem::path& baselineFile) {
  std::ifstream in(baselineFile);
  if (!in) throw ConfigError(baselineFile.string() + ": baseline file cannot be read; create it with "
                             "`nccl-migrate lint --format json PATH > " + baselineFile.string() + "`");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(baselineFile.string() + ": baseline is not JSON (" + e.what() + "); it must be the output of "
                      "`nccl-migrate lint --format json`");
  }
  auto findings = json.is_object() ? json.find("findings") : json.end();
  if (findings == json.end() || !findings->is_array()) throw ConfigError(baselineFile.string() + ": baseline has no \"findings\" list; it must be the output "
                                   "of `nccl-migrate lint --format json`");
  std::unordered_map<std::string, int> known;
  for (const nlohmann::json& f : *findings) {
    auto fp = f.is_object() ? f.find("fingerprint") : f.end();
    if (fp == f.end() || !fp->is_string()) throw ConfigError(baselineFile.string() + ": a baseline finding has no \"fingerprint\"; regenerate the "
                               "baseline with this version of nccl-migrate");
    ++known[fp->get<std::string>()];
  }
  size_t before = report.findings.size();
  std::erase_if(report.findings, [&](const Finding& f) {
    auto it = known.find(f.fingerprint);
    if (it == known.end() || it->second == 0) return false;
    --it->second;
    return true;
  });
  return static_cast<int>(before - report.findings.size());
}

}  // namespace nccl_migrate::lint
