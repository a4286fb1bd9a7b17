// Tier 2 for C/C++/CUDA: Clang's AST with flags, without torch's headers.
#include <gtest/gtest.h>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {
namespace {

std::vector<int> nm201Lines(const std::string& name, const std::string& text, bool ast) {
  LintOptions options;
  if (ast) options.cppAst.extraFlags = {"-std=c++17"};
  std::vector<int> lines;
  for (const Finding& f : lintSource(name, text, options).findings)
    if (f.code == "NM201") lines.push_back(f.where.line);
  return lines;
}

// The lexer resolves the aliases a file declares itself; the AST sees the canonical type. A class
// deriving from the legacy one is no finding: its declaration checks nothing (its casts are).
constexpr const char* kAliases = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <memory>
using NcclPG = c10d::ProcessGroupNCCL;
typedef c10d::ProcessGroupNCCL LegacyPG;
template <class T> T* as(c10d::Backend* b) { return dynamic_cast<T*>(b); }
void f(c10d::Backend* b, std::shared_ptr<c10d::Backend> s) {
  auto* x = dynamic_cast<NcclPG*>(b);
  auto y = std::dynamic_pointer_cast<LegacyPG>(s);
  auto* n = dynamic_cast<c10d::nccl2::ProcessGroupNCCL*>(b);
}
struct Derived : LegacyPG {};
)";

TEST(CppAst, SeesThroughAliasesWithoutTorchHeaders) {
  EXPECT_EQ(nm201Lines("x.cc", kAliases, false), (std::vector<int>{7, 8}));
  EXPECT_EQ(nm201Lines("x.cc", kAliases, true), (std::vector<int>{7, 8}));
}

TEST(CppAst, CudaFilesParseWithoutTheSdk) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
using PG = c10d::ProcessGroupNCCL;
__global__ void k(float* x) { x[threadIdx.x] = 0; }
void f(c10d::Backend* b, float* x) { k<<<1, 1>>>(x); auto* p = dynamic_cast<PG*>(b); }
)";
  EXPECT_EQ(nm201Lines("k.cu", source, true), (std::vector<int>{4}));
}

TEST(CppAst, AProjectClassNamedProcessGroupNCCLIsNotTorchs) {
  const std::string source = R"(namespace mine { class ProcessGroupNCCL { virtual ~ProcessGroupNCCL(); }; }
using PG = mine::ProcessGroupNCCL;
void f(mine::ProcessGroupNCCL* b) { auto* p = dynamic_cast<PG*>(b); }
)";
  EXPECT_TRUE(nm201Lines("own.cc", source, true).empty());
}

// `(Hack*)(void*)backend`: the void* hop hides the legacy class from the cast's source type; the
// destination, a project's subclass of the legacy class, is what tells. Both tiers see it.
TEST(CppAst, CStyleCastsThroughVoidToASubclass) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
class Hack : public c10d::ProcessGroupNCCL {};
class Other {};
#define AS_HACK(x) ((Hack*)(void*)(x))
void f(c10d::Backend* b, void* raw) {
  auto* h = (Hack*)(void*)b;
  auto* l = (c10d::ProcessGroupNCCL*)b;
  auto* o = (Other*)raw;
  auto* m = AS_HACK(b);
}
)";
  // The lexer reads the macro's body where it is defined; the AST finds the cast where it is used.
  EXPECT_EQ(nm201Lines("hack.cc", source, false), (std::vector<int>{4, 6, 7}));
  EXPECT_EQ(nm201Lines("hack.cc", source, true), (std::vector<int>{4, 6, 7, 9}));
}

std::vector<std::string> nm201Messages(const std::string& name, const std::string& text) {
  LintOptions options;
  options.cppAst.extraFlags = {"-std=c++17"};
  std::vector<std::string> messages;
  for (const Finding& f : lintSource(name, text, options).findings)
    if (f.code == "NM201") messages.push_back(std::to_string(f.where.line) + ": " + f.message);
  return messages;
}

// A cast is named as written, never by Clang's cast kind; a downcast to a project's subclass says
// what the object stops being.
TEST(CppAst, CastsAreNamedAsWritten) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
class ProcessGroupNico : public c10d::ProcessGroupNCCL {};
void f(c10d::ProcessGroupNCCL& p, c10d::Backend* b) {
  auto* n = static_cast<ProcessGroupNico *>(&p);
  auto& r = dynamic_cast<ProcessGroupNico&>(p);
  auto* l = reinterpret_cast<c10d::ProcessGroupNCCL*>(b);
}
)";
  std::vector<std::string> messages = nm201Messages("nico.cc", source);
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[0].find("4: static_cast<ProcessGroupNico *>(&p) downcasts a ProcessGroupNCCL to ProcessGroupNico, "
                             "which the object is no longer under the rewritten backend"), 0u) << messages[0];
  EXPECT_NE(messages[0].find("is undefined behaviour"), std::string::npos) << messages[0];
  EXPECT_EQ(messages[1].find("5: dynamic_cast<ProcessGroupNico&>(p) downcasts a ProcessGroupNCCL to ProcessGroupNico"), 0u)
      << messages[1];
  EXPECT_EQ(messages[2].find("6: reinterpret_cast<c10d::ProcessGroupNCCL*>(b) is undefined behaviour"), 0u) << messages[2];
  for (const std::string& m : messages) EXPECT_EQ(m.find("NoOp"), std::string::npos) << m;
}

// A cast written over several lines is named on one: a message's first line holds all of it.
TEST(CppAst, ACastOverSeveralLinesIsNamedOnOne) {
  const std::string source = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
class Hack : public c10d::ProcessGroupNCCL {};
void f(c10d::Backend* b) {
  Hack* h = (Hack*)(void*) \
      (b);
}
)";
  std::vector<std::string> messages = nm201Messages("lines.cc", source);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].find("4: (Hack*)(void*) (b) downcasts a ProcessGroupNCCL to Hack"), 0u) << messages[0];
}

// Both tiers read a file as torch 2.15 compiles it: a branch its version macros rule out is not
// linted, whether the AST parsed it (a build against an older torch, whose headers or flags define
// other versions) or skipped it; a branch of an undecidable condition is linted by the lexer at least.
constexpr const char* kVersionBranches = R"(#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
class Hack : public c10d::ProcessGroupNCCL {};
#define AS_HACK(x) ((Hack*)(void*)(x))
void f(c10d::ProcessGroup& pg, c10d::Backend* b) {
#if defined(TORCH_VERSION_MAJOR) && (TORCH_VERSION_MAJOR > 1 || \
    (TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR >= 13))
  auto* h = (Hack*)(void*)b;
#else
  auto* h = (Hack*)(void*)&pg;
#endif
#if TORCH_VERSION_MAJOR < 2
  auto* m = AS_HACK(&pg);
#endif
#ifdef WITH_LEGACY_PATH
  auto* w = AS_HACK(b);
#endif
}
)";

std::vector<int> nm201LinesWithFlags(const std::vector<std::string>& flags) {
  LintOptions options;
  options.cppAst.extraFlags = flags;
  std::vector<int> lines;
  for (const Finding& f : lintSource("versions.cc", kVersionBranches, options).findings)
    if (f.code == "NM201") lines.push_back(f.where.line);
  return lines;
}

TEST(CppAst, BranchesTorch215NeverCompilesAreNotLinted) {
  // The lexer reads AS_HACK's body where it is defined (line 3) and the live cast (line 7).
  EXPECT_EQ(nm201Lines("versions.cc", kVersionBranches, false), (std::vector<int>{3, 7}));
  // Without torch's headers the AST parses the branches torch 2.15 compiles.
  EXPECT_EQ(nm201LinesWithFlags({"-std=c++17"}), (std::vector<int>{3, 7}));
  // An undecidable macro the build defines: the AST adds the use of AS_HACK in its branch.
  EXPECT_EQ(nm201LinesWithFlags({"-std=c++17", "-DWITH_LEGACY_PATH"}), (std::vector<int>{3, 7, 15}));
  // A compile database of a build against torch 1.12: the AST parses the old branches, whose casts
  // torch 2.15 never compiles.
  EXPECT_EQ(nm201LinesWithFlags({"-std=c++17", "-DTORCH_VERSION_MAJOR=1", "-DTORCH_VERSION_MINOR=12"}),
            (std::vector<int>{3, 7}));
}

}  // namespace
}  // namespace nccl_migrate::lint
