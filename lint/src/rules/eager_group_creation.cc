// NM401 eager-group-creation: process groups created in loops or at many call sites.
#include <string>
#include <vector>

#include "nccl_migrate/lint/rule.h"
#include "registry.h"
#include "torch_names.h"

namespace nccl_migrate::lint {
namespace {

constexpr const char* kCost =
    "under torch 2.15's rewritten NCCL backend each group gets its own communicator, created eagerly (with device "
    "memory) when the group is created, not at its first collective";
constexpr const char* kAdvice =
    "create the groups once, use one split_group per family of groups, or backend=\"nccl-lazy\" where lazy creation "
    "fits";

bool createsGroup(const Call& call) {
  const std::string& q = call.qualifiedName;
  return isDistributed(q, "new_group") || isDistributed(q, "split_group") || isDistributed(q, "new_subgroups") ||
         isDistributed(q, "new_subgroups_by_enumeration");
}

// A known backend that resolves to no eager NCCL ("gloo", "nccl-lazy") is not eager NCCL.
bool eagerNccl(const Call& call) {
  const Argument* backend = call.keyword("backend");
  if (!backend || !backend->stringValue) return true;
  return selectsEagerNccl(*backend->stringValue);
}

class EagerGroupCreation final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext& context, std::vector<Finding>& out) const override {
    std::vector<const Call*> sites;
    for (const Call& call : model.calls) {
      if (!createsGroup(call) || !eagerNccl(call)) continue;
      if (call.loopDepth == 0) sites.push_back(&call);  // loops are reported on their own
      if (call.loopDepth > 0) {
        out.push_back(finding(model, call.where, call.spelling + "() in a loop creates one process group per "
                                                     "iteration; " + kCost + ". Consider: " + kAdvice));
      }
    }
    int threshold = context.config.groupSitesThreshold;
    if (threshold <= 0 || static_cast<int>(sites.size()) < threshold) return;
    // One finding per file, at the first site: the advice is about the file's groups together.
    const Call* first = sites.front();
    out.push_back(finding(model, first->where,
                          first->spelling + "() is one of " + std::to_string(sites.size()) +
                              " group-creation calls in this file; " + kCost + ". Consider: " + kAdvice));
  }

 private:
  RuleInfo info_{
      .code = "NM401",
      .slug = "eager-group-creation",
      .summary = "Process groups created in a loop or at many call sites",
      .rationale = "torch 2.15's rewritten NCCL backend creates a group's communicator eagerly, when the group is "
                   "created (pytorch #192895), one per group. Code that creates many groups, typically in a loop, now "
                   "pays for all of their communicators up front. NCCL documents that more communicators use more "
                   "memory unless they are split with shared resources.",
      .example = "groups = [dist.new_group(ranks) for ranks in layout]",
      .fix = "Create groups once and reuse them, derive a family with one split_group, or use backend=\"nccl-lazy\". "
             "Project wrappers around new_group can be declared with group-wrappers in the configuration; the "
             "threshold for many sites is group-sites-threshold.",
      .fixSafety = FixSafety::None,
      .languages = {Language::Python},
      .enabledByDefault = true,
      .triggers = {{.anyOf = {"new_group", "split_group", "new_subgroups*"}, .module = "torch.distributed"}},
  };
};

}  // namespace

const Rule& eagerGroupCreationRule() {
  static const EagerGroupCreation rule;
  return rule;
}

}  // namespace nccl_migrate::lint
