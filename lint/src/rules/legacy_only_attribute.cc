// NM203 legacy-only-attribute: attributes of the legacy ProcessGroupNCCL read without a guard.
#include <array>
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

// Only attributes with a confirmed difference; each consequence is what is known about it.
constexpr std::array<LegacyAttribute, 4> kAttributes = {{
    {"perform_nocolor_split", "raises AttributeError: 'ProcessGroupNCCL2' object has no attribute 'perform_nocolor_split'"},
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
        out.push_back(finding(model, use.where,
                              use.objectText + "." + use.name + " " + std::string(attr.consequence) +
                                  " on torch 2.15's default NCCL backend; guard it with hasattr() or check the "
                                  "backend's name() first"));
      }
    }
  }

 private:
  // hasattr(x, "name") / getattr(x, "name", default) anywhere in the file shows the code already
  // copes with the attribute being absent.
  static bool guarded(const SourceModel& model, const std::string& name) {
    for (const Call& call : model.calls) {
      if (call.spelling != "hasattr" && call.spelling != "getattr") continue;
      const Argument* attr = call.positional(1);
      if (attr && attr->stringValue == name) return true;
    }
    return false;
  }

  RuleInfo info_{
      .code = "NM203",
      .slug = "legacy-only-attribute",
      .summary = "Attribute of the legacy ProcessGroupNCCL used without a guard",
      .rationale = "torch 2.15 builds ProcessGroupNCCL2 for backend \"nccl\"; it is a different class and lacks some "
                   "legacy attributes. SGLang hit \"AttributeError: 'ProcessGroupNCCL2' object has no attribute "
                   "'perform_nocolor_split'\"; _group_start/_group_end and _comm_ptr are legacy spellings too.",
      .example = "pg._get_backend(torch.device(\"cuda\")).perform_nocolor_split(device)",
      .fix = "Guard with hasattr(backend, \"...\") or branch on backend.name() in (\"nccl2\", \"nccl-lazy\"); read the "
             "comm_ptr property where it exists.",
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
