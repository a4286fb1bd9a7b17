// NM501 pinned-legacy-backend: code or configuration that pins the legacy NCCL backend.
#include <string>

#include "nccl_migrate/lint/rule.h"
#include "registry.h"
#include "setting_fixes.h"
#include "torch_names.h"

namespace nccl_migrate::lint {
namespace {

constexpr const char* kAdvice =
    "it is a rollback path, not a migration: torch has not committed to keeping it, and pinning hides what the "
    "rewritten backend changes. Run the job under both behaviours with `nccl-migrate ab`, or select the behaviour "
    "per run through nccl-migrate's shim (`nccl-migrate run`), then drop the pin";

class PinnedLegacyBackend final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    for (const Setting& s : model.settings) {
      if (isUseNccl2Variable(s.key) && useNccl2SelectsLegacy(s.value)) {
        Finding f = finding(model, s.where, "TORCH_DIST_USE_NCCL2=0 makes backend \"nccl\" build the legacy "
                                            "ProcessGroupNCCL; " + std::string(kAdvice));
        f.fix = removeSetting(s, "Remove TORCH_DIST_USE_NCCL2=0");
        out.push_back(std::move(f));
      } else if (!s.isEnvironment && namesLegacyBackend(s.value)) {
        Finding f = finding(model, s.where, s.key + ": \"" + s.value + "\" names the legacy NCCL backend; " + kAdvice);
        // "nccl" is the name without a pin: whatever TORCH_DIST_USE_NCCL2 and torch select.
        f.fix = replaceInValue(s, "nccl-legacy", "nccl", "Name the NCCL backend \"nccl\"");
        out.push_back(std::move(f));
      }
    }
    for (const StringLiteral& str : model.strings) {
      if (!namesLegacyBackend(str.value)) continue;
      out.push_back(finding(model, str.where, "\"" + str.value + "\" names the legacy NCCL backend; " + kAdvice));
    }
  }

 private:
  RuleInfo info_{
      .code = "NM501",
      .slug = "pinned-legacy-backend",
      .summary = "Legacy NCCL backend pinned with nccl-legacy or TORCH_DIST_USE_NCCL2=0",
      .rationale = "In torch 2.15, TORCH_DIST_USE_NCCL2=0 and the explicit \"nccl-legacy\" name are the rollback "
                   "paths to the legacy ProcessGroupNCCL; only the exact value \"0\" selects legacy. A pin left in "
                   "code, scripts or images keeps a job on the old backend without anyone deciding it again, and no "
                   "release has promised to keep the legacy backend.",
      .example = "dist.init_process_group(backend=\"nccl-legacy\")",
      .fix = "Compare both behaviours with `nccl-migrate ab`, fix what differs, and remove the pin; where a choice per "
             "run is needed, use nccl-migrate's shim instead of a hard-coded name. `--fix --unsafe-fixes` removes "
             "TORCH_DIST_USE_NCCL2=0 where it is set in a shell script, Dockerfile or configuration file (the "
             "`export` line, the `ENV` line, the YAML/TOML/.env key, or the assignment word in front of a command, "
             "the rest of the line kept), and renames nccl-legacy to nccl in a configuration value "
             "(\"cpu:gloo,cuda:nccl-legacy\" becomes \"cpu:gloo,cuda:nccl\"). Unsafe: the job then runs the "
             "rewritten backend on torch 2.15, which is the change to verify with `nccl-migrate ab` first.",
      .fixSafety = FixSafety::Unsafe,
      .languages = {Language::Python, Language::Cpp, Language::Shell, Language::Dockerfile, Language::Config},
      .enabledByDefault = true,
      .triggers = {{.anyOf = {"nccl-legacy", "TORCH_DIST_USE_NCCL2"}}},
  };
};

}  // namespace

const Rule& pinnedLegacyBackendRule() {
  static const PinnedLegacyBackend rule;
  return rule;
}

}  // namespace nccl_migrate::lint
