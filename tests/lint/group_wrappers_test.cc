// The project-wide tables: group-creating wrappers inferred from the tree's own functions (across
// files, through wrappers of wrappers; calls to them in loops are NM401 findings) and the aliases
// the tree's C++ headers give the legacy class (seen in the files that include them).
#include "cpp/cpp_aliases.h"
#include "python/group_wrappers.h"

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
  // Keys name a wrapper's module (unknown here) or that it is a method.
  EXPECT_EQ(inferGroupWrappers(texts, 2), (std::set<std::string>{":build_all", ":make_pg", ":tensor_parallel_group"}));
}

// Megatron-LM's layout: a signature over several lines, closed at the def's own indentation,
// and a decorator whose arguments span lines. The parse tree, not the lines, says which function
// holds the call.
TEST(FunctionsCalling, SignaturesOverSeveralLinesAndDecorators) {
  const std::string source =
      "import torch\n"
      "def create_group(\n"
      "    ranks=None,\n"
      "    timeout=None,\n"
      "    backend=None,\n"
      "    pg_options=None,\n"
      "    use_local_synchronization=False,\n"
      "    group_desc=None,\n"
      "):\n"
      "    kwargs = {}\n"
      "    group = torch.distributed.new_group(**kwargs)\n"
      "    return group\n"
      "@register(\n"
      "    name=\"x\",\n"
      ")\n"
      "def registered(r): return torch.distributed.new_group(r)\n"
      "class Grid:\n"
      "    def _axis_group(\n"
      "        self,\n"
      "        ranks,\n"
      "    ):\n"
      "        def one(\n"
      "            r,\n"
      "        ):\n"
      "            return torch.distributed.new_group(r)\n"
      "        return one(ranks)\n";
  EXPECT_EQ(functionsCalling(source, kCreators), (std::set<std::string>{"create_group", "one", "registered"}));
}

// Calls reach a wrapper through the file's imports, or `self` for a method, not by name alone: a
// project method named init_process_group that creates groups does not make every caller of
// torch's, or of another object's method of that name, a wrapper.
TEST(InferGroupWrappers, CallsReachWrappersThroughImportsAndSelf) {
  std::vector<std::string_view> texts = {
      "class Comm:\n    def init_process_group(self, b):\n        self.world = ENV.new_group()\n",
      "import torch.distributed as dist\ndef start_job():\n    dist.init_process_group(\"nccl\")\n",
      "class Trainer(Comm):\n    def start_comm(self):\n        self.init_process_group(\"nccl\")\n",
      "def start_other(store):\n    store.init_process_group(\"nccl\")\n",
      "def create_group(r):\n    return ENV.new_group(r)\n",
      "from mypkg.groups import create_group\ndef by_name(r):\n    return create_group(r)\n",
      "import mypkg.groups as g\ndef by_module(r):\n    return g.create_group(r)\n",
      "from otherpkg import create_group\ndef elsewhere(r):\n    return create_group(r)\n",
  };
  // A method is reached through `self` in its own module (the subclass is there too).
  std::vector<std::string> modules = {"src.mypkg.comm", "src.job", "src.mypkg.comm", "src.other", "src.mypkg.groups",
                                      "src.a", "src.b", "src.c"};
  EXPECT_EQ(inferGroupWrappers(texts, modules, 1),
            (std::set<std::string>{"src.a:by_name", "src.b:by_module", "src.mypkg.comm#self:init_process_group",
                                   "src.mypkg.comm#self:start_comm", "src.mypkg.groups:create_group"}));
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

// Megatron-LM's helper, with its black-style signature, is called in loops of another module that
// imports it by name or imports its module under an alias; a single call is no finding.
TEST_F(WrapperTree, MultiLineSignatureHelpersAreFollowedThroughImports) {
  write("mypkg/parallel_state.py",
        "import torch\n"
        "def create_group(\n"
        "    ranks=None,\n"
        "    timeout=None,\n"
        "    backend=None,\n"
        "    pg_options=None,\n"
        "    group_desc=None,\n"
        "):\n"
        "    kwargs = dict(ranks=ranks, timeout=timeout, backend=backend, pg_options=pg_options)\n"
        "    group = torch.distributed.new_group(**kwargs)\n"
        "    return group\n");
  write("initialize.py",
        "from mypkg.parallel_state import create_group\n"
        "def initialize_model_parallel(tp, world, nccl_options):\n"
        "    for i in range(world // tp):\n"
        "        ranks = range(i * tp, (i + 1) * tp)\n"
        "        group = create_group(ranks, pg_options=nccl_options, group_desc=\"TP\")\n"
        "    return group\n");
  write("experts.py",
        "import mypkg.parallel_state as m\n"
        "def expert_groups(layout):\n"
        "    return [m.create_group(r, group_desc=\"EP\") for r in layout]\n"
        "world = m.create_group(None)\n");
  EXPECT_EQ(findingsIn(root_), (std::vector<std::string>{"experts.py:3:NM401", "initialize.py:5:NM401"}));
}

// A wrapper imported under another name is the same wrapper: its calls in loops are group
// creation, at module level and inside a function whose import is its own.
TEST_F(WrapperTree, WrappersImportedUnderAnAliasAreFollowed) {
  write("mypkg/parallel_state.py",
        "import torch.distributed as dist\n"
        "def create_group(ranks):\n"
        "    return dist.new_group(ranks)\n");
  write("aliased.py",
        "from mypkg.parallel_state import create_group as cg\n"
        "for i in range(4):\n"
        "    cg([i])\n");
  write("local_import.py",
        "def build(n):\n"
        "    from mypkg.parallel_state import create_group as make\n"
        "    return [make([i]) for i in range(n)]\n");
  EXPECT_EQ(findingsIn(root_), (std::vector<std::string>{"aliased.py:3:NM401", "local_import.py:3:NM401"}));
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
