// NM204 legacy-class-construction: code that builds the legacy ProcessGroupNCCL itself.
#include <string>
#include <unordered_set>

#include "nccl_migrate/lint/rule.h"
#include "registry.h"

namespace nccl_migrate::lint {
namespace {

// The class itself, not ProcessGroupNCCL::Options (shared with the rewritten backend) nor
// c10d::nccl2::ProcessGroupNCCL; a project's own class of that name resolves elsewhere.
const std::unordered_set<std::string> kLegacyClass = {
    "torch.distributed.ProcessGroupNCCL",
    "c10d::ProcessGroupNCCL",
};

class LegacyClassConstruction final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    for (const Call& call : model.calls) {
      if (!kLegacyClass.contains(call.qualifiedName)) continue;
      out.push_back(finding(model, call.where,
                            call.spelling + " constructs the legacy ProcessGroupNCCL directly, whatever "
                            "backend=\"nccl\" resolves to; torch 2.15 keeps that class as nccl-legacy, a rollback path. "
                            "Create the group with init_process_group/new_group and backend=\"nccl\" and pass settings "
                            "through ProcessGroupNCCL.Options"));
    }
  }

 private:
  RuleInfo info_{
      .code = "NM204",
      .slug = "legacy-class-construction",
      .summary = "The legacy ProcessGroupNCCL constructed directly",
      .rationale = "Constructing ProcessGroupNCCL (Python ProcessGroupNCCL(store, rank, size, opts), C++ "
                   "make_intrusive<c10d::ProcessGroupNCCL>, make_shared, new) builds the legacy backend whatever "
                   "backend=\"nccl\" resolves to. It works on torch 2.15, which keeps the legacy class as "
                   "nccl-legacy, and stops working when the legacy backend is removed. ProcessGroupNCCL::Options "
                   "alone is not reported: the rewritten backend takes the same options.",
      .example = "pg = dist.ProcessGroupNCCL(store, rank, world_size, opts)",
      .fix = "Create groups through init_process_group/new_group with backend=\"nccl\" and pg_options; keep "
             "nccl-legacy only as a deliberate, temporary rollback.",
      .fixSafety = FixSafety::None,
      .languages = {Language::Python, Language::Cpp},
      .enabledByDefault = true,
      .triggers = {{.anyOf = {"ProcessGroupNCCL"}}},
  };
};

}  // namespace

const Rule& legacyClassConstructionRule() {
  static const LegacyClassConstruction rule;
  return rule;
}

}  // namespace nccl_migrate::lint
