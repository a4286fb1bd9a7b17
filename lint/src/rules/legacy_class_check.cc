// NM201 legacy-class-check: type tests against the legacy ProcessGroupNCCL class.
#include <optional>
#include <string>
#include <unordered_set>

#include "nccl_migrate/lint/fixes.h"
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
    case TypeCheck::Kind::Subclass: break;  // no finding (see check())
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
      break;  // no finding (see check())
  }
  return "";
}

// A cast whose result is only tested for null (`if (cast)`, `cast != nullptr`, a variable
// holding it tested alone) becomes a call of the file's helper, which gives the backend where it
// runs NCCL, the legacy one included, and null elsewhere: the test around it stays as written.
Fix helperTest(const SourceModel& model, const TypeCheck& check) {
  return Fix{"Recognise every NCCL backend by getBackendName(), in one helper",
             FixSafety::Unsafe,
             {{{check.callee.begin, check.operand.begin}, cppNcclBackendHelperName() + "("},
              definitionEdit(cppNcclBackendHelper())}};
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

// The isinstance call a check stands in: the one whose arguments end first after its operand.
const Call* isinstanceCall(const SourceModel& model, const TypeCheck& check) {
  const Call* found = nullptr;
  for (const Call& call : model.calls) {
    if (call.spelling != "isinstance" || !call.hasArgumentList || call.arguments.size() != 2) continue;
    if (call.nextArgumentAt <= check.operand.end) continue;
    if (!found || call.nextArgumentAt < found->nextArgumentAt) found = &call;
  }
  return found;
}

// `isinstance(x, dist.ProcessGroupNCCL)` -> `_is_nccl_backend(x)`; with a tuple of classes,
// `_is_nccl_backend(x, (A, dist.ProcessGroupNCCL))`, true for A too. The class goes only where
// nothing but blanks can stand beside it: no comment between the two arguments.
std::optional<Fix> helperCall(const SourceModel& model, const TypeCheck& check) {
  if (!check.callee.known() || !check.operand.known()) return std::nullopt;
  Fix fix{"Recognise every NCCL backend, by class or by name(), in one helper",
          FixSafety::Unsafe,
          {{check.callee, pythonNcclBackendHelperName()}, definitionEdit(pythonNcclBackendHelper())}};
  const Call* call = isinstanceCall(model, check);
  if (!call || call->arguments[1].isSequenceLiteral || !call->arguments[0].keyword.empty()) return fix;
  int from = call->arguments[0].where.line, to = call->arguments[1].where.line;
  for (const Comment& c : model.comments)
    if (c.line >= from && c.line < to) return fix;
  fix.edits.push_back({{check.operand.end, call->nextArgumentAt}, ""});
  return fix;
}

std::optional<Fix> fixFor(const SourceModel& model, const TypeCheck& check) {
  if (check.kind == TypeCheck::Kind::Isinstance) return helperCall(model, check);
  if (check.kind != TypeCheck::Kind::CheckedCast && check.kind != TypeCheck::Kind::UncheckedCast) return std::nullopt;
  if (!check.callee.known() || !check.operand.known()) return std::nullopt;
  // A test for a project's subclass asks about more than NCCL: no name answers it.
  // An unchecked cast of a raw pointer may start from a `void*`, which neither dynamic_cast nor
  // getBackendName() takes: only an operand known to be an object's pointer is rewritten. A smart
  // pointer cast (static_pointer_cast) takes a smart pointer to a class.
  if (check.kind == TypeCheck::Kind::UncheckedCast && check.toPointer && !check.operandIsObjectPointer) {
    return std::nullopt;
  }
  if (check.nullTest.known() && check.downcastTo.empty()) return helperTest(model, check);
  if (check.kind == TypeCheck::Kind::UncheckedCast) return checkedCast(check);
  return std::nullopt;  // a checked cast already gives null; what the code does then is its own
}

class LegacyClassCheck final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    for (const TypeCheck& check : model.typeChecks) {
      if (!kLegacyClass.contains(check.qualifiedName)) continue;
      // A class deriving from the legacy one tests nothing that turns false: torch 2.15 still has
      // the legacy class (nccl-legacy), so the subclass builds and behaves as before. What can go
      // wrong is a backend cast to it (reported at the cast) or an object of it built by
      // the project, which is the legacy backend whatever backend="nccl" resolves to (NM204's).
      if (check.kind == TypeCheck::Kind::Subclass) continue;
      if (!check.downcastTo.empty()) {
        Finding f = finding(model, check.where,
                              check.spelling + " downcasts a ProcessGroupNCCL to " + check.downcastTo +
                                  ", which the object is no longer under the rewritten backend: backend=\"nccl\" builds "
                                  "c10d::nccl2::ProcessGroupNCCL in torch 2.15, not " + check.downcastTo + ", so the cast " +
                                  consequence(check));
        f.fix = fixFor(model, check);
        out.push_back(std::move(f));
        continue;
      }
      Finding f = finding(model, check.where,
                          describe(check) + " " + consequence(check) +
                              ": backend=\"nccl\" builds ProcessGroupNCCL2 (c10d::nccl2::ProcessGroupNCCL) "
                              "in torch 2.15, which does not derive from ProcessGroupNCCL");
      f.fix = fixFor(model, check);
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
             "`--fix --unsafe-fixes` rewrites what is mechanical, through one helper per file, put once after its "
             "imports or includes (named anew where the file uses the name for something else). Python: "
             "isinstance(x, ...ProcessGroupNCCL) becomes _is_nccl_backend(x) (with a tuple of classes, "
             "_is_nccl_backend(x, (A, ...)), true for A too), true for torch's ProcessGroupNCCL, ProcessGroupNCCL2 "
             "and ProcessGroupNCCLLazy where torch has them (looked up with getattr when it runs, so the module "
             "imports on any torch) and for a Backend whose name() is \"nccl\", \"nccl2\" or \"nccl-lazy\" (the "
             "toolkit's backends); the lines it writes keep to the project's line length (ruff, black or flake8 "
             "configuration, else 88) as ruff format writes them. C++: a cast whose result is only tested for null "
             "(`if (dynamic_cast<c10d::ProcessGroupNCCL*>(b))`, `!cast`, `cast != nullptr`, or `auto* p = cast;` "
             "with p only tested) becomes asNcclBackend(b), the backend where its getBackendName() is one of the "
             "same names and null elsewhere, which needs no nccl2 header and compiles against every torch; an "
             "unchecked cast whose result is used (static_cast, static_pointer_cast, a C-style cast through void* "
             "to a subclass) is checked first, so the rewritten backend's object gives null instead of being "
             "reinterpreted. The fixes are unsafe: code behind a test now runs for the rewritten backend, whose class "
             "lacks the legacy one's methods, and a cast that gave a pointer now gives null where the code may not "
             "test it; a cast used as a value through dynamic_cast and type() identity are left to you. A class "
             "deriving from the legacy one is no finding: it still builds on torch 2.15; a cast to it is one.",
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
