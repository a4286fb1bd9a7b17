// NM201's fixes: C++ casts through the real lexer (and the AST tier), applied, applied again
// (nothing changes), still balanced; Python's isinstance rewrite from the range the frontend
// records for the word `isinstance`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/fix_check.h"
#include "nccl_migrate/lint/fixes.h"
#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {
namespace {

std::string fixed(const std::string& name, const std::string& text, const LintOptions& options = {}) {
  LintReport report = lintSource(name, text, options);
  return applyFixes(text, applicableFixes(report, FixSafety::Unsafe));
}

constexpr const char* kNameTest =
    "[](const auto& backend) { if (!backend) return false; const std::string name = backend->getBackendName(); "
    "return name == \"nccl\" || name == \"nccl2\" || name == \"nccl-lazy\"; }";

std::string nameTest(const std::string& operand) { return std::string(kNameTest) + "(" + operand + ")"; }

TEST(FixLegacyClassCheckCpp, TestsForNullBecomeNameTests) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
bool f(c10d::Backend* b, c10::intrusive_ptr<c10d::Backend> p, std::shared_ptr<c10d::Backend> s) {
  if (dynamic_cast<c10d::ProcessGroupNCCL*>(b)) return true;  // why: the NCCL path
  bool x = dynamic_cast<c10d::ProcessGroupNCCL*>(b) != nullptr;
  bool y = nullptr == c10::dynamic_intrusive_pointer_cast<c10d::ProcessGroupNCCL>(p);
  return x && y && !std::dynamic_pointer_cast<c10d::ProcessGroupNCCL>(s);
}
)";
  const std::string expected = std::string(R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
bool f(c10d::Backend* b, c10::intrusive_ptr<c10d::Backend> p, std::shared_ptr<c10d::Backend> s) {
  if ()") + nameTest("b") + R"() return true;  // why: the NCCL path
  bool x = )" + nameTest("b") + R"(;
  bool y = !)" + nameTest("p") + R"(;
  return x && y && !)" + nameTest("s") + R"(;
}
)";
  EXPECT_EQ(fixed("x.cc", source), expected);
}

TEST(FixLegacyClassCheckCpp, UncheckedCastsBecomeCheckedOnes) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
class Hack : public c10d::ProcessGroupNCCL {};
void f(c10d::ProcessGroup& pg, c10d::Backend* b, std::shared_ptr<c10d::Backend> s) {
  auto* hack = (Hack*)(void*)pg.getBackend(c10d::ProcessGroup::BackendType::NCCL).get();
  auto* legacy = static_cast<c10d::ProcessGroupNCCL*>(s.get());
  auto shared = std::static_pointer_cast<c10d::ProcessGroupNCCL>(s);
  auto* down = static_cast<Hack*>(s.get());
  auto* used = dynamic_cast<c10d::ProcessGroupNCCL*>(b);
}
)";
  const std::string expected = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
class Hack : public c10d::ProcessGroupNCCL {};
void f(c10d::ProcessGroup& pg, c10d::Backend* b, std::shared_ptr<c10d::Backend> s) {
  auto* hack = (Hack*)(void*)dynamic_cast<::c10d::ProcessGroupNCCL*>(pg.getBackend(c10d::ProcessGroup::BackendType::NCCL).get());
  auto* legacy = dynamic_cast<c10d::ProcessGroupNCCL*>(s.get());
  auto shared = std::dynamic_pointer_cast<c10d::ProcessGroupNCCL>(s);
  auto* down = static_cast<Hack*>(dynamic_cast<::c10d::ProcessGroupNCCL*>(s.get()));
  auto* used = dynamic_cast<c10d::ProcessGroupNCCL*>(b);
}
)";
  EXPECT_EQ(fixed("x.cc", source), expected);
}

// A cast from `void*` (or of a null constant) takes no dynamic_cast and has no getBackendName():
// such casts are reported but not rewritten, so the fixed file still compiles.
TEST(FixLegacyClassCheckCpp, CastsFromVoidPointersAreLeftAlone) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
struct Ctx { void* handle; };
void f(void* handle, const void *raw, void* const h2, void** pp, Ctx* ctx, c10d::Backend* backend) {
  auto* a = static_cast<c10d::ProcessGroupNCCL*>(handle);
  auto* b = reinterpret_cast<c10d::ProcessGroupNCCL*>(raw);
  auto* c = (c10d::ProcessGroupNCCL*)handle;
  auto* d = (c10d::ProcessGroupNCCL*)nullptr;
  if (static_cast<c10d::ProcessGroupNCCL*>(handle)) {}
  auto* e = static_cast<c10d::ProcessGroupNCCL*>(ctx->handle);
  auto* g = static_cast<c10d::ProcessGroupNCCL*>(h2);
  auto* h = static_cast<c10d::ProcessGroupNCCL*>(static_cast<void*>(backend));
  auto* i = static_cast<c10d::ProcessGroupNCCL*>(*pp);
  auto* j = reinterpret_cast<c10d::ProcessGroupNCCL*>((raw));
}
)";
  LintReport report = lintSource("x.cc", source);
  EXPECT_EQ(report.findings.size(), 10u);
  EXPECT_EQ(fixed("x.cc", source), source);
}

TEST(FixLegacyClassCheckCpp, ValuesOfCheckedCastsAndSubclassesAreLeftAlone) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
class Mine : public c10d::ProcessGroupNCCL {};
void f(c10d::Backend* b) {
  auto* p = dynamic_cast<c10d::ProcessGroupNCCL*>(b);
  if (auto* q = dynamic_cast<c10d::ProcessGroupNCCL*>(b)) q->getCommSplitCounter();
  if (dynamic_cast<c10d::ProcessGroupNCCL*>(b)->getCommSplitCounter()) {}
  auto& r = static_cast<Mine&>(*b);
  if (dynamic_cast<Mine*>(b)) {}
}
)";
  EXPECT_EQ(fixed("x.cc", source), source);
}

// A null test that guards a later cast to the class in the same statement keeps its cast: as a
// name test it would be true for the rewritten backend, whose object the later cast makes null.
TEST(FixLegacyClassCheckCpp, ANullTestGuardingAnotherCastStays) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
using PGN = c10d::ProcessGroupNCCL;
int f(c10d::Backend* b) {
  if (dynamic_cast<PGN*>(b) && dynamic_cast<PGN*>(b)->getUid() > 0) return 1;
  if (dynamic_cast<PGN*>(b)) static_cast<PGN*>(b)->getUid();
  return dynamic_cast<PGN*>(b) ? 2 : 0;
}
)";
  const std::string fixedSource = fixed("x.cc", source);
  EXPECT_NE(fixedSource.find("  if (dynamic_cast<PGN*>(b) && dynamic_cast<PGN*>(b)->getUid() > 0) return 1;\n"),
            std::string::npos) << fixedSource;
  EXPECT_NE(fixedSource.find("  if (dynamic_cast<PGN*>(b)) static_cast"), std::string::npos) << fixedSource;
  EXPECT_NE(fixedSource.find("  return " + nameTest("b") + " ? 2 : 0;\n"), std::string::npos) << fixedSource;
}

TEST(FixLegacyClassCheckCpp, SecondFixChangesNothingAndBracketsBalance) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
class Hack : public c10d::ProcessGroupNCCL {};
bool f(c10d::ProcessGroup& pg, c10d::Backend* b) {
  auto* hack = (Hack*)(void*)pg.getBackend(c10d::ProcessGroup::BackendType::NCCL).get();
  auto* legacy = static_cast<c10d::ProcessGroupNCCL*>(b);
  auto* down = static_cast<Hack*>(b);
  return dynamic_cast<c10d::ProcessGroupNCCL*>(b) == nullptr || hack || legacy || down;
}
)";
  std::string once = fixed("x.cc", source);
  ASSERT_NE(once, source);
  EXPECT_EQ(fixed("x.cc", once), once);
  EXPECT_FALSE(fixBreaksSyntax("x.cc", source, once).has_value());
}

// With compile flags the AST tier reports the same casts; the finding it keeps carries the fix.
TEST(FixLegacyClassCheckCpp, TheAstTierKeepsTheFix) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
bool f(c10d::Backend* b) { return dynamic_cast<c10d::ProcessGroupNCCL*>(b) != nullptr; }
)";
  LintOptions options;
  options.cppAst.extraFlags = {"-std=c++17"};
  EXPECT_EQ(fixed("x.cc", source, options), R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
bool f(c10d::Backend* b) { return )" + nameTest("b") + R"(; }
)");
}

// The frontend records the word `isinstance` (callee); the rule replaces it, the arguments stay
// as written. Checked here from a model built as the frontend fills it.
TEST(FixLegacyClassCheckPython, IsinstanceBecomesOneExpressionOverTheSameArguments) {
  const std::string text = "ok = not isinstance(pg,  # the backend\n    (dist.ProcessGroupNCCL, Other))\n";
  SourceModel model;
  model.path = "job.py";
  Range callee{text.find("isinstance"), text.find("isinstance") + 10};
  TypeCheck legacy{TypeCheck::Kind::Isinstance, "torch.distributed.ProcessGroupNCCL", "dist.ProcessGroupNCCL", {2, 6}};
  TypeCheck other{TypeCheck::Kind::Isinstance, "Other", "Other", {2, 29}};
  for (TypeCheck check : {legacy, other}) {
    check.callee = callee;
    model.typeChecks.push_back(check);
  }
  LintConfig config;
  RuleContext context{config};
  std::vector<Finding> findings;
  findRule("NM201")->check(model, context, findings);
  ASSERT_EQ(findings.size(), 1u);
  ASSERT_TRUE(findings[0].fix.has_value());
  EXPECT_EQ(findings[0].fix->safety, FixSafety::Unsafe);
  std::string out = applyFixes(text, {&findings[0], &findings[0]});
  EXPECT_EQ(out,
            "ok = not (lambda obj, classes, c10d=__import__(\"torch\")._C._distributed_c10d: isinstance(obj, (classes, "
            "getattr(c10d, \"ProcessGroupNCCL2\", ()), getattr(c10d, \"ProcessGroupNCCLLazy\", ()))) or "
            "(isinstance(obj, c10d.Backend) and obj.name() in (\"nccl\", \"nccl2\", \"nccl-lazy\")))(pg,  # the backend\n"
            "    (dist.ProcessGroupNCCL, Other))\n");
  EXPECT_FALSE(fixBreaksSyntax("job.py", text, out).has_value());
  // The rewritten text has no isinstance check against the legacy class left to fix.
  for (const Finding& f : lintSource("job.py", "import torch.distributed as dist\n" + out).findings)
    EXPECT_NE(f.code, "NM201") << f.message;
}

}  // namespace
}  // namespace nccl_migrate::lint

namespace nccl_migrate::lint {
namespace {

std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// tests/python/lint/legacy_checks.py fixed as the rule fixes it once the frontend records where
// each `isinstance` word stands (here found by text), must be legacy_checks_fixed.py, the file
// the Python test runs against torch. NCCL_MIGRATE_WRITE_GOLDEN=1 rewrites it.
TEST(FixLegacyClassCheckPython, TheRunnableFixedFileIsWhatTheFixWrites) {
  const std::string dir = NCCL_MIGRATE_PYTHON_LINT_TESTS;
  const std::string text = readText(dir + "/legacy_checks.py");
  ASSERT_FALSE(text.empty());
  SourceModel model;
  model.path = "legacy_checks.py";
  for (size_t at = text.find("isinstance("); at != std::string::npos; at = text.find("isinstance(", at + 1)) {
    TypeCheck check{TypeCheck::Kind::Isinstance, "torch.distributed.ProcessGroupNCCL", "dist.ProcessGroupNCCL", {1, 1}};
    check.callee = {at, at + std::string("isinstance").size()};
    model.typeChecks.push_back(check);
  }
  ASSERT_EQ(model.typeChecks.size(), 5u);
  LintConfig config;
  RuleContext context{config};
  std::vector<Finding> findings;
  findRule("NM201")->check(model, context, findings);
  std::vector<const Finding*> all;
  for (const Finding& f : findings) all.push_back(&f);
  std::string out = applyFixes(text, all);
  if (const char* write = std::getenv("NCCL_MIGRATE_WRITE_GOLDEN"); write && std::string(write) == "1") {
    std::ofstream(dir + "/legacy_checks_fixed.py", std::ios::binary) << out;
  }
  EXPECT_EQ(out, readText(dir + "/legacy_checks_fixed.py"));
  EXPECT_FALSE(fixBreaksSyntax("legacy_checks.py", text, out).has_value());
}

}  // namespace
}  // namespace nccl_migrate::lint
