// NM201 legacy-class-check: type tests against the legacy ProcessGroupNCCL class.
#include <string>
#include <unordered_set>

#include "nccl_migrate/lint/rule.h"
#include "registry.h"

namespace nccl_migrate::lint {
namespace {

const std::unordered_set<std::string> kLegacyClass = {
    "torch.distributed.ProcessGroupNCCL",
    "c10d::ProcessGroupNCCL",
};

std::string describe(const TypeCheck& check) {
  switch (check.kind) {
    case TypeCheck::Kind::Isinstance: return "isinstance check against " + check.spelling;
    case TypeCheck::Kind::TypeIdentity: return "type() comparison with " + check.spelling;
    case TypeCheck::Kind::CheckedCast: return check.spelling;
    case TypeCheck::Kind::UncheckedCast: return check.spelling;
    case TypeCheck::Kind::Subclass: return "subclass of " + check.spelling;
  }
  return check.spelling;
}

std::string consequence(const TypeCheck& check) {
  switch (check.kind) {
    case TypeCheck::Kind::Isinstance:
    case TypeCheck::Kind::TypeIdentity:
      return "is False for the rewritten backend";
    case TypeCheck::Kind::CheckedCast:
      return "returns null for the rewritten backend";
    case TypeCheck::Kind::UncheckedCast:
      return "is undefined behaviour for the rewritten backend";
    case TypeCheck::Kind::Subclass:
      return "inherits the legacy backend, which torch 2.15 keeps only as nccl-legacy";
  }
  return "";
}

class LegacyClassCheck final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    for (const TypeCheck& check : model.typeChecks) {
      if (!kLegacyClass.contains(check.qualifiedName)) continue;
      if (!check.downcastTo.empty()) {
        out.push_back(finding(model, check.where,
                              check.spelling + " downcasts a ProcessGroupNCCL to " + check.downcastTo +
                                  ", which the object is no longer under the rewritten backend: backend=\"nccl\" builds "
                                  "c10d::nccl2::ProcessGroupNCCL in torch 2.15, not " + check.downcastTo + ", so the cast " +
                                  consequence(check)));
        continue;
      }
      out.push_back(finding(model, check.where,
                            describe(check) + " " + consequence(check) +
                                ": backend=\"nccl\" builds ProcessGroupNCCL2 (c10d::nccl2::ProcessGroupNCCL) "
                                "in torch 2.15, which does not derive from ProcessGroupNCCL"));
    }
  }

 private:
  RuleInfo info_{
      .code = "NM201",
      .slug = "legacy-class-check",
      .summary = "Type check or cast against the legacy ProcessGroupNCCL class",
      .rationale =
          "torch 2.15 makes backend=\"nccl\" build the rewritten backend, whose class "
          "(c10d::nccl2::ProcessGroupNCCL, Python ProcessGroupNCCL2) does not derive from the legacy "
          "ProcessGroupNCCL. isinstance checks turn False and dynamic casts return null without any error.",
      .example = "if isinstance(pg._get_backend(torch.device(\"cuda\")), dist.ProcessGroupNCCL): ...",
      .fix = "Compare the backend's name() against (\"nccl\", \"nccl2\", \"nccl-lazy\"), or check both classes.",
      .fixSafety = FixSafety::None,
      .languages = {Language::Python, Language::Cpp},
      .enabledByDefault = true,
      .triggers = {{.anyOf = {"ProcessGroupNCCL"}}},
  };
};

}  // namespace

const Rule& legacyClassCheckRule() {
  static const LegacyClassCheck rule;
  return rule;
}

}  // namespace nccl_migrate::lint
