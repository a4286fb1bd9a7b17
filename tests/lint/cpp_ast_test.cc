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

// The lexer resolves the aliases a file declares itself; the AST sees the canonical type.
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
  EXPECT_EQ(nm201Lines("x.cc", kAliases, false), (std::vector<int>{7, 8, 11}));
  EXPECT_EQ(nm201Lines("x.cc", kAliases, true), (std::vector<int>{7, 8, 11}));
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

}  // namespace
}  // namespace nccl_migrate::lint
