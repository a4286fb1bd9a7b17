// NM203's fix from the ranges the Python frontend records for an attribute (built here as the
// frontend fills them): a call of perform_nocolor_split becomes a no-op where it is missing.
#include <gtest/gtest.h>

#include <string>

#include "engine/fix_check.h"
#include "nccl_migrate/lint/fixes.h"
#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {
namespace {

std::vector<Finding> check(const SourceModel& model) {
  LintConfig config;
  RuleContext context{config};
  std::vector<Finding> findings;
  findRule("NM203")->check(model, context, findings);
  return findings;
}

AttributeUse use(const std::string& text, const std::string& object, const std::string& name, bool called) {
  size_t begin = text.find(object);
  AttributeUse u{name, object, {1, static_cast<int>(begin + object.size() + 2)}};
  u.object = {begin, begin + object.size()};
  u.dotName = {begin + object.size(), text.find(name, begin) + name.size()};
  u.called = called;
  return u;
}

TEST(FixLegacyOnlyAttribute, ACallOfTheHintBecomesANoOpWhereItIsMissing) {
  const std::string text = "pg._get_backend(dev).perform_nocolor_split(dev)  # warm the split\n";
  SourceModel model;
  model.path = "job.py";
  model.attributes.push_back(use(text, "pg._get_backend(dev)", "perform_nocolor_split", true));
  std::vector<Finding> findings = check(model);
  ASSERT_EQ(findings.size(), 1u);
  ASSERT_TRUE(findings[0].fix.has_value());
  std::string out = applyFixes(text, {&findings[0]});
  EXPECT_EQ(out, "getattr(pg._get_backend(dev), \"perform_nocolor_split\", lambda *args, **kwargs: None)(dev)  # warm the split\n");
  EXPECT_FALSE(fixBreaksSyntax("job.py", text, out).has_value());
}

TEST(FixLegacyOnlyAttribute, OtherAttributesAndReadsHaveNoFix) {
  const std::string text = "b._group_start()\nf = b.perform_nocolor_split\n";
  SourceModel model;
  model.path = "job.py";
  model.attributes.push_back(use(text, "b", "_group_start", true));
  model.attributes.push_back(use(text, "b", "perform_nocolor_split", false));
  for (const Finding& f : check(model)) EXPECT_FALSE(f.fix.has_value()) << f.message;
}

// A call whose `.name` stands apart from its object (a line break, a comment between them) is
// left as it is: the rewritten span would take what stands between with it. Through the engine.
TEST(FixLegacyOnlyAttribute, ACommentOrBreakBeforeTheDotKeepsTheCall) {
  const std::string text =
      "b = (pg._get_backend(dev)  # the NCCL backend\n"
      "     .perform_nocolor_split(dev))\n";
  LintReport report = lintSource("job.py", text);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].code, "NM203");
  EXPECT_FALSE(report.findings[0].fix.has_value());
}

// The getattr the fix writes guards its own call only: a use of the attribute the fix could not
// rewrite (a read, not a call) is still reported after the fix, through the real engine.
TEST(FixLegacyOnlyAttribute, AFixedCallHidesNoOtherUse) {
  const std::string text =
      "b = pg._get_backend(dev)\n"
      "b.perform_nocolor_split(dev)\n"
      "split = b.perform_nocolor_split\n";
  LintReport first = lintSource("job.py", text);
  std::string fixed = applyFixes(text, applicableFixes(first, FixSafety::Unsafe));
  EXPECT_NE(fixed, text);
  int left = 0;
  for (const Finding& f : lintSource("job.py", fixed).findings) left += f.code == "NM203";
  EXPECT_EQ(left, 1) << fixed;
}

}  // namespace
}  // namespace nccl_migrate::lint
