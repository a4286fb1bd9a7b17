// NM202 backend-name-comparison: code that recognises the NCCL backend by the name "nccl" alone.
#include <algorithm>
#include <string>

#include "nccl_migrate/lint/rule.h"
#include "registry.h"
#include "torch_names.h"

namespace nccl_migrate::lint {
namespace {

constexpr const char* kNames = "(\"nccl\", \"nccl2\", \"nccl-lazy\")";

// The first group this file creates under a backend string get_backend never reports as "nccl"
// (torch 2.15 returns the string a group was created with); null when every group here is made as
// plain "nccl", or its backend is not known. What the file knows: groups made in other files of the
// project are not seen.
const Argument* otherNcclBackend(const SourceModel& model) {
  for (const Call& call : model.calls) {
    const std::string& q = call.qualifiedName;
    const Argument* backend = nullptr;
    if (isDistributed(q, "init_process_group")) backend = call.argument("backend", 0);
    else if (isDistributed(q, "new_group")) backend = call.argument("backend", 2);
    else if (isDistributed(q, "new_subgroups") || isDistributed(q, "new_subgroups_by_enumeration")) backend = call.keyword("backend");
    if (backend && backend->stringValue && namesNcclOtherThanPlain(*backend->stringValue)) return backend;
  }
  return nullptr;
}

bool namesOnlyLegacyNccl(const std::vector<std::string>& literals) {
  bool nccl = std::find(literals.begin(), literals.end(), "nccl") != literals.end();
  bool nccl2 = std::find(literals.begin(), literals.end(), "nccl2") != literals.end();
  return nccl && !nccl2;
}

class BackendNameComparison final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    const Argument* otherBackend = nullptr;
    bool otherBackendKnown = false;
    for (const StringComparison& cmp : model.comparisons) {
      if (!namesOnlyLegacyNccl(cmp.literals)) continue;
      bool backendName = cmp.subjectCallee.ends_with(".name") && !cmp.subjectCallHasArguments;
      bool getBackend = isDistributed(cmp.subjectCallee, "get_backend");
      if (!backendName && !getBackend) continue;
      if (backendName) {
        Finding f = finding(model, cmp.where,
                            cmp.subjectText + " is \"nccl2\" for the backend torch 2.15 builds for \"nccl\", so this "
                            "comparison no longer recognises it; compare against " + std::string(kNames));
        if (cmp.literalSide.end > cmp.literalSide.begin && (cmp.op == "==" || cmp.op == "!=")) {
          std::string op = cmp.op == "==" ? " in " : " not in ";
          f.fix = Fix{"Compare against every NCCL backend name", FixSafety::Safe,
                      {{cmp.literalSide, op + kNames}}};
        }
        out.push_back(std::move(f));
      } else {
        // get_backend returns the name a group was created with: "nccl" stays "nccl", so only a
        // file that also creates groups under another NCCL spelling can miss them.
        if (!otherBackendKnown) {
          otherBackend = otherNcclBackend(model);
          otherBackendKnown = true;
        }
        if (!otherBackend) continue;
        out.push_back(finding(model, cmp.where,
                              cmp.subjectText + " returns the backend string the group was created with, and this file "
                              "creates groups as \"" + *otherBackend->stringValue + "\" (line " +
                              std::to_string(otherBackend->where.line) + "), which never equals \"nccl\"; check "
                              "group._get_backend(torch.device(\"cuda\")).name() in " + std::string(kNames)));
      }
    }
  }

 private:
  RuleInfo info_{
      .code = "NM202",
      .slug = "backend-name-comparison",
      .summary = "Backend recognised by comparing its name with \"nccl\" alone",
      .rationale = "A group created with backend \"nccl\" that resolves to torch 2.15's rewritten backend reports "
                   "name() == \"nccl2\"; nccl-lazy reports \"nccl-lazy\". Code that tests name() == \"nccl\" silently "
                   "takes its non-NCCL branch. dist.get_backend() returns the string the group was created with: "
                   "\"nccl\" for groups created as \"nccl\", but a compound (\"cpu:gloo,cuda:nccl\") or another NCCL "
                   "name (\"nccl2\", \"nccl-lazy\") as given, so it is reported where the file creates groups so.",
      .example = "if pg._get_backend(torch.device(\"cuda\")).name() == \"nccl\": ...",
      .fix = "Test membership in (\"nccl\", \"nccl2\", \"nccl-lazy\"). The fix is safe: legacy backends still report "
             "\"nccl\", so the test keeps its result there and recognises the new backends.",
      .fixSafety = FixSafety::Safe,
      .languages = {Language::Python},
      .enabledByDefault = true,
      // The comparisons reported have a `.name()` call or get_backend for their subject: a file that
      // writes neither (most files naming "nccl" pass it to init_process_group) is not parsed for it.
      .triggers = {{.anyOf = {"\"nccl\"", "'nccl'"}, .andAnyOf = {".name", "name()", "get_backend"}}},
      // Groups created under other NCCL spellings make get_backend comparisons wrong.
      .contextWords = {"nccl2", "nccl-lazy", "nccl-legacy", "cuda:nccl", "cuda:NCCL"},
  };
};

}  // namespace

const Rule& backendNameComparisonRule() {
  static const BackendNameComparison rule;
  return rule;
}

}  // namespace nccl_migrate::lint
