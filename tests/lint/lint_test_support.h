// Pieces several lint tests share: a rule that finds nothing (the prefilter and the docstring
// pass choose rules by their codes alone) and the text of the regions a parse keeps.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "nccl_migrate/lint/linter.h"
#include "python/python_frontend.h"

namespace nccl_migrate::lint::testing {

class StubRule final : public Rule {
 public:
  explicit StubRule(std::string code = "R0") { info_.code = std::move(code); }
  const RuleInfo& info() const override { return info_; }
  void check(const SourceModel&, const RuleContext&, std::vector<Finding>&) const override {}

 private:
  RuleInfo info_;
};

inline std::vector<std::string> regionTexts(const std::string& source, const std::vector<ParseRegion>& regions) {
  std::vector<std::string> out;
  for (const ParseRegion& r : regions) out.push_back(source.substr(r.begin, r.end - r.begin));
  return out;
}

}  // namespace nccl_migrate::lint::testing
