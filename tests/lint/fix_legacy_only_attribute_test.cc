// NM203 offers no fix: skipping a legacy-only call where the backend lacks it is right only where
// torch shows the call does nothing on the rewritten backend, and torch shows the opposite for
// perform_nocolor_split (a split every rank of the parent must make). The finding says what to do.
#include <gtest/gtest.h>

#include <string>

#include "nccl_migrate/lint/fixes.h"
#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {
namespace {

TEST(FixLegacyOnlyAttribute, NoCallIsSkippedSilently) {
  const std::string text =
      "b = pg._get_backend(dev)\n"
      "b.perform_nocolor_split(dev)  # warm the split\n"
      "b._group_start()\n"
      "b._group_end()\n"
      "p = b._comm_ptr()\n";
  LintReport report = lintSource("job.py", text);
  int reported = 0;
  for (const Finding& f : report.findings) {
    if (f.code != "NM203") continue;
    ++reported;
    EXPECT_FALSE(f.fix.has_value()) << f.message;
    EXPECT_NE(f.message.find("hasattr"), std::string::npos) << f.message;  // what to do instead
  }
  EXPECT_EQ(reported, 4);
  EXPECT_EQ(applyFixes(text, applicableFixes(report, FixSafety::Unsafe)), text);
  EXPECT_EQ(findRule("NM203")->info().fixSafety, FixSafety::None);
}

// What the rule's documentation cites for declining: torch's own reason the call must run.
TEST(FixLegacyOnlyAttribute, TheRuleSaysWhyThereIsNoFix) {
  const std::string& why = findRule("NM203")->info().fix;
  EXPECT_NE(why.find("No fix is offered"), std::string::npos);
  EXPECT_NE(why.find("distributed_c10d.py"), std::string::npos);
  EXPECT_NE(why.find("performNocolorSplit"), std::string::npos);
}

// Code an earlier version's fix wrote (`getattr(b, "perform_nocolor_split", lambda ...)(d)`)
// guards its own call only: another use in the file is still reported.
TEST(FixLegacyOnlyAttribute, AnEarlierFixHidesNoOtherUse) {
  const std::string text =
      "b = pg._get_backend(dev)\n"
      "getattr(b, \"perform_nocolor_split\", lambda *args, **kwargs: None)(dev)\n"
      "split = b.perform_nocolor_split\n";
  int left = 0;
  for (const Finding& f : lintSource("job.py", text).findings) left += f.code == "NM203";
  EXPECT_EQ(left, 1);
}

}  // namespace
}  // namespace nccl_migrate::lint
