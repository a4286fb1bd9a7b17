// Baselines are `--format json` reports; findings match on their fingerprints.
#include "nccl_migrate/lint/baseline.h"

#include <fstream>
#include <sstream>
#include <unordered_map>

#include <llvm/Support/JSON.h>

namespace nccl_migrate::lint {

int applyBaseline(LintReport& report, const std::filesystem::path& baselineFile) {
  std::ifstream in(baselineFile);
  if (!in) throw ConfigError(baselineFile.string() + ": baseline file cannot be read; create it with "
                             "`nccl-migrate lint --format json PATH > " + baselineFile.string() + "`");
  std::stringstream text;
  text << in.rdbuf();
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text.str());
  if (!json) {
    std::string why = llvm::toString(json.takeError());
    throw ConfigError(baselineFile.string() + ": baseline is not JSON (" + why + "); it must be the output of "
                      "`nccl-migrate lint --format json`");
  }
  const llvm::json::Object* root = json->getAsObject();
  const llvm::json::Array* findings = root ? root->getArray("findings") : nullptr;
  if (!findings) throw ConfigError(baselineFile.string() + ": baseline has no \"findings\" list; it must be the output "
                                   "of `nccl-migrate lint --format json`");
  std::unordered_map<std::string, int> known;
  for (const llvm::json::Value& f : *findings) {
    const llvm::json::Object* o = f.getAsObject();
    auto fp = o ? o->getString("fingerprint") : std::nullopt;
    if (!fp) throw ConfigError(baselineFile.string() + ": a baseline finding has no \"fingerprint\"; regenerate the "
                               "baseline with this version of nccl-migrate");
    ++known[fp->str()];
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
