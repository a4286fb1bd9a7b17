// NM201's fixes: C++ casts through the real lexer (and the AST tier), Python isinstance checks
// through the real frontend; each file gets one helper, put once after its includes or imports,
// called where each check stood; applied, applied again (nothing changes), still readable.
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

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

constexpr const char* kCppHelper = R"(
#ifndef NCCL_MIGRATE_AS_NCCL_BACKEND
#define NCCL_MIGRATE_AS_NCCL_BACKEND
// The backend where it runs NCCL (torch's legacy or rewritten backend, or the toolkit's), else
// null: what a dynamic_cast to the legacy c10d::ProcessGroupNCCL tested for null now asks.
template <typename BackendPointer>
inline BackendPointer asNcclBackend(const BackendPointer& backend) {
  if (!backend) return BackendPointer();
  std::string name;
  try {
    name = backend->getBackendName();
  } catch (const std::exception&) {  // a Backend that does not name itself: not NCCL's
    return BackendPointer();
  }
  if (name == "nccl" || name == "nccl2" || name == "nccl-lazy") return backend;
  return BackendPointer();
}
#endif  // NCCL_MIGRATE_AS_NCCL_BACKEND
)";

TEST(FixLegacyClassCheckCpp, TestsForNullCallOneHelper) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

bool f(c10d::Backend* b, c10::intrusive_ptr<c10d::Backend> p, std::shared_ptr<c10d::Backend> s) {
  if (dynamic_cast<c10d::ProcessGroupNCCL*>(b)) return true;  // why: the NCCL path
  bool x = dynamic_cast<c10d::ProcessGroupNCCL*>(b) != nullptr;
  bool y = nullptr == c10::dynamic_intrusive_pointer_cast<c10d::ProcessGroupNCCL>(p);
  return x && y && !std::dynamic_pointer_cast<c10d::ProcessGroupNCCL>(s);
}
)";
  const std::string expected = std::string("#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>\n") + kCppHelper +
                               R"(
bool f(c10d::Backend* b, c10::intrusive_ptr<c10d::Backend> p, std::shared_ptr<c10d::Backend> s) {
  if (asNcclBackend(b)) return true;  // why: the NCCL path
  bool x = asNcclBackend(b) != nullptr;
  bool y = nullptr == asNcclBackend(p);
  return x && y && !asNcclBackend(s);
}
)";
  EXPECT_EQ(fixed("x.cc", source), expected);
}

// A variable that holds the cast only to be tested for null is a test too: the helper gives the
// same kind of answer (the backend or null), so the declaration and its tests stay as written.
TEST(FixLegacyClassCheckCpp, AVariableOnlyTestedForNullCallsTheHelper) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
bool f(c10d::Backend* b) {
  auto* p = dynamic_cast<c10d::ProcessGroupNCCL*>(b);
  return p != nullptr;
}
bool g(c10d::Backend* b, std::shared_ptr<c10d::Backend> s) {
  const auto* p = dynamic_cast<c10d::ProcessGroupNCCL*>(b);
  auto q = std::dynamic_pointer_cast<c10d::ProcessGroupNCCL>(s);
  if (p) return true;
  if (!q || p == nullptr) return false;
  return q && p;
}
)";
  const std::string out = fixed("x.cc", source);
  EXPECT_NE(out.find("  auto* p = asNcclBackend(b);\n  return p != nullptr;\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  const auto* p = asNcclBackend(b);\n  auto q = asNcclBackend(s);\n"), std::string::npos) << out;
  EXPECT_EQ(count(out, "inline BackendPointer asNcclBackend("), 1u) << out;
  EXPECT_EQ(fixed("x.cc", out), out);
}

// Used as a pointer, declared with its class, or reassigned: the variable is a value, left alone.
TEST(FixLegacyClassCheckCpp, AVariableUsedAsAPointerIsLeftAlone) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
int f(c10d::Backend* b) {
  auto* p = dynamic_cast<c10d::ProcessGroupNCCL*>(b);
  if (p) return p->getUid();
  c10d::ProcessGroupNCCL* q = dynamic_cast<c10d::ProcessGroupNCCL*>(b);
  if (!q) return 0;
  auto* r = dynamic_cast<c10d::ProcessGroupNCCL*>(b);
  r = nullptr;
  return r != nullptr;
}
)";
  EXPECT_EQ(fixed("x.cc", source), source);
}

// The helper goes after the includes, past a conditional block they stand in, inside an include
// guard; in a header it is `inline`; a file using the name already gets another one.
TEST(FixLegacyClassCheckCpp, TheHelperFindsItsPlaceAndAFreeName) {
  const std::string source = R"(#pragma once
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
int asNcclBackend = 0;
inline bool f(c10d::Backend* b) { return dynamic_cast<c10d::ProcessGroupNCCL*>(b) != nullptr; }
)";
  const std::string out = fixed("x.h", source);
  EXPECT_EQ(out.find("#endif\n\n#ifndef NCCL_MIGRATE_AS_NCCL_BACKEND"), source.find("#endif")) << out;
  EXPECT_NE(out.find("inline BackendPointer asNcclBackend2(const BackendPointer& backend) {"), std::string::npos) << out;
  EXPECT_NE(out.find("return asNcclBackend2(b) != nullptr;"), std::string::npos) << out;
  EXPECT_EQ(fixed("x.h", out), out);
  // A new test in a file that has the helper calls it, and adds none.
  std::string more = out + "inline bool g(c10d::Backend* b) { return !dynamic_cast<c10d::ProcessGroupNCCL*>(b); }\n";
  std::string again = fixed("x.h", more);
  EXPECT_EQ(count(again, "BackendPointer asNcclBackend2("), 1u) << again;
  EXPECT_NE(again.find("return !asNcclBackend2(b); }"), std::string::npos) << again;
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
  EXPECT_NE(fixedSource.find("  return asNcclBackend(b) ? 2 : 0;\n"), std::string::npos) << fixedSource;
}

// The usual guard: a block that casts again under the test. Rewriting the test would send the
// rewritten backend into a block that treats it as the legacy class.
TEST(FixLegacyClassCheckCpp, ANullTestGuardingABlockThatCastsAgainStays) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
int f(c10d::Backend* b) {
  if (dynamic_cast<c10d::ProcessGroupNCCL*>(b)) {
    int uid = 0;
    uid = static_cast<c10d::ProcessGroupNCCL*>(b)->getUid();
    return uid;
  }
  if (dynamic_cast<c10d::ProcessGroupNCCL*>(b)) {
    return 1;
  }
  return 0;
}
)";
  const std::string fixedSource = fixed("x.cc", source);
  EXPECT_NE(fixedSource.find("  if (dynamic_cast<c10d::ProcessGroupNCCL*>(b)) {\n    int uid = 0;"), std::string::npos)
      << fixedSource;
  EXPECT_NE(fixedSource.find("  if (asNcclBackend(b)) {\n    return 1;"), std::string::npos) << fixedSource;
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
  EXPECT_EQ(fixed("x.cc", source, options), std::string("#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>\n") +
                                                kCppHelper + R"(
bool f(c10d::Backend* b) { return asNcclBackend(b) != nullptr; }
)");
}

constexpr const char* kPythonHelper = R"(def _is_nccl_backend(obj, classes=()):
    """Whether obj is a backend that runs NCCL, on any torch, or of classes."""
    from torch._C import _distributed_c10d as c10d

    names = "ProcessGroupNCCL", "ProcessGroupNCCL2", "ProcessGroupNCCLLazy"
    if isinstance(obj, (classes, *(getattr(c10d, n, ()) for n in names))):
        return True
    if not isinstance(obj, c10d.Backend):
        return False
    # The toolkit's backends reach Python as a Backend named for what it runs.
    nccl_names = "nccl", "nccl2", "nccl-lazy"
    try:
        return obj.name() in nccl_names
    except RuntimeError:  # a Backend subclass that does not name itself
        return False
)";

TEST(FixLegacyClassCheckPython, EachCheckCallsOneHelperAfterTheImports) {
  const std::string text = R"("""A job."""

from __future__ import annotations

import torch.distributed as dist

SIZE = 2


def f(b):
    return isinstance(b, dist.ProcessGroupNCCL)


def g(b):
    if not isinstance(b, (dist.ProcessGroupNCCL, int)):
        return isinstance(
            b.backend,
            dist.ProcessGroupNCCL,
        )
)";
  const std::string expected = std::string(R"("""A job."""

from __future__ import annotations

import torch.distributed as dist


)") + kPythonHelper + R"(

SIZE = 2


def f(b):
    return _is_nccl_backend(b)


def g(b):
    if not _is_nccl_backend(b, (dist.ProcessGroupNCCL, int)):
        return _is_nccl_backend(b.backend)
)";
  const std::string out = fixed("job.py", text);
  EXPECT_EQ(out, expected);
  EXPECT_FALSE(fixBreaksSyntax("job.py", text, out).has_value());
  EXPECT_EQ(fixed("job.py", out), out);
  for (const Finding& f : lintSource("job.py", out).findings) EXPECT_NE(f.code, "NM201") << f.message;
  EXPECT_EQ(out.find("__import__"), std::string::npos);
  EXPECT_EQ(out.find("lambda"), std::string::npos);
}

// No imports: after the docstring, or after the comments heading the file; none of these: first.
TEST(FixLegacyClassCheckPython, TheHelperGoesAfterTheModuleHeader) {
  const std::string body =
      "def f(b):\n"
      "    from torch.distributed import ProcessGroupNCCL\n"
      "\n"
      "    return isinstance(b, ProcessGroupNCCL)\n";
  std::string out = fixed("job.py", "#!/usr/bin/env python\n# Copyright\n\n" + body);
  EXPECT_EQ(out.rfind("#!/usr/bin/env python\n# Copyright\n\n\ndef _is_nccl_backend(", 0), 0u) << out;
  out = fixed("job.py", "\"\"\"Doc.\"\"\"\n" + body);
  EXPECT_EQ(out.rfind("\"\"\"Doc.\"\"\"\n\n\ndef _is_nccl_backend(", 0), 0u) << out;
  out = fixed("job.py", body);
  EXPECT_EQ(out.rfind("def _is_nccl_backend(", 0), 0u) << out;
  EXPECT_NE(out.find("        return False\n\n\ndef f(b):\n"), std::string::npos) << out;
  EXPECT_NE(out.find("    return _is_nccl_backend(b)\n"), std::string::npos) << out;
}

// A name the module uses already is left to it; the helper, recognised by its first line, is
// called by a check added later and is not added twice.
TEST(FixLegacyClassCheckPython, TheHelperTakesAFreeNameAndIsRecognised) {
  const std::string text =
      "import torch.distributed as dist\n"
      "from mine import _is_nccl_backend\n"
      "\n"
      "\n"
      "def f(b):\n"
      "    return isinstance(b, dist.ProcessGroupNCCL) or _is_nccl_backend(b)\n";
  const std::string out = fixed("job.py", text);
  EXPECT_NE(out.find("\ndef _is_nccl_backend_2(obj, classes=()):\n"), std::string::npos) << out;
  EXPECT_NE(out.find("    return _is_nccl_backend_2(b) or _is_nccl_backend(b)\n"), std::string::npos) << out;
  EXPECT_EQ(fixed("job.py", out), out);
  const std::string more = out + "\n\ndef g(b):\n    return isinstance(b, dist.ProcessGroupNCCL)\n";
  const std::string again = fixed("job.py", more);
  EXPECT_EQ(count(again, "def _is_nccl_backend_2("), 1u) << again;
  EXPECT_NE(again.find("def g(b):\n    return _is_nccl_backend_2(b)\n"), std::string::npos) << again;
}

// A statement ruff split because the old call made it long (88 columns here) is joined where the
// new call makes it fit, its parentheses dropped, as ruff writes it; one that fitted on a line
// before was split by its author and keeps its lines, as does one with a comment.
TEST(FixLegacyClassCheckPython, AStatementSplitForTheOldCallIsJoinedWhereTheNewOneFits) {
  const std::string text = R"(import torch.distributed as dist


def f(backend, high_priority_stream_for_this_bucket):
    nccl = (
        isinstance(backend, dist.ProcessGroupNCCL)
        and high_priority_stream_for_this_bucket is None
    )
    if (
        isinstance(backend.group, dist.ProcessGroupNCCL)
        and backend.group.size() >= minimum_size
    ):
        return (
            isinstance(backend.group, dist.ProcessGroupNCCL)
            and backend.group.size() >= minimum_size
        )
    return nccl


def by_hand(backend, stream):
    nccl = (
        isinstance(backend, dist.ProcessGroupNCCL)
        and stream is None
    )
    commented = (
        isinstance(backend, dist.ProcessGroupNCCL)  # the legacy class
        and high_priority_stream_for_this_bucket is None
    )
    return nccl, commented
)";
  const std::string out = fixed("job.py", text);
  EXPECT_NE(out.find(R"(
def f(backend, high_priority_stream_for_this_bucket):
    nccl = _is_nccl_backend(backend) and high_priority_stream_for_this_bucket is None
    if _is_nccl_backend(backend.group) and backend.group.size() >= minimum_size:
        return _is_nccl_backend(backend.group) and backend.group.size() >= minimum_size
    return nccl
)"), std::string::npos) << out;
  EXPECT_NE(out.find(R"(
    nccl = (
        _is_nccl_backend(backend)
        and stream is None
    )
    commented = (
        _is_nccl_backend(backend)  # the legacy class
        and high_priority_stream_for_this_bucket is None
    )
)"), std::string::npos) << out;
  EXPECT_FALSE(fixBreaksSyntax("job.py", text, out).has_value());
  EXPECT_EQ(fixed("job.py", out), out);
  // Parentheses `:=` needs stay when the statement is joined.
  const std::string walrus =
      "import torch.distributed as dist\n"
      "nccl = (\n"
      "    known := isinstance(backend_of_the_group, dist.ProcessGroupNCCL) and stream_of_bucket is None\n"
      ")\n";
  const std::string joined = fixed("job.py", walrus);
  EXPECT_NE(joined.find("\nnccl = (known := _is_nccl_backend(backend_of_the_group) and stream_of_bucket is None)\n"),
            std::string::npos)
      << joined;
  EXPECT_FALSE(fixBreaksSyntax("job.py", walrus, joined).has_value());
}

// A comment between the arguments keeps the call's arguments as written: only the name changes.
TEST(FixLegacyClassCheckPython, ACommentKeepsTheArguments) {
  const std::string text =
      "import torch.distributed as dist\n"
      "ok = not isinstance(pg,  # the backend\n"
      "    dist.ProcessGroupNCCL)\n";
  const std::string out = fixed("job.py", text);
  EXPECT_NE(out.find("ok = not _is_nccl_backend(pg,  # the backend\n    dist.ProcessGroupNCCL)\n"), std::string::npos)
      << out;
  EXPECT_FALSE(fixBreaksSyntax("job.py", text, out).has_value());
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

// tests/python/lint/legacy_checks.py fixed once (one round: each check is on a line of its own)
// must be legacy_checks_fixed.py, the file the Python test runs against torch.
// NCCL_MIGRATE_WRITE_GOLDEN=1 rewrites it.
TEST(FixLegacyClassCheckPython, TheRunnableFixedFileIsWhatTheFixWrites) {
  const std::string dir = NCCL_MIGRATE_PYTHON_LINT_TESTS;
  const std::string text = readText(dir + "/legacy_checks.py");
  ASSERT_FALSE(text.empty());
  LintReport report = lintSource(dir + "/legacy_checks.py", text);
  std::vector<const Finding*> all = applicableFixes(report, FixSafety::Unsafe);
  ASSERT_EQ(all.size(), 5u);
  std::string out = applyFixes(text, all);
  if (const char* write = std::getenv("NCCL_MIGRATE_WRITE_GOLDEN"); write && std::string(write) == "1") {
    std::ofstream(dir + "/legacy_checks_fixed.py", std::ios::binary) << out;
  }
  EXPECT_EQ(out, readText(dir + "/legacy_checks_fixed.py"));
  EXPECT_FALSE(fixBreaksSyntax("legacy_checks.py", text, out).has_value());
}

}  // namespace
}  // namespace nccl_migrate::lint
