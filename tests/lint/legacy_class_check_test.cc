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
)SRC";
  EXPECT_EQ(linesOf(lint("job.py", source)), (std::vector<int>{7, 8, 9, 10, 11, 12, 13, 14}));
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

TEST(LegacyClassCheckCpp, Casts) {
  const std::string source = R"SRC(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
namespace d = c10d;
void f(c10d::Backend* b, c10::intrusive_ptr<c10d::Backend> p, std::shared_ptr<c10d::Backend> s) {
  auto* a = dynamic_cast<c10d::ProcessGroupNCCL*>(b);
  auto c = c10::dynamic_intrusive_pointer_cast<::c10d::ProcessGroupNCCL>(p);
  auto e = std::dynamic_pointer_cast<const d::ProcessGroupNCCL>(s);
  auto g = std::static_pointer_cast<c10d::ProcessGroupNCCL>(s);
}
)SRC";
  EXPECT_EQ(linesOf(lint("x.cpp", source)), (std::vector<int>{4, 5, 6, 7}));
}

// A class deriving from the legacy one checks nothing: an object of it is the legacy backend
// (built by the project, or reached through a cast, which is reported where it is written).
TEST(LegacyClassCheck, ASubclassDeclarationIsNoFinding) {
  EXPECT_TRUE(lint("x.cc", "class Mine : public c10d::ProcessGroupNCCL {};\nstruct S : c10d::ProcessGroupNCCL {};\n").empty());
  EXPECT_TRUE(lint("job.py", "import torch.distributed as dist\nclass Mine(dist.ProcessGroupNCCL): pass\n").empty());
  // The subclass is still known, so a cast of a backend to it is reported.
  EXPECT_EQ(linesOf(lint("y.cc", "class Mine : public c10d::ProcessGroupNCCL {};\nauto* m = static_cast<Mine*>(b);\n")),
            (std::vector<int>{2}));
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

// The C/C++ frontend reads a file as torch 2.15 compiles it (the fixture
// NM201_torch_version_branches.cc holds the usual guards); what it cannot decide, it reads.
TEST(TorchVersionBranches, AVersionMacroTheFileRedefinesIsNotDecided) {
  const std::string redefined = R"SRC(#undef TORCH_VERSION_MAJOR
#define TORCH_VERSION_MAJOR 1
#if TORCH_VERSION_MAJOR < 2
auto* a = static_cast<c10d::ProcessGroupNCCL*>(b);
#endif
)SRC";
  EXPECT_EQ(linesOf(lint("x.cc", redefined)), (std::vector<int>{4}));
  // A definition in a branch torch 2.15 never compiles changes nothing.
  const std::string fallback = R"SRC(#ifndef TORCH_VERSION_MAJOR
#define TORCH_VERSION_MAJOR 1
#endif
#if TORCH_VERSION_MAJOR < 2
auto* a = static_cast<c10d::ProcessGroupNCCL*>(b);
#endif
)SRC";
  EXPECT_TRUE(lint("x.cc", fallback).empty());
}

TEST(TorchVersionBranches, UnbalancedDirectivesDropNothingUndecided) {
  const std::string source = R"SRC(#endif
#else
auto* a = static_cast<c10d::ProcessGroupNCCL*>(b);
#if TORCH_VERSION_MAJOR >= 2
auto* c = static_cast<c10d::ProcessGroupNCCL*>(b);
#else
auto* d = static_cast<c10d::ProcessGroupNCCL*>(b);
)SRC";
  EXPECT_EQ(linesOf(lint("x.cc", source)), (std::vector<int>{3, 5}));
}

TEST(TorchVersionBranches, ConstantConditionsAreDecidedToo) {
  const std::string source = R"SRC(#if 0
auto* a = static_cast<c10d::ProcessGroupNCCL*>(b);
#elif 0x10 > 2 * 8 - 1 && !defined(TORCH_VERSION)
auto* c = static_cast<c10d::ProcessGroupNCCL*>(b);
#elif (TORCH_VERSION_MAJOR << 8 | TORCH_VERSION_MINOR) >= 0x20F ? 1 : 0
auto* d = static_cast<c10d::ProcessGroupNCCL*>(b);
#endif
)SRC";
  EXPECT_EQ(linesOf(lint("x.cc", source)), (std::vector<int>{6}));
}

// Nesting is never walked without bound: a condition nested too deep to read is undecided.
TEST(TorchVersionBranches, DeepNestingIsBoundedAndUndecided) {
  std::string parens = "#if " + std::string(100000, '(') + "TORCH_VERSION_MAJOR < 2" + std::string(100000, ')') +
                       "\nauto* a = static_cast<c10d::ProcessGroupNCCL*>(b);\n#endif\n";
  EXPECT_EQ(linesOf(lint("x.cc", parens)), (std::vector<int>{2}));
  std::string nots = "#if " + std::string(100001, '!') + "(TORCH_VERSION_MAJOR < 2)\nauto* a = static_cast<c10d::ProcessGroupNCCL*>(b);\n#endif\n";
  EXPECT_EQ(linesOf(lint("x.cc", nots)), (std::vector<int>{2}));
  std::string blocks;
  for (int i = 0; i < 20000; ++i) blocks += "#if TORCH_VERSION_MAJOR >= 2\n";
  blocks += "auto* a = static_cast<c10d::ProcessGroupNCCL*>(b);\n";
  for (int i = 0; i < 20000; ++i) blocks += "#endif\n";
  EXPECT_EQ(linesOf(lint("x.cc", blocks)), (std::vector<int>{20001}));
}

// A suppression in code torch 2.15 never compiles is not read either, so it is no unused one.
TEST(TorchVersionBranches, SuppressionsInDroppedBranchesAreNotUnused) {
  const std::string source = R"SRC(#if TORCH_VERSION_MAJOR < 2
auto* a = static_cast<c10d::ProcessGroupNCCL*>(b);  // NOLINT(NM201)
#endif
)SRC";
  for (const Finding& f : lint("x.cc", source)) ADD_FAILURE() << f.code << " at line " << f.where.line << ": " << f.message;
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
