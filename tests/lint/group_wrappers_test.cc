// The project-wide tables: group-creating wrappers inferred from the tree's own functions (across
// files, through wrappers of wrappers; calls to them in loops are NM401 findings) and the aliases
// the tree's C++ headers give the legacy class (seen in the files that include them).
#include "cpp/cpp_aliases.h"
#include "python/group_wrappers.h"
#include "python/group_wrapper_catalogue.h"
#include "python/python_environment.h"

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

// A test that sets up its groups through a wrapper is a wrapper itself, so its calls are no sites
// of its file (Call::inGroupWrapper): NM401 has nothing to report there, and the file, which no
// other rule needs, is not parsed. The same calls at module level, or in a loop, are still found.
TEST_F(WrapperTree, CallsInsideWrappersLeaveTheFileUnparsed) {
  write("mypkg/__init__.py", "");
  write("mypkg/groups.py",
        "import torch.distributed as dist\n"
        "def make_group(ranks):\n"
        "    return dist.new_group(ranks)\n");
  const std::string calls =
      "        make_group([0])\n        make_group([1])\n        make_group([2])\n        make_group([3])\n";
  write("test_setup.py",
        "from mypkg.groups import make_group\n"
        "class TestGroups:\n"
        "    @pytest.mark.parametrize(\n"
        "        \"size\", [1, 2]\n"
        "    )\n"
        "    def test_four(self, size):\n" +
            calls + "    def test_more(self):\n" + calls);
  LintOptions options;
  options.jobs = 2;
  options.config.environment = false;
  LintReport quiet = lintPaths({root_}, options);
  EXPECT_TRUE(quiet.findings.empty());
  EXPECT_EQ(quiet.filesParsed, 1);  // groups.py alone

  write("script.py", "from mypkg.groups import make_group\n"
                         "make_group([0])\nmake_group([1])\nmake_group([2])\nmake_group([3])\n");
  write("loop.py",
        "from mypkg.groups import make_group\n"
        "def build(layout):\n"
        "    for ranks in layout:\n"
        "        make_group(ranks)\n");
  EXPECT_EQ(findingsIn(root_), (std::vector<std::string>{"loop.py:4:NM401", "script.py:2:NM401"}));
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

// The project model beyond the tree's own functions (issue 38): an installed package's wrappers,
// found through the interpreter's sys.path; the catalogue where the package is not installed;
// methods called on objects; classes whose construction creates a group.
class ProjectModelTree : public testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("nccl-migrate-project-" + std::to_string(::getpid()));
    fs::remove_all(base_);
    root_ = base_ / "tree";
    site_ = base_ / "site-packages";
    fs::create_directories(root_);
    fs::create_directories(site_);
  }
  void TearDown() override { fs::remove_all(base_); }
  void write(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  // An interpreter that prints the sys.path a real one would: the fake site-packages only.
  std::string fakePython() {
    fs::path script = base_ / "python";
    write(script, "#!/bin/sh\necho '{\"path\": [\"\", \"" + site_.string() + "\"], \"stdlib\": []}'\n");
    fs::permissions(script, fs::perms::owner_all);
    return script.string();
  }
  // "file:line:code" of each finding, and the messages, with the environment set as given.
  std::vector<std::string> findings(const std::string& python, bool environment = true) {
    LintOptions options;
    options.jobs = 2;
    options.config.python = python;
    options.config.environment = environment;
    LintReport report = lintPaths({root_}, options);
    EXPECT_TRUE(report.warnings.empty()) << report.warnings.front();
    std::vector<std::string> found;
    messages_.clear();
    for (const Finding& f : report.findings) {
      found.push_back(fs::path(f.path).filename().string() + ":" + std::to_string(f.where.line) + ":" + f.code);
      messages_.push_back(f.message);
    }
    return found;
  }
  fs::path base_, root_, site_;
  std::vector<std::string> messages_;
};

// FlagScale's parallel context: its own create_group imports Megatron-LM's inside its body and is
// called for every rank list. Megatron is installed, not in the tree.
TEST_F(ProjectModelTree, WrappersOfInstalledPackagesCountLikeTheTreesOwn) {
  write(site_ / "megatron/__init__.py", "");
  write(site_ / "megatron/core/__init__.py", "");
  write(site_ / "megatron/core/parallel_state.py",
        "import torch\n"
        "def create_group(\n"
        "    ranks=None,\n"
        "    timeout=None,\n"
        "    backend=None,\n"
        "    group_desc=None,\n"
        "):\n"
        "    kwargs = {'ranks': ranks, 'timeout': timeout, 'backend': backend}\n"
        "    return torch.distributed.new_group(**kwargs)\n");
  write(root_ / "flagscale/train/parallel_context.py",
        "import torch\n"
        "\n"
        "def create_group(ranks=None, timeout=None, backend=None, group_desc=None):\n"
        "    from megatron.core.parallel_state import create_group as mcore_create_group\n"
        "    return mcore_create_group(ranks, timeout=timeout, backend=backend, group_desc=group_desc)\n"
        "\n"
        "class ParallelContext:\n"
        "    def build_tensor_groups(self, all_ranks):\n"
        "        for ranks in all_ranks:\n"
        "            group = create_group(ranks, group_desc=\"TENSOR_MODEL_PARALLEL_GROUP\")\n"
        "            if self.rank in ranks:\n"
        "                self.tp_group = group\n");
  EXPECT_EQ(findings(fakePython()), (std::vector<std::string>{"parallel_context.py:10:NM401"}));
  ASSERT_EQ(messages_.size(), 1u);
  EXPECT_NE(messages_[0].find("create_group -> megatron.core.parallel_state.create_group -> torch.distributed.new_group"),
            std::string::npos)
      << messages_[0];
  // Without the environment (and with the installed module's own wrapper unknown to the
  // catalogue's reading), the catalogue's row for Megatron-LM still stands in.
  EXPECT_EQ(findings("", false), (std::vector<std::string>{"parallel_context.py:10:NM401"}));
}

// The catalogue stands in for a library not installed: Megatron-LM's create_group in a loop.
TEST_F(ProjectModelTree, TheCatalogueStandsInForPackagesNotInstalled) {
  write(root_ / "train.py",
        "from megatron.core.parallel_state import create_group\n"
        "def expert_groups(layout):\n"
        "    return [create_group(ranks) for ranks in layout]\n"
        "def once():\n"
        "    return create_group([0, 1])\n");
  EXPECT_EQ(findings(fakePython()), (std::vector<std::string>{"train.py:3:NM401"}));
  ASSERT_EQ(messages_.size(), 1u);
  EXPECT_NE(messages_[0].find("megatron.core.parallel_state.create_group -> torch.distributed.new_group"), std::string::npos);
  // An interpreter named that cannot be run: one note, the same finding.
  LintOptions options;
  options.config.python = (base_ / "no-such-python").string();
  LintReport report = lintPaths({root_}, options);
  EXPECT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.warnings.size(), 1u);
}

// nnscaler's runtime: DeviceGroup() returns its module's singleton of a class whose get_group
// creates a group; an adapter calls it in a while loop in another file.
TEST_F(ProjectModelTree, MethodsOfAFactorysSingletonInAWhileLoop) {
  write(root_ / "nnscaler/runtime/device.py",
        "import torch\n"
        "\n"
        "class _DeviceGroup:\n"
        "    def __init__(self):\n"
        "        self.groups = dict()\n"
        "\n"
        "    def get_group(self, ranks):\n"
        "        rank_bits = tuple(sorted(ranks))\n"
        "        if rank_bits not in self.groups:\n"
        "            self.groups[rank_bits] = torch.distributed.new_group(list(ranks))\n"
        "        return self.groups[rank_bits]\n"
        "\n"
        "_instance = None\n"
        "\n"
        "def DeviceGroup():\n"
        "    global _instance\n"
        "    if _instance is None:\n"
        "        _instance = _DeviceGroup()\n"
        "    return _instance\n");
  write(root_ / "nnscaler/runtime/adapter/collectives.py",
        "from nnscaler.runtime.device import DeviceGroup\n"
        "\n"
        "def create_adapter_groups(plans):\n"
        "    idx = 0\n"
        "    while idx < len(plans):\n"
        "        DeviceGroup().get_group(plans[idx].ranks)\n"
        "        idx += 1\n");
  EXPECT_EQ(findings(fakePython()), (std::vector<std::string>{"collectives.py:6:NM401"}));
  ASSERT_EQ(messages_.size(), 1u);
  EXPECT_NE(messages_[0].find("DeviceGroup().get_group -> _DeviceGroup.get_group -> torch.distributed.new_group"),
            std::string::npos)
      << messages_[0];
}

// A manager class of static methods: one builds a family of subgroups, another calls it on its
// class for one node of a configuration tree, and a breadth-first walk calls that one for every
// child, in the class and from another file through the imported class.
TEST_F(ProjectModelTree, StaticMethodsCalledOnTheirClass) {
  write(root_ / "sim/distributed/manager.py",
        "import queue\n"
        "import torch.distributed as dist\n"
        "\n"
        "class DistributedManager:\n"
        "    @staticmethod\n"
        "    def create_subgroups(name, size):\n"
        "        for start in range(0, dist.get_world_size(), size):\n"
        "            dist.new_group(ranks=list(range(start, start + size)))\n"
        "\n"
        "    @staticmethod\n"
        "    def create_from_node(node):\n"
        "        DistributedManager.create_subgroups(node.name, node.size)\n"
        "        return node.name\n"
        "\n"
        "    @staticmethod\n"
        "    def create_from_config(config):\n"
        "        q = queue.Queue()\n"
        "        q.put(config.root)\n"
        "        while not q.empty():\n"
        "            for child in config.children(q.get()):\n"
        "                DistributedManager.create_from_node(child)\n"
        "                q.put(child)\n");
  write(root_ / "sim/train.py",
        "from sim.distributed.manager import DistributedManager\n"
        "\n"
        "def setup(nodes):\n"
        "    for node in nodes:\n"
        "        DistributedManager.create_from_node(node)\n"
        "    DistributedManager.create_from_node(nodes[0])\n"
        "\n"
        "class Other:\n"
        "    @staticmethod\n"
        "    def create_from_node(node):\n"
        "        return node\n"
        "\n"
        "def unrelated(nodes):\n"
        "    for node in nodes:\n"
        "        Other.create_from_node(node)\n");
  EXPECT_EQ(findings(fakePython()),
            (std::vector<std::string>{"manager.py:8:NM401", "manager.py:21:NM401", "train.py:5:NM401"}));
}

// A mesh class whose constructor creates its groups only where a flag asks for them, as torch's
// DeviceMesh does with `_init_backend`: a loop of meshes made with the flag False creates none;
// another keyword passed False, or a constructor that also creates outside the flag's arm, does.
TEST_F(ProjectModelTree, AKeywordThatTurnsAWrappersCreationOff) {
  write(root_ / "meshlib/mesh.py",
        "import torch.distributed as dist\n"
        "\n"
        "class Mesh:\n"
        "    def __init__(self, ranks, init_groups=True):\n"
        "        self.ranks = ranks\n"
        "        if init_groups:\n"
        "            self.groups = Mesh._make_groups(ranks)\n"
        "\n"
        "    @staticmethod\n"
        "    def _make_groups(ranks):\n"
        "        return [dist.new_group(r) for r in ranks]\n"
        "\n"
        "    def submeshes(self, layouts):\n"
        "        return [Mesh(layout, init_groups=False) for layout in layouts]\n"
        "\n"
        "def meshes(layouts):\n"
        "    for layout in layouts:\n"
        "        Mesh(layout)\n"
        "\n"
        "def views(layouts):\n"
        "    for layout in layouts:\n"
        "        Mesh(layout, init_groups=None)\n"
        "\n"
        "def unrelated(layouts):\n"
        "    for layout in layouts:\n"
        "        Mesh(layout, other=False)\n"
        "\n"
        "def eager(layouts):\n"
        "    for layout in layouts:\n"
        "        Mesh(layout, init_groups=True)\n");
  // A constructor that also creates a group outside the flag's arm keeps creating with it off.
  write(root_ / "meshlib/world.py",
        "import torch.distributed as dist\n"
        "\n"
        "class World:\n"
        "    def __init__(self, ranks, init_groups=True):\n"
        "        if init_groups:\n"
        "            self.group = dist.new_group(ranks)\n"
        "        self.cpu = dist.new_group(ranks)\n"
        "\n"
        "def worlds(layouts):\n"
        "    for layout in layouts:\n"
        "        World(layout, init_groups=False)\n");
  // A module's function with a switch, which the frontend decides at each call by its keywords.
  write(root_ / "meshlib/groups.py",
        "import torch.distributed as dist\n"
        "\n"
        "def make(ranks, init=True):\n"
        "    if init:\n"
        "        return dist.new_group(ranks)\n"
        "\n"
        "def loops(layouts):\n"
        "    for layout in layouts:\n"
        "        make(layout, init=False)\n"
        "    for layout in layouts:\n"
        "        make(layout, init=True)\n");
  EXPECT_EQ(findings(fakePython()), (std::vector<std::string>{"groups.py:11:NM401", "mesh.py:11:NM401", "mesh.py:18:NM401",
                                                              "mesh.py:26:NM401", "mesh.py:30:NM401", "world.py:11:NM401"}));
}

// Where a flag is no switch: a parameter rebound before its test (None meaning "the default"), a
// creation through a helper that the table finds only in a later pass, a flag of the enclosing
// function rather than the wrapper's own, and a helper that passes the flag on without testing it.
TEST_F(ProjectModelTree, ASwitchHoldsOnlyWhereEveryCreationStandsUnderIt) {
  write(root_ / "meshlib/helpers.py",
        "import torch.distributed as dist\n"
        "\n"
        "def cpu_group(ranks):\n"
        "    return dist.new_group(ranks)\n");
  write(root_ / "meshlib/mesh.py",
        "import torch.distributed as dist\n"
        "from meshlib.helpers import cpu_group\n"
        "\n"
        "def groups_enabled():\n"
        "    return True\n"
        "\n"
        "class Mesh:\n"
        "    def __init__(self, ranks, init_groups=None):\n"
        "        if init_groups is None:\n"
        "            init_groups = groups_enabled()\n"
        "        if init_groups:\n"
        "            self.group = dist.new_group(ranks)\n"
        "\n"
        "class World:\n"
        "    def __init__(self, ranks, init_groups=True):\n"
        "        if init_groups:\n"
        "            self.group = dist.new_group(ranks)\n"
        "        self.cpu = cpu_group(ranks)\n"
        "\n"
        "def build(layouts, lazy=False):\n"
        "    if lazy:\n"
        "        def make(ranks, lazy=False):\n"
        "            return dist.new_group(ranks)\n"
        "        for layout in layouts:\n"
        "            make(layout, lazy=False)\n"
        "\n"
        "def make_world(ranks, init_groups=True):\n"
        "    return World(ranks, init_groups=init_groups)\n"
        "\n"
        "def loops(layouts):\n"
        "    for layout in layouts:\n"
        "        Mesh(layout, init_groups=None)\n"
        "    for layout in layouts:\n"
        "        World(layout, init_groups=False)\n"
        "    for layout in layouts:\n"
        "        make_world(layout, init_groups=False)\n");
  EXPECT_EQ(findings(fakePython()), (std::vector<std::string>{"mesh.py:25:NM401", "mesh.py:32:NM401", "mesh.py:34:NM401",
                                                              "mesh.py:36:NM401"}));
}

// An attribute assigned once in __init__, and a module-level instance imported elsewhere.
TEST_F(ProjectModelTree, ReceiversTypedByTheirConstruction) {
  write(root_ / "trainer/groups.py",
        "import torch.distributed as dist\n"
        "class GroupMaker:\n"
        "    def make(self, ranks):\n"
        "        return dist.new_group(ranks)\n"
        "GROUPS = GroupMaker()\n");
  write(root_ / "trainer/engine.py",
        "from trainer.groups import GroupMaker, GROUPS\n"
        "class Engine:\n"
        "    def __init__(self):\n"
        "        self.maker = GroupMaker()\n"
        "    def data_groups(self, layout):\n"
        "        for ranks in layout:\n"
        "            self.maker.make(ranks)\n"
        "def pipeline_groups(layout):\n"
        "    for ranks in layout:\n"
        "        GROUPS.make(ranks)\n"
        "def local_groups(layout):\n"
        "    maker = GroupMaker()\n"
        "    return [maker.make(r) for r in layout]\n"
        "def unrelated(layout, other):\n"
        "    for r in layout:\n"
        "        other.make(r)\n");
  EXPECT_EQ(findings(fakePython()),
            (std::vector<std::string>{"engine.py:7:NM401", "engine.py:10:NM401", "engine.py:13:NM401"}));
}

// fairscale's graph manager: each Edge makes a 2-rank group in its constructor; edges are built
// in a loop over peers.
TEST_F(ProjectModelTree, ConstructingAClassWhoseInitCreatesAGroup) {
  write(root_ / "gossip/graph_manager.py",
        "import torch.distributed as dist\n"
        "\n"
        "class Edge(object):\n"
        "    def __init__(self, local_master_rank, dest, src, local_rank):\n"
        "        self.src = src\n"
        "        self.dest = dest\n"
        "        self.process_group = dist.new_group([src, dest])\n"
        "\n"
        "class GraphManager:\n"
        "    def _add_peers(self, rank, peers):\n"
        "        for peer in peers:\n"
        "            if peer not in self.phone_book[rank]:\n"
        "                self.phone_book[rank].append(\n"
        "                    Edge(\n"
        "                        local_master_rank=self.rank,\n"
        "                        dest=peer,\n"
        "                        src=rank,\n"
        "                        local_rank=self.local_rank,\n"
        "                    )\n"
        "                )\n");
  EXPECT_EQ(findings(fakePython()), (std::vector<std::string>{"graph_manager.py:14:NM401"}));
}

// Megatron-LM's initialize_model_parallel, as far as the linter reads it, and a script calling it once.
constexpr const char* kInitializeModelParallel =
    "import torch\n"
    "\n"
    "def initialize_model_parallel(tensor_model_parallel_size=1):\n"
    "    world = torch.distributed.get_world_size()\n"
    "    for start in range(0, world, tensor_model_parallel_size):\n"
    "        torch.distributed.new_group(list(range(start, start + tensor_model_parallel_size)))\n";
constexpr const char* kCallsInitializeModelParallel =
    "from megatron.core import parallel_state\n"
    "\n"
    "def main():\n"
    "    parallel_state.initialize_model_parallel(2)\n";

// A library of the catalogue linted as the tree itself (Megatron-LM's own repository): its
// initialize_model_parallel is the tree's wrapper, whose loop is reported where it stands, and a
// call of it elsewhere in the tree is one call of a wrapper, as for any wrapper of the tree.
TEST_F(ProjectModelTree, ALibraryFunctionTheTreeDefinesIsTheTreesWrapper) {
  write(root_ / "megatron/core/parallel_state.py", kInitializeModelParallel);
  write(root_ / "examples/train.py", kCallsInitializeModelParallel);
  EXPECT_EQ(findings(fakePython()), (std::vector<std::string>{"parallel_state.py:6:NM401"}));
}

// The library's tree calls the function under the other name its package gives the module
// (megatron.core's `mpu = parallel_state`): the row of that name stands aside too.
TEST_F(ProjectModelTree, ALibrarysOtherNameForItsModuleIsTheTreesWrapperToo) {
  write(root_ / "megatron/core/parallel_state.py", kInitializeModelParallel);
  write(root_ / "megatron/training/initialize.py",
        "from megatron.core import mpu\n"
        "\n"
        "def initialize(args):\n"
        "    mpu.initialize_model_parallel(args.tensor_model_parallel_size)\n");
  EXPECT_EQ(findings(fakePython()), (std::vector<std::string>{"parallel_state.py:6:NM401"}));
}

// A test's stand-in for the library, under a tests folder, is no copy of it: the row stays in
// force for the application's call of the library.
TEST_F(ProjectModelTree, ATestsStandInForTheLibraryLeavesTheRowInForce) {
  write(root_ / "tests/megatron/core/fake_state.py", kInitializeModelParallel);
  write(root_ / "train.py", kCallsInitializeModelParallel);
  EXPECT_EQ(findings(fakePython()), (std::vector<std::string>{"fake_state.py:6:NM401", "train.py:4:NM401"}));
}

// The same library installed where lint runs: the catalogue's row says what the call makes (a
// group per block of ranks), which one call of an installed wrapper would not show.
TEST_F(ProjectModelTree, ALibraryFunctionInstalledIsReportedAtItsCall) {
  write(site_ / "megatron/__init__.py", "");
  write(site_ / "megatron/core/__init__.py", "");
  write(site_ / "megatron/core/parallel_state.py", kInitializeModelParallel);
  write(root_ / "train.py", kCallsInitializeModelParallel);
  EXPECT_EQ(findings(fakePython()), (std::vector<std::string>{"train.py:4:NM401"}));
}

// A method of that name in a test double of the library's module is no definition of the library's
// function: the row stays in force for the tree's call of it.
TEST_F(ProjectModelTree, AMethodOfTheLibrarysNameLeavesTheRowInForce) {
  write(root_ / "tests/megatron/core/parallel_state.py",
        "import torch\n"
        "\n"
        "class FakeState:\n"
        "    def initialize_model_parallel(self, size):\n"
        "        for start in range(0, 8, size):\n"
        "            torch.distributed.new_group(list(range(start, start + size)))\n");
  write(root_ / "train.py", kCallsInitializeModelParallel);
  EXPECT_EQ(findings(fakePython()), (std::vector<std::string>{"parallel_state.py:6:NM401", "train.py:4:NM401"}));
}

// A package the project declares equivalent to a library's (a vendored copy under another name)
// brings its calls to the rule as the library's own name does.
TEST_F(ProjectModelTree, ALibraryUnderAnEquivalentNameIsReportedAtItsCall) {
  write(root_ / "train.py",
        "from myfairscale.nn.model_parallel.initialize import initialize_model_parallel\n"
        "\n"
        "def main():\n"
        "    initialize_model_parallel(2)\n");
  LintOptions options;
  options.config.environment = false;
  options.config.equivalentModules = {{"myfairscale", "fairscale"}};
  LintReport report = lintPaths({root_}, options);
  std::vector<std::string> found;
  for (const Finding& f : report.findings)
    found.push_back(fs::path(f.path).filename().string() + ":" + std::to_string(f.where.line) + ":" + f.code);
  EXPECT_EQ(found, (std::vector<std::string>{"train.py:4:NM401"}));
}

TEST(GroupWrapperCatalogue, EveryRowNamesItsSource) {
  const std::vector<KnownWrapper>& rows = groupWrapperCatalogue();
  ASSERT_GE(rows.size(), 5u);
  for (const KnownWrapper& row : rows) {
    EXPECT_NE(row.source.find('@'), std::string::npos) << row.module << "." << row.function;
    EXPECT_TRUE(row.creates.starts_with("torch.distributed.")) << row.module << "." << row.function;
  }
}

TEST(PythonEnvironment, SysPathWithoutTheStandardLibraryOrTheCurrentFolder) {
  fs::path tmp = fs::temp_directory_path();
  std::string printed = "{\"path\": [\"\", \"" + tmp.string() + "\", \"/no/such/folder\"], \"stdlib\": [\"/usr/lib/python3.11\"]}";
  EXPECT_EQ(searchPathFromJson(printed), (std::vector<fs::path>{tmp.lexically_normal()}));
  EXPECT_TRUE(searchPathFromJson("not json").empty());
}

}  // namespace
}  // namespace nccl_migrate::lint
