// Inline suppressions, handled once for every language: `# noqa: NM201`, `# noqa-next-line: NM201`,
// file-wide `# nccl-migrate: noqa: NM301`, `// NOLINT(NM201)`, `// NOLINTNEXTLINE(NM201)`.
// Codes may be written as codes or slugs; other tools' codes in the same comment are left alone.
#pragma once

#include <string>
#include <vector>

#include "nccl_migrate/lint/config.h"
#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::lint {

// One suppression comment: the line it silences and the codes it names.
struct Suppression {
  int commentLine = 0;
  int appliesTo = 0;               // the line silenced; 0 = the whole file
  std::vector<std::string> codes;  // our codes only; empty = every rule (bare noqa / NOLINT)
  std::vector<bool> used;
};

// The suppression comments of one file, and which of their codes silenced something.
class Suppressions {
 public:
  explicit Suppressions(const SourceModel& model);

  // Drops the findings a suppression silences; returns how many.
  int removeSuppressed(std::vector<Finding>& findings);

  // NM001 findings: each code of an enabled rule in a suppression that has silenced nothing so far.
  std::vector<Finding> unused(const LintConfig& config) const;

 private:
  static bool suppresses(Suppression& s, const Finding& f);

  std::string path_;
  std::vector<Suppression> list_;
};

}  // namespace nccl_migrate::lint
