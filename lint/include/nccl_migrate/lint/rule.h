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
  // Words of which at least one must occur in a file for the rule to fire there; the linter
  // skips parsing files that contain none of any enabled rule's words.
  std::vector<std::string> triggers;
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
