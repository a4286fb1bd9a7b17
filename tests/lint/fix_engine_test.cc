// The fix engine: a fix goes in whole or not at all, an edit two findings share is applied once,
// a fix that would break the file's syntax is not written, and diffs show removed lines.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <stdlib.h>

#include "nccl_migrate/lint/fixes.h"

namespace nccl_migrate::lint {
namespace {

Finding withFix(std::vector<Edit> edits) {
  Finding f;
  f.path = "x.py";
  f.code = "NM999";
  f.fix = Fix{"test", FixSafety::Safe, std::move(edits)};
  return f;
}

TEST(FixEngine, AFixIsAppliedWholeOrNotAtAll) {
  const std::string text = "abcdef";
  Finding first = withFix({{{1, 3}, "X"}});
  Finding overlapping = withFix({{{5, 6}, "Y"}, {{2, 4}, "Z"}});  // its second edit overlaps the first fix
  EXPECT_EQ(applyFixes(text, {&first, &overlapping}), "aXdef");
}

TEST(FixEngine, AnEditTwoFindingsShareIsAppliedOnce) {
  Finding a = withFix({{{0, 10}, "check"}});
  Finding b = withFix({{{0, 10}, "check"}});
  EXPECT_EQ(applyFixes("isinstance(x, (A, B))", {&a, &b}), "check(x, (A, B))");
}

TEST(FixEngine, InsertionsAtOnePointDoNotBothGo) {
  Finding a = withFix({{{0, 0}, "a"}});
  Finding b = withFix({{{0, 0}, "b"}});
  EXPECT_EQ(applyFixes("x", {&a, &b}), "ax");
}

// Writes `text` to `name` in a folder of this test's own, runs fixFiles with `fix` on it, and
// returns what the file holds afterwards; `warnings` gets what fixFiles printed.
std::string fixedOnDisk(const std::string& name, const std::string& text, Finding fix, std::string& warnings) {
  std::string pattern = (std::filesystem::temp_directory_path() / "nccl_migrate_fix_engine_XXXXXX").string();
  std::filesystem::path dir = mkdtemp(pattern.data());
  std::filesystem::path file = dir / name;
  std::ofstream(file) << text;
  fix.path = file.string();
  std::ostringstream out;
  fixFiles({&fix}, out);
  warnings = out.str();
  std::stringstream back;
  back << std::ifstream(file).rdbuf();
  std::filesystem::remove_all(dir);
  return back.str();
}

TEST(FixEngine, AFixThatBreaksPythonIsNotWritten) {
  const std::string text = "if ok(x):\n    pass\n";
  std::string warnings;
  EXPECT_EQ(fixedOnDisk("job.py", text, withFix({{{0, 2}, "while ("}}), warnings), text);
  EXPECT_NE(warnings.find("would not parse as Python"), std::string::npos) << warnings;
}

TEST(FixEngine, AFixThatUnbalancesCppIsNotWritten) {
  const std::string text = "int f() { return g(1); }\n";
  std::string warnings;
  EXPECT_EQ(fixedOnDisk("x.cc", text, withFix({{{17, 19}, "g(("}}), warnings), text);
  EXPECT_NE(warnings.find("brackets would not balance"), std::string::npos) << warnings;
}

TEST(FixEngine, DiffShowsRemovedLinesWithContext) {
  std::string diff = unifiedDiff("job.sh", "a\nb\nexport X=0\nc\n", "a\nb\nc\n");
  EXPECT_EQ(diff, "--- job.sh\n+++ job.sh\n@@ -1,4 +1,3 @@\n a\n b\n-export X=0\n c\n");
}

}  // namespace
}  // namespace nccl_migrate::lint
