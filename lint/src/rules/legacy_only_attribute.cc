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
  // A call the rewritten backend does not need, so skipping it where the attribute is missing
  // keeps the program's meaning: a fix makes it a no-op there.
  bool skippable = false;
};

// Only attributes with a confirmed difference; each consequence is what is known about it.
constexpr std::array<LegacyAttribute, 4> kAttributes = {{
    // A hint that pre-creates the communicator a later split reuses; the rewritten backend
    // creates its communicator eagerly and has no such hint.
    {"perform_nocolor_split", "raises AttributeError: 'ProcessGroupNCCL2' object has no attribute 'perform_nocolor_split'",
     true},
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
                                " on torch 2.15's default NCCL backend; guard it with hasattr() or check the "
                                "backend's name() first");
        if (attr.skippable) f.fix = skipWhereMissing(use);
        out.push_back(std::move(f));
      }
    }
  }

 private:
  // `obj.name(args)` -> `getattr(obj, "name", lambda *args, **kwargs: None)(args)`: one
  // expression, the object evaluated once, the call unchanged where the attribute exists. Only
  // where `.name` follows the object directly: what stands between them otherwise (a line break,
  // a comment) would go with the rewritten span.
  static std::optional<Fix> skipWhereMissing(const AttributeUse& use) {
    if (!use.called || use.object.end <= use.object.begin || use.dotName.begin != use.object.end ||
        use.dotName.end - use.dotName.begin != use.name.size() + 1) {
      return std::nullopt;
    }
    return Fix{"Skip the call where the backend has no " + use.name, FixSafety::Unsafe,
               {{{use.object.begin, use.object.begin}, "getattr("},
                {use.dotName, ", \"" + use.name + "\", " + std::string(kSkipped) + ")"}}};
  }

  // hasattr(x, "name") / getattr(x, "name", default) anywhere in the file shows the code already
  // copes with the attribute being absent; the getattr this rule's fix writes guards only the one
  // call it replaced, so the file's other uses are still reported after a fix.
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

  static constexpr const char* kSkipped = "lambda *args, **kwargs: None";  // what the fix calls instead

  RuleInfo info_{
      .code = "NM203",
      .slug = "legacy-only-attribute",
      .summary = "Attribute of the legacy ProcessGroupNCCL used without a guard",
      .rationale = "torch 2.15 builds ProcessGroupNCCL2 for backend \"nccl\"; it is a different class and lacks some "
                   "legacy attributes. SGLang hit \"AttributeError: 'ProcessGroupNCCL2' object has no attribute "
                   "'perform_nocolor_split'\"; _group_start/_group_end and _comm_ptr are legacy spellings too.",
      .example = "pg._get_backend(torch.device(\"cuda\")).perform_nocolor_split(device)",
      .fix = "Guard with hasattr(backend, \"...\") or branch on backend.name() in (\"nccl2\", \"nccl-lazy\"); read the "
             "comm_ptr property where it exists. `--fix --unsafe-fixes` guards calls of perform_nocolor_split, a "
             "hint the rewritten backend has no use for: `b.perform_nocolor_split(d)` becomes "
             "`getattr(b, \"perform_nocolor_split\", lambda *args, **kwargs: None)(d)`, one expression that calls it "
             "where it exists and does nothing elsewhere. Unsafe because code that caught the AttributeError no longer "
             "sees it. _group_start/_group_end (grouping changes what the ops do) and _comm_ptr (a different value "
             "on the rewritten backend) have no mechanical fix.",
      .fixSafety = FixSafety::Unsafe,
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
