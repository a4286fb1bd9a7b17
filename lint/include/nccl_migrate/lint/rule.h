// A lint rule: its metadata next to its logic. Rules only report; suppressions, config and
// output formats are handled centrally by the linter.
#pragma once

#include <string>
#include <vector>

#include "nccl_migrate/lint/source_model.h"

namespace nccl_migrate::lint {

struct RuleInfo {
  std::string code;       // "NM201"
  std::string slug;       // "legacy-class-check"
  std::string summary;    // one line
  std::string rationale;  // why it breaks under the rewritten backend
  std::string example;    // code that triggers it
  std::string fix;        // what to do instead
  std::vector<Language> languages;
  bool enabledByDefault = true;
  // Words of which at least one must occur in a file for the rule to fire there; the linter
  // skips parsing files that contain none of any enabled rule's words.
  std::vector<std::string> triggers;
};

struct Finding {
  std::string path;
  Location where;
  std::string code;
  std::string message;
};

class Rule {
 public:
  virtual ~Rule() = default;
  virtual const RuleInfo& info() const = 0;
  virtual void check(const SourceModel& model, std::vector<Finding>& out) const = 0;

 protected:
  Finding finding(const SourceModel& model, Location where, std::string message) const {
    return Finding{model.path, where, info().code, std::move(message)};
  }
};

// Every rule the linter knows, in code order.
const std::vector<const Rule*>& allRules();

}  // namespace nccl_migrate::lint
