// NM201 legacy-class-check: type tests against the legacy ProcessGroupNCCL class.
#include <optional>
#include <string>
#include <unordered_set>

#include "nccl_migrate/lint/rule.h"
#include "nccl_name_test.h"
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


// A test of the cast's result for null becomes a test of the backend's name: true for every
// backend that runs NCCL, the legacy one included, so the legacy path keeps its result.
Fix nameTest(const TypeCheck& check) {
  Fix fix{"Recognise every NCCL backend by getBackendName()", FixSafety::Unsafe, {}};
  fix.edits.push_back({check.callee, (check.testNegated ? "!" : "") + cppRunsNcclLambda()});
  if (check.nullTest.begin < check.callee.begin) fix.edits.push_back({{check.nullTest.begin, check.callee.begin}, ""});
  size_t afterCast = check.operand.end + 1;  // past the cast's closing parenthesis
  if (check.nullTest.end > afterCast) fix.edits.push_back({{afterCast, check.nullTest.end}, ""});
  return fix;
}

// An unchecked cast whose result is used: checked first against the legacy class, so the
// rewritten backend's object gives null (or std::bad_cast) instead of a reinterpreted object.
std::optional<Fix> checkedCast(const TypeCheck& check) {
  const std::string title = "Cast through dynamic_cast, null for the rewritten backend";
  bool staticName = check.spelling.starts_with("static_");
  bool downcastOrReinterpret = !check.downcastTo.empty() || !check.castName.known() || check.spelling.starts_with("reinterpret_cast");
  if (check.toPointer && downcastOrReinterpret && check.operand.known()) {
    // Through the legacy class: a project subclass adds no object of its own to check against.
    return Fix{title, FixSafety::Unsafe,
               {{{check.operand.begin, check.operand.begin}, "dynamic_cast<::c10d::ProcessGroupNCCL*>("},
                {{check.operand.end, check.operand.end}, ")"}}};
  }
  if (staticName && check.downcastTo.empty() && check.castName.known()) {
    std::string name = check.spelling.substr(0, check.spelling.find('<'));
    return Fix{title, FixSafety::Unsafe, {{check.castName, "dynamic_" + name.substr(std::string("static_").size())}}};
  }
  return std::nullopt;
}

std::optional<Fix> fixFor(const TypeCheck& check) {
  if (check.kind == TypeCheck::Kind::Isinstance) {
    if (!check.callee.known()) return std::nullopt;
    return Fix{"Recognise every NCCL backend, by class or by name()", FixSafety::Unsafe,
               {{check.callee, pythonRunsNcclIsinstance()}}};
  }
  if (check.kind != TypeCheck::Kind::CheckedCast && check.kind != TypeCheck::Kind::UncheckedCast) return std::nullopt;
  if (!check.callee.known() || !check.operand.known()) return std::nullopt;
  // A test for a project's subclass asks about more than NCCL: no name answers it.
  // An unchecked cast of a raw pointer may start from a `void*`, which neither dynamic_cast nor
  // getBackendName() takes: only an operand known to be an object's pointer is rewritten. A smart
  // pointer cast (static_pointer_cast) takes a smart pointer to a class.
  if (check.kind == TypeCheck::Kind::UncheckedCast && check.toPointer && !check.operandIsObjectPointer) {
    return std::nullopt;
  }
  if (check.nullTest.known() && check.downcastTo.empty()) return nameTest(check);
  if (check.kind == TypeCheck::Kind::UncheckedCast) return checkedCast(check);
  return std::nullopt;  // a checked cast already gives null; what the code does then is its own
}

class LegacyClassCheck final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    for (const TypeCheck& check : model.typeChecks) {
      if (!kLegacyClass.contains(check.qualifiedName)) continue;
      if (!check.downcastTo.empty()) {
        Finding f = finding(model, check.where,
                              check.spelling + " downcasts a ProcessGroupNCCL to " + check.downcastTo +
                                  ", which the object is no longer under the rewritten backend: backend=\"nccl\" builds "
                                  "c10d::nccl2::ProcessGroupNCCL in torch 2.15, not " + check.downcastTo + ", so the cast " +
                                  consequence(check));
        f.fix = fixFor(check);
        out.push_back(std::move(f));
        continue;
      }
      Finding f = finding(model, check.where,
                          describe(check) + " " + consequence(check) +
                              ": backend=\"nccl\" builds ProcessGroupNCCL2 (c10d::nccl2::ProcessGroupNCCL) "
                              "in torch 2.15, which does not derive from ProcessGroupNCCL");
      f.fix = fixFor(check);
      out.push_back(std::move(f));
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
      .fix = "Compare the backend's name() against (\"nccl\", \"nccl2\", \"nccl-lazy\"), or check both classes. "
             "`--fix --unsafe-fixes` rewrites what is mechanical. Python: isinstance(x, ...ProcessGroupNCCL) becomes one "
             "expression, true for torch's ProcessGroupNCCL, ProcessGroupNCCL2 and ProcessGroupNCCLLazy where torch has "
             "them (looked up with getattr, so it runs on any torch) and for a Backend whose name() is \"nccl\", "
             "\"nccl2\" or \"nccl-lazy\" (the toolkit's backends). C++: a cast whose result is only tested for null "
             "(`if (dynamic_cast<c10d::ProcessGroupNCCL*>(b))`, `!cast`, `cast != nullptr`) becomes a test of "
             "b->getBackendName() against the same names, which needs no nccl2 header and compiles against every torch; "
             "an unchecked cast whose result is used (static_cast, static_pointer_cast, a C-style cast through void* "
             "to a subclass) is checked first, so the rewritten backend's object gives null instead of being "
             "reinterpreted. The fixes are unsafe: code behind a test now runs for the rewritten backend, whose class "
             "lacks the legacy one's methods, and a cast that gave a pointer now gives null where the code may not "
             "test it; a cast used as a value through dynamic_cast, type() identity and subclassing are left to you.",
      .fixSafety = FixSafety::Unsafe,
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
