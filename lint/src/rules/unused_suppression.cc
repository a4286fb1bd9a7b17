// NM001 unused-suppression: a noqa/NOLINT comment naming a rule that reported nothing there.
// The linter's suppression pass produces these findings (it alone knows which comments matched);
// this file holds the rule's metadata so it is selected, documented and suppressed like any other.
// Its prefilter words are the enabled rules' codes and slugs, which only the linter knows.
#include "nccl_migrate/lint/rule.h"
#include "registry.h"

namespace nccl_migrate::lint {
namespace {

class UnusedSuppression final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }
  void check(const SourceModel&, const RuleContext&, std::vector<Finding>&) const override {}

 private:
  RuleInfo info_{
      .code = "NM001",
      .slug = "unused-suppression",
      .summary = "Suppression comment for a rule that reports nothing on that line",
      .rationale = "A `# noqa: NM201` or `// NOLINT(NM201)` that silences nothing is left over from code that was "
                   "fixed or moved; it would hide a future finding on that line.",
      .example = "x = 1  # noqa: NM201",
      .fix = "Remove the code from the comment (or the comment).",
      .fixSafety = FixSafety::None,
      .languages = {Language::Python, Language::Cpp, Language::Shell, Language::Dockerfile, Language::Config},
      .enabledByDefault = true,
  };
};

}  // namespace

const Rule& unusedSuppressionRule() {
  static const UnusedSuppression rule;
  return rule;
}

}  // namespace nccl_migrate::lint
