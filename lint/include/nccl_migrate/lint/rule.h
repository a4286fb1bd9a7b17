// A lint rule: its metadata next to its logic. Rules only report; suppressions, config, baselines
// and output formats are handled centrally by the linter.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nccl_migrate/lint/config.h"
#include "nccl_migrate/lint/source_model.h"

namespace nccl_migrate::lint {

// How a rule's fix may be applied, in ruff's terms: a safe fix keeps the program's meaning on
// every torch version and `--fix` applies it; an unsafe one needs `--unsafe-fixes`.
enum class FixSafety { None, Safe, Unsafe };

// Text a file must contain for a rule to be able to report there. Words match as tokens: where a
// word starts or ends with an identifier character, the text may not continue the identifier
// there ("send(" matches `dist.send(` but not `resend(`; "new_group" not `new_groups`). A `*` at
// either end lets the identifier continue ("*_multigpu" matches `all_reduce_multigpu`); `#`
// stands for one digit ("cuda:#").
struct Trigger {
  std::vector<std::string> anyOf;     // one of these words ...
  std::vector<std::string> andAnyOf;  // ... and, when given, one of these too ...
  // ... and, when given, a mention of this Python module: its last name anywhere in the file
  // (`import torch.distributed`, `from torch._C import _distributed_c10d`) or the first name of a
  // module declared equivalent to it (equivalent-modules, built-in ones included: `deepspeed`). For rules that report
  // only names qualified under the module, which a file that never names it cannot bind.
  std::string module;
};

struct RuleInfo {
  std::string code;       // "NM201"
  std::string slug;       // "legacy-class-check"
  std::string summary;    // one line
  std::string rationale;  // why it breaks or costs more under the rewritten backend
  std::string example;    // code that triggers it
  std::string fix;        // what to do instead
  FixSafety fixSafety = FixSafety::None;
  std::vector<Language> languages;
  bool enabledByDefault = true;
  // What a file must contain for the rule to report there, as alternatives: the linter scans each
  // file once for every enabled rule's triggers and parses it only for the rules one matches.
  // A trigger names what every finding of the rule needs, never more.
  std::vector<Trigger> triggers;
  // Python files are parsed only in their top-level statements and in the functions and classes
  // that hold a word of a triggered rule (its triggers' words, or these): a rule that reads facts
  // from elsewhere in the file (the process selecting its GPU, a string naming nccl-lazy) names
  // their words here.
  std::vector<std::string> contextWords;
};

struct Edit {
  Range range;
  std::string replacement;
};

struct Fix {
  std::string title;
  FixSafety safety = FixSafety::Unsafe;
  std::vector<Edit> edits;
};

struct Finding {
  std::string path;
  Location where;
  std::string code;
  std::string message;
  std::optional<Fix> fix;
  std::string fingerprint;  // stable across runs and line moves; set by the linter
};

// What a rule may read besides the model: the user's configuration.
struct RuleContext {
  const LintConfig& config;
};

class Rule {
 public:
  virtual ~Rule() = default;
  virtual const RuleInfo& info() const = 0;
  virtual void check(const SourceModel& model, const RuleContext& context, std::vector<Finding>& out) const = 0;

 protected:
  Finding finding(const SourceModel& model, Location where, std::string message) const {
    return Finding{model.path, where, info().code, std::move(message), std::nullopt, {}};
  }
};

// Every rule the linter knows, in code order.
const std::vector<const Rule*>& allRules();
// The rule with this code or slug, or null.
const Rule* findRule(const std::string& codeOrSlug);

}  // namespace nccl_migrate::lint
