// NM201 end to end through the real frontends: tree-sitter for Python, Clang's lexer for C++.
#include <gtest/gtest.h>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {
namespace {

std::vector<Finding> lint(const std::string& name, const std::string& text) {
  return lintSource(name, text).findings;
}

std::vector<int> linesOf(const std::vector<Finding>& findings) {
  std::vector<int> lines;
  for (const Finding& f : findings) {
    EXPECT_EQ(f.code, "NM201");
    lines.push_back(f.where.line);
  }
  return lines;
}

TEST(LegacyClassCheckPython, EverySpellingOfTheLegacyClass) {
  const std::string source = R"SRC(import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from torch.distributed import ProcessGroupNCCL as PG
from torch._C._distributed_c10d import ProcessGroupNCCL
Alias = dist.ProcessGroupNCCL
isinstance(pg, dist.ProcessGroupNCCL)
isinstance(pg, torch.distributed.ProcessGroupNCCL)
isinstance(pg, (dist.ProcessGroupGloo, PG))
isinstance(pg, c10d.ProcessGroupNCCL)
isinstance(pg, torch._C._distributed_c10d.ProcessGroupNCCL)
isinstance(pg, ProcessGroupNCCL)
isinstance(pg, Alias)
type(pg) is dist.ProcessGroupNCCL
class Mine(dist.ProcessGroupNCCL): pass
)SRC";
  EXPECT_EQ(linesOf(lint("job.py", source)), (std::vector<int>{7, 8, 9, 10, 11, 12, 13, 14, 15}));
}

TEST(LegacyClassCheckPython, ReportsTheColumnOfTheClassExpression) {
  auto findings = lint("job.py", "import torch.distributed as dist\nok = isinstance(pg, dist.ProcessGroupNCCL)\n");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].where.line, 2);
  EXPECT_EQ(findings[0].where.column, 21);
  EXPECT_NE(findings[0].message.find("isinstance check against dist.ProcessGroupNCCL"), std::string::npos);
}

TEST(LegacyClassCheckPython, QuietOnTheNewClassOwnClassesCommentsAndStrings) {
  const std::string source = R"SRC(import torch.distributed as dist
import mylib
isinstance(pg, dist.ProcessGroupNCCL2)
isinstance(pg, mylib.ProcessGroupNCCL)
# isinstance(pg, dist.ProcessGroupNCCL)
doc = "isinstance(pg, dist.ProcessGroupNCCL)"
class ProcessGroupNCCL: pass
isinstance(pg, ProcessGroupNCCL)
)SRC";
  EXPECT_TRUE(lint("job.py", source).empty());
}

TEST(LegacyClassCheckPython, ShadowedIsinstanceIsNotTheBuiltin) {
  const std::string source = "import torch.distributed as dist\ndef isinstance(a, b): pass\nisinstance(pg, dist.ProcessGroupNCCL)\n";
  EXPECT_TRUE(lint("job.py", source).empty());
}

TEST(LegacyClassCheckPython, FindingsSurviveASyntaxError) {
  const std::string source = R"SRC(import torch.distributed as dist
def broken(:
    pass
isinstance(pg, dist.ProcessGroupNCCL)
)SRC";
  EXPECT_EQ(linesOf(lint("job.py", source)), (std::vector<int>{4}));
}

TEST(LegacyClassCheckCpp, CastsAndSubclassing) {
  const std::string source = R"SRC(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
namespace d = c10d;
void f(c10d::Backend* b, c10::intrusive_ptr<c10d::Backend> p, std::shared_ptr<c10d::Backend> s) {
  auto* a = dynamic_cast<c10d::ProcessGroupNCCL*>(b);
  auto c = c10::dynamic_intrusive_pointer_cast<::c10d::ProcessGroupNCCL>(p);
  auto e = std::dynamic_pointer_cast<const d::ProcessGroupNCCL>(s);
  auto g = std::static_pointer_cast<c10d::ProcessGroupNCCL>(s);
}
class Mine : public c10d::ProcessGroupNCCL {};
)SRC";
  EXPECT_EQ(linesOf(lint("x.cpp", source)), (std::vector<int>{4, 5, 6, 7, 9}));
}

TEST(LegacyClassCheckCpp, UnqualifiedNameInsideC10dNamespace) {
  const std::string source = "using namespace c10d;\nvoid f(Backend* b) { auto* p = dynamic_cast<ProcessGroupNCCL*>(b); }\n";
  auto findings = lint("x.cu", source);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].where.line, 2);
  EXPECT_EQ(findings[0].where.column, 45);
}

TEST(LegacyClassCheckCpp, QuietOnTheNewClassCommentsStringsAndOwnClasses) {
  const std::string source = R"SRC(// dynamic_cast<c10d::ProcessGroupNCCL*>(b)
/* std::dynamic_pointer_cast<c10d::ProcessGroupNCCL>(s) */
const char* s = "dynamic_cast<c10d::ProcessGroupNCCL*>(b)";
auto* n = dynamic_cast<c10d::nccl2::ProcessGroupNCCL*>(b);
class ProcessGroupNCCL {};
auto* m = dynamic_cast<ProcessGroupNCCL*>(b);
)SRC";
  EXPECT_TRUE(lint("x.cc", source).empty());
}

TEST(Linter, PrefilterSkipsFilesWithoutTriggerWords) {
  LintReport report = lintSource("x.py", "import torch\nprint(1)\n");
  EXPECT_EQ(report.filesScanned, 1);
  EXPECT_EQ(report.filesParsed, 0);
}

TEST(Linter, UnknownExtensionIsAnError) {
  EXPECT_THROW(lintSource("notes.txt", "ProcessGroupNCCL"), std::invalid_argument);
}

TEST(Linter, MissingPathIsAnError) {
  EXPECT_THROW(lintPaths({"/nonexistent/nccl-migrate-test"}), std::invalid_argument);
}

}  // namespace
}  // namespace nccl_migrate::lint
