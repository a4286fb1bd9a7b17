// NM401 eager-group-creation: process groups created in loops, many in one call, or at many call
// sites.
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

// One group per subgroup, every rank taking part in all of them.
bool createsManyGroups(const Call& call) {
  const std::string& q = call.qualifiedName;
  return isDistributed(q, "new_subgroups") || isDistributed(q, "new_subgroups_by_enumeration");
}

// Calls that create groups: torch's creators, and the project's wrappers, which the frontend names
// as new_group.
bool createsGroup(const Call& call) {
  const std::string& q = call.qualifiedName;
  return isDistributed(q, "new_group") || isDistributed(q, "split_group") || isDistributed(q, "_new_process_group_helper") ||
         createsManyGroups(call);
}

// A known backend that resolves to no eager NCCL ("gloo", "nccl-lazy") is not eager NCCL; nor is
// the default backend in a file whose every init_process_group names a world without NCCL and
// that calls no other initialiser (worldShownNotNccl).
bool eagerNccl(const Call& call, bool worldNotNccl) {
  const Argument* backend = call.keyword("backend");
  if (!backend) return !worldNotNccl;
  if (!backend->stringValue) return true;
  return selectsEagerNccl(*backend->stringValue);
}

class EagerGroupCreation final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext& context, std::vector<Finding>& out) const override {
    std::vector<const Call*> sites;
    bool worldNotNccl = worldShownNotNccl(model);
    for (const Call& call : model.calls) {
      if (!createsGroup(call) || !eagerNccl(call, worldNotNccl)) continue;
      if (call.loopDepth > 0) {
        out.push_back(finding(model, call.where, call.spelling + "() in a loop creates one process group per "
                                                     "iteration; " + kCost + ". Consider: " + kAdvice));
      } else if (createsManyGroups(call)) {
        out.push_back(finding(model, call.where, call.spelling + "() creates one process group per subgroup in one "
                                                     "call, and every rank creates all of them; " + kCost +
                                                     ". Consider: " + kAdvice));
      } else if (!call.inGroupWrapper) {
        // A wrapper's own creation call makes its groups where the wrapper is called, so only
        // those calls count; loops and many-group calls are reported on their own.
        sites.push_back(&call);
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
      .summary = "Process groups created in a loop, many in one call, or at many call sites",
      .rationale = "torch 2.15's rewritten NCCL backend creates a group's communicator eagerly, when the group is "
                   "created (pytorch #192895), one per group. Code that creates many groups, typically in a loop, now "
                   "pays for all of their communicators up front. NCCL documents that more communicators use more "
                   "memory unless they are split with shared resources. new_subgroups and "
                   "new_subgroups_by_enumeration create one group per subgroup in a single call, and so do libraries' "
                   "calls the catalogue (lint/data/group_wrappers.toml) names with their source: apex's "
                   "create_syncbn_process_group, fairscale's, Megatron-LM's (also as megatron.core's `mpu`), xDiT's "
                   "(xfuser), vLLM's and SGLang's initialize_model_parallel (and vLLM's "
                   "ensure_model_parallel_initialized), yunchang's set_seq_parallel_pg, DeepSpeed's "
                   "PipelineParallelGrid, torchrec's intra_and_cross_node_pg; each is reported where it stands, "
                   "installed or not, unless the linted tree defines the function itself: there it is the tree's "
                   "wrapper, read as the tree's code. torch's creators are new_group, split_group, new_subgroups* and the "
                   "private _new_process_group_helper they call, which stacks call themselves for a standalone group "
                   "outside the default world (a trainer's weight-sync group with each inference engine). One of "
                   "torch's creators kept in a name, a class attribute or a dict (the "
                   "original saved before patching new_group) counts as that creator. A project's function that "
                   "creates groups counts as a creator where it is called: by name, as a method of an object whose "
                   "class the tree shows, or as a static or class method on its class (`Manager.make_groups(...)`); "
                   "a call that passes False or None for a keyword creates none through it where every group creation "
                   "found in that function (and in every method of its name in its module) stands under `if flag:` "
                   "testing that parameter, not rebound before the test (torch's `DeviceMesh(..., "
                   "_init_backend=False)`). A group created with the "
                   "default backend in a file whose every init_process_group names a backend without NCCL "
                   "(\"gloo\"), and that calls no other initialiser (deepspeed.init_distributed, "
                   "colossalai.launch), is not reported, nor is one in a module that imports torch_npu at module "
                   "level outside try and if: it loads only on Ascend NPUs, whose groups are HCCL's. A backend that is a parameter's string default "
                   "(`def build_groups(layout, backend=\"gloo\")`, in new_group or in the file's init_process_group) "
                   "is that string only where no call in the linted tree passes that argument another value (by "
                   "keyword, by position, or through *args/**kwargs; calls are found by the function's name in the "
                   "text and count in its module, in a file importing that module, as a method's call on an object "
                   "or a class's call for its __init__); where one does, the backend is the "
                   "caller's and the groups are reported.",
      .example = "groups = [dist.new_group(ranks) for ranks in layout]",
      .fix = "Create groups once and reuse them, derive a family with one split_group, or use backend=\"nccl-lazy\". "
             "Project wrappers around new_group can be declared with group-wrappers in the configuration; the "
             "threshold for many sites is group-sites-threshold.",
      .fixSafety = FixSafety::None,
      .languages = {Language::Python},
      .enabledByDefault = true,
      // A creator called on a receiver (`dist.new_group` of a project's own mirror of
      // torch.distributed, `ENV.new_group`) counts without a mention of torch.distributed.
      .triggers = {{.anyOf = {"new_group", "split_group", "new_subgroups*", "_new_process_group_helper"}, .module = "torch.distributed"},
                   {.anyOf = {".new_group", ".split_group", ".new_subgroups*"}}},
      // The world's backend, for groups created with the default one.
      .contextWords = {"init_process_group"},
  };
};

}  // namespace

const Rule& eagerGroupCreationRule() {
  static const EagerGroupCreation rule;
  return rule;
}

}  // namespace nccl_migrate::lint
