// The project-wide tables: group-creating wrappers inferred from the tree's own functions (across
// files, through wrappers of wrappers; calls to them in loops are NM401 findings) and the aliases
// the tree's C++ headers give the legacy class (seen in the files that include them).
#include "engine/cpp_aliases.h"
#include "engine/group_wrappers.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {
namespace {
namespace fs = std::filesystem;

const std::set<std::string> kCreators = {"new_group"};

// The findings of linting `root` as "file:line:code" ("file:cell N:line:code" in a notebook); a
// warning fails the test.
std::vector<std::string> findingsIn(const fs::path& root) {
  LintOptions options;
  options.jobs = 2;
  LintReport report = lintPaths({root}, options);
  EXPECT_TRUE(report.warnings.empty()) << report.warnings.front();
  std::vector<std::string> found;
  for (const Finding& f : report.findings) {
    std::string cell = f.where.cell ? "cell " + std::to_string(f.where.cell) + ":" : "";
    found.push_back(fs::path(f.path).filename().string() + ":" + cell + std::to_string(f.where.line) + ":" + f.code);
  }
  return found;
}

TEST(FunctionsCalling, FindsTheEnclosingDefinition) {
  const std::string source =
      "import torch.distributed as dist\n"
      "class Topology:\n"
      "    def data_group(self, ranks):\n"
      "        if ranks:\n"
      "            return dist.new_group(\n"
      "                ranks, timeout=t)\n"
      "    def gloo_group(self, ranks):\n"
      "        return dist.new_group(ranks, backend=\"gloo\")\n"
      "async def lazy_group(ranks):\n"
      "    return dist.new_group(ranks, backend=\"nccl-lazy\")\n"
      "def eager(ranks):\n"
      "    # dist.new_group(ranks) in a comment\n"
      "    return dist.new_group(ranks, backend=\"NCCL\")\n"
      "def new_group(ranks):\n"
      "    pass\n"
      "world = dist.new_group()\n"
      "def new_groups():\n"
      "    return dist.new_groups()\n"
      "class Model:\n"
      "    def setup(self):\n"
      "        self.pg = dist.new_group()\n";
  EXPECT_EQ(functionsCalling(source, kCreators), (std::set<std::string>{"data_group", "eager"}));
}

TEST(InferGroupWrappers, FollowsWrappersOfWrappersAcrossSources) {
  std::vector<std::string_view> texts = {
      "def make_pg(r):\n    return torch.distributed.new_group(r)\n",
      "from a import make_pg\ndef tensor_parallel_group(r):\n    return make_pg(r)\n",
      "def build_all(layout):\n    return [tensor_parallel_group(r) for r in layout]\n",
      "def unrelated(r):\n    return make_pgs(r)\n",
  };
  EXPECT_EQ(inferGroupWrappers(texts, 2), (std::set<std::string>{"build_all", "make_pg", "tensor_parallel_group"}));
}

class WrapperTree : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("nccl-migrate-wrappers-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "mypkg");
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) { std::ofstream(root_ / rel) << text; }
  fs::path root_;
};

// Calls of an inferred wrapper in loops, nested loops and comprehensions are flagged in another
// file, which never names new_group or torch.distributed; a gloo wrapper is not.
TEST_F(WrapperTree, CallsInLoopsAreFlaggedAcrossFiles) {
  write("mypkg/parallel_state.py",
        "import torch.distributed as dist\n"
        "def create_group(ranks):\n"
        "    return dist.new_group(ranks)\n"
        "def create_cpu_group(ranks):\n"
        "    return dist.new_group(ranks, backend=\"gloo\")\n"
        "def model_parallel_group(ranks):\n"
        "    return create_group(ranks)\n");
  write("train.py",
        "from mypkg import parallel_state as ps\n"
        "from mypkg.parallel_state import model_parallel_group\n"
        "for dp in range(4):\n"
        "    for tp in range(2):\n"
        "        ps.create_group([dp, tp])\n"
        "groups = [model_parallel_group(r) for r in layout]\n"
        "cpu = [ps.create_cpu_group(r) for r in layout]\n"
        "once = ps.create_group([0, 1])\n");
  EXPECT_EQ(findingsIn(root_), (std::vector<std::string>{"train.py:5:NM401", "train.py:6:NM401"}));
}

// In a file large enough to be parsed in parts, a wrapper's name keeps the definitions that call it
// in the parse, as new_group's does: calls in a function's comprehension and in a module-level loop
// are flagged among definitions left out.
TEST_F(WrapperTree, CallsInLoopsAreFlaggedInFilesParsedInParts) {
  write("mypkg/parallel_state.py",
        "import torch.distributed as dist\n"
        "def create_group(ranks):\n"
        "    return dist.new_group(ranks)\n");
  std::string filler;
  for (int i = 0; i < 100; ++i) filler += "def unrelated" + std::to_string(i) + "(a):\n    return [a, 1]\n";
  write("train.py",
        "from mypkg import parallel_state as ps\n" + filler +
        "def build(layout):\n"
        "    return [ps.create_group(r) for r in layout]\n" + filler +
        "for r in layout:\n"
        "    ps.create_group(r)\n");
  ASSERT_GT(fs::file_size(root_ / "train.py"), 4096u);
  EXPECT_EQ(findingsIn(root_), (std::vector<std::string>{"train.py:203:NM401", "train.py:405:NM401"}));
}

// A function a notebook's code cell defines around new_group is a group creator like one in a .py
// file: its calls in a loop are flagged in a later cell (named by cell and line) and in the
// project's Python files; a gloo one is not, nor a single call (fixtures/notebook_wrappers).
TEST(NotebookWrappers, CreateGroupsForTheNotebookAndTheProject) {
  EXPECT_EQ(findingsIn(fs::path(NCCL_MIGRATE_LINT_FIXTURES) / "notebook_wrappers"), (std::vector<std::string>{"groups.ipynb:cell 3:3:NM401", "train.py:5:NM401"}));
}

TEST(AliasesOf, UsingAndTypedefOfTheClassOnly) {
  const std::string header =
      "using LegacyGroup = c10d::ProcessGroupNCCL;\n"
      "using Spaced = :: c10d :: ProcessGroupNCCL ;\n"
      "typedef c10d::ProcessGroupNCCL TrainerPG;\n"
      "typedef class c10d::ProcessGroupNCCL ClassPG;\n"
      "using Options = c10d::ProcessGroupNCCL::Options;\n"
      "using Rewritten = c10d::nccl2::ProcessGroupNCCLX;\n"
      "using namespace c10d;\n"
      "typedef int ProcessGroupNCCL_t;\n";
  EXPECT_EQ(aliasesOf(header, "ProcessGroupNCCL"), (std::set<std::string>{"ClassPG", "LegacyGroup", "Spaced", "TrainerPG"}));
}

// A header of the tree gives the class another name; a source that includes it uses only that
// name, without a compile database.
TEST_F(WrapperTree, HeaderAliasesReachTheFilesThatIncludeThem) {
  fs::create_directories(root_ / "include/trainer");
  fs::create_directories(root_ / "src");
  write("include/trainer/groups.h",
        "#pragma once\n"
        "#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>\n"
        "namespace trainer { using LegacyGroup = c10d::ProcessGroupNCCL; }\n"
        "typedef c10d::ProcessGroupNCCL TrainerPG;\n");
  write("src/check.cc",
        "#include \"trainer/groups.h\"\n"
        "void check(c10d::Backend* backend) {\n"
        "  auto* pg = dynamic_cast<TrainerPG*>(backend);\n"
        "  auto fresh = std::make_shared<LegacyGroup>(store, 0, 1);\n"
        "}\n");
  write("src/other.cc",
        "struct TrainerPG {};\n"
        "void f(Base* b) { auto* p = dynamic_cast<TrainerPG*>(b); }\n");
  EXPECT_EQ(findingsIn(root_), (std::vector<std::string>{"check.cc:3:NM201", "check.cc:4:NM204"}));
}

}  // namespace
}  // namespace nccl_migrate::lint
