// NM203 legacy-only-attribute: attributes of the legacy ProcessGroupNCCL read without a guard.
#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "nccl_migrate/lint/rule.h"
#include "registry.h"

namespace nccl_migrate::lint {
namespace {

struct LegacyAttribute {
  std::string_view name;
  std::string_view consequence;
};

// Only attributes with a confirmed difference; each consequence is what is known about it. None
// has a fix: skipping a call where the attribute is missing is right only where torch shows the
// call does nothing (or has an equivalent) on the rewritten backend, and nothing does that here
// (the rule's fix text says why for each).
constexpr std::array<LegacyAttribute, 4> kAttributes = {{
    {"perform_nocolor_split", "is missing from torch 2.15's default NCCL backend (\"AttributeError: 'ProcessGroupNCCL2' object has no attribute 'perform_nocolor_split'\")"},
    {"_group_start", "is legacy NCCL-only API (torch itself replaced it with _coalescing_manager, gated on supports_coalescing)"},
    {"_group_end", "is legacy NCCL-only API (torch itself replaced it with _coalescing_manager, gated on supports_coalescing)"},
    {"_comm_ptr", "is the legacy ProcessGroupNCCL's method; the rewritten backend exposes comm_ptr instead"},
}};

class LegacyOnlyAttribute final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    for (const AttributeUse& use : model.attributes) {
      for (const LegacyAttribute& attr : kAttributes) {
        if (use.name != attr.name || guarded(model, use.name)) continue;
        Finding f = finding(model, use.where,
                            use.objectText + "." + use.name + " " + std::string(attr.consequence) +
                                ", unguarded in this file; guard it with hasattr() or check the backend's name() "
                                "first");
        out.push_back(std::move(f));
      }
    }
  }

 private:
  // hasattr(x, "name") / getattr(x, "name", default) anywhere in the file shows the code already
  // copes with the attribute being absent; the getattr an earlier version of this rule's fix wrote
  // guards only the one call it replaced, so the file's other uses are still reported.
  static bool guarded(const SourceModel& model, const std::string& name) {
    for (const Call& call : model.calls) {
      if (call.spelling != "hasattr" && call.spelling != "getattr") continue;
      const Argument* attr = call.positional(1);
      const Argument* fallback = call.positional(2);
      if (fallback && fallback->text == kSkipped) continue;
      if (attr && attr->stringValue == name) return true;
    }
    return false;
  }

  static constexpr const char* kSkipped = "lambda *args, **kwargs: None";  // what that fix called instead

  RuleInfo info_{
      .code = "NM203",
      .slug = "legacy-only-attribute",
      .summary = "Attribute of the legacy ProcessGroupNCCL used without a guard",
      .rationale = "torch 2.15 builds ProcessGroupNCCL2 for backend \"nccl\"; it is a different class and lacks some "
                   "legacy attributes. SGLang hit \"AttributeError: 'ProcessGroupNCCL2' object has no attribute "
                   "'perform_nocolor_split'\"; _group_start/_group_end and _comm_ptr are legacy spellings too.",
      .example = "pg._get_backend(torch.device(\"cuda\")).perform_nocolor_split(device)",
      .fix = "Guard with hasattr(backend, \"...\") or branch on backend.name() in (\"nccl2\", \"nccl-lazy\"); read the "
             "comm_ptr property where it exists. No fix is offered: skipping a call where the backend lacks the "
             "method changes what the job does unless torch shows the call is a no-op there, and it does not. "
             "perform_nocolor_split is the non-member side of a communicator split: torch's new_group calls it on "
             "the ranks outside a new group because ncclCommSplit must run on every rank of the parent or the ranks "
             "fall out of step (torch/distributed/distributed_c10d.py, _new_process_group_helper), and the rewritten "
             "backend implements performNocolorSplit in C++ (torch 2.15's c10d::nccl2::ProcessGroupNCCL), so a rank "
             "that skips it can hang the ones that split; call it where the backend has it and keep the call's "
             "purpose where it does not. _group_start/_group_end: torch replaced them with _coalescing_manager, "
             "gated on supports_coalescing (PR #189770), which changes what the ops do; _comm_ptr: comm_ptr gives "
             "the communicator's value on the rewritten backend (0 until it is initialised).",
      .fixSafety = FixSafety::None,
      .languages = {Language::Python},
      .enabledByDefault = true,
      .triggers = {{.anyOf = {"perform_nocolor_split", "_group_start", "_group_end", "_comm_ptr"}}},
  };
};

}  // namespace

const Rule& legacyOnlyAttributeRule() {
  static const LegacyOnlyAttribute rule;
  return rule;
}

}  // namespace nccl_migrate::lint
