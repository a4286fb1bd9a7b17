// NM102's messages state what the file showed and nothing more: a multiple of a count names the
// count (and, where the count is not a number, that it agrees only when that count is 1), an
// init whose backend the file does not show says so and carries no fix, and a device from
// another file's function names that function and what it returns, in a run over the project as
// where the table of such functions is given by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nccl_migrate/lint/linter.h"
#include "nccl_migrate/lint/rule.h"
#include "python/python_frontend.h"
#include "python/python_parameter_callers.h"

namespace nccl_migrate::lint {
namespace {

std::vector<Finding> deviceFindings(const std::string& text) {
  std::vector<Finding> out;
  for (Finding& f : lintSource("job.py", text).findings)
    if (f.code == "NM102") out.push_back(std::move(f));
  return out;
}

const std::string kHeader = "import os\nimport torch\nimport torch.distributed as dist\n";

TEST(InitDeviceEvidence, AMultipleOfACountNamesTheCount) {
  auto found = deviceFindings(kHeader +
                              "def worker(gpus_per_worker):\n"
                              "    first = int(os.environ[\"LOCAL_RANK\"]) * gpus_per_worker\n"
                              "    torch.cuda.set_device(first)\n"
                              "    dist.init_process_group(\"nccl\")\n");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("selects cuda:(LOCAL_RANK * gpus_per_worker)"), std::string::npos) << found[0].message;
  EXPECT_NE(found[0].message.find("a rank whose global rank % device_count() is 1 gets cuda:1, no multiple of "
                                  "gpus_per_worker unless gpus_per_worker is 1"),
            std::string::npos)
      << found[0].message;
}

TEST(InitDeviceEvidence, AnItemOfAListNamesTheListAndWhenItAgrees) {
  auto found = deviceFindings(kHeader +
                              "def worker(config):\n"
                              "    local_rank = int(os.environ[\"LOCAL_RANK\"])\n"
                              "    torch.cuda.set_device(config.device_ids[local_rank])\n"
                              "    dist.init_process_group(\"nccl\")\n");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("selects cuda:config.device_ids[local_rank], an item of config.device_ids, "),
            std::string::npos)
      << found[0].message;
  EXPECT_NE(found[0].message.find("the same device only where the list holds each rank's global rank % "
                                  "device_count() at its place"),
            std::string::npos)
      << found[0].message;
}

TEST(InitDeviceEvidence, AMultipleOfANumberHasNoCondition) {
  auto found = deviceFindings(kHeader +
                              "torch.cuda.set_device(2 * int(os.environ[\"LOCAL_RANK\"]))\n"
                              "dist.init_process_group(\"nccl\")\n");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("selects cuda:(2 * LOCAL_RANK)"), std::string::npos) << found[0].message;
  EXPECT_NE(found[0].message.find("no multiple of 2. "), std::string::npos) << found[0].message;
  EXPECT_EQ(found[0].message.find("unless"), std::string::npos) << found[0].message;
}

TEST(InitDeviceEvidence, TimesOneIsTheIndexItself) {
  EXPECT_TRUE(deviceFindings(kHeader +
                             "torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"]) * 1)\n"
                             "dist.init_process_group(\"nccl\")\n")
                  .empty());
}

TEST(InitDeviceEvidence, ABackendNotShownIsNamedAndGetsNoFix) {
  std::string selection = "    torch.cuda.set_device(int(os.environ[\"RANK\"]) % 8)\n";
  auto unread = deviceFindings(kHeader + "def setup(cfg):\n" + selection + "    dist.init_process_group(backend=cfg.backend)\n");
  ASSERT_EQ(unread.size(), 1u);
  EXPECT_NE(unread[0].message.find("init_process_group() without device_id and backend=cfg.backend, which this file "
                                   "does not show to be nccl (what follows holds where it is); "),
            std::string::npos)
      << unread[0].message;
  EXPECT_FALSE(unread[0].fix.has_value());

  auto nccl = deviceFindings(kHeader + "def setup(cfg):\n" + selection + "    dist.init_process_group(backend=\"nccl\")\n");
  ASSERT_EQ(nccl.size(), 1u);
  EXPECT_EQ(nccl[0].message.find("does not show"), std::string::npos) << nccl[0].message;
  EXPECT_TRUE(nccl[0].fix.has_value());
}

TEST(InitDeviceEvidence, NamesNoneOfWhichIsNcclAreNotReported) {
  EXPECT_TRUE(deviceFindings(kHeader +
                             "def setup(cpu):\n"
                             "    backend = \"gloo\" if cpu else \"mpi\"\n"
                             "    torch.cuda.set_device(0)\n"
                             "    dist.init_process_group(backend)\n")
                  .empty());
}

// The project model's part, done here by hand: each return of `helper` (a file of module
// mypkg.utils) traced in its own file, as NameEquivalences::functionReturns carries it.
NameEquivalences helperReturns(const std::string& helper, const std::string& module) {
  SourceModel model = parsePython("helper.py", helper, {});
  NameEquivalences names;
  for (const Binding& r : model.returns) names.functionReturns[module + ":" + r.name].push_back(traceBinding(model, r));
  return names;
}

std::vector<Finding> findingsWithHelper(const std::string& helper, const std::string& text,
                                        const std::string& module = "mypkg.utils") {
  SourceModel model = parsePython("train.py", text, helperReturns(helper, module));
  LintConfig config;
  std::vector<Finding> out;
  findRule("NM102")->check(model, RuleContext{config}, out);
  return out;
}

const std::string kTrainer = kHeader +
                             "from mypkg.utils import get_rank\n"
                             "def main():\n"
                             "    torch.cuda.set_device(get_rank())\n"
                             "    device = torch.device(f\"cuda:{get_rank()}\")\n"
                             "    dist.init_process_group(backend=\"nccl\")\n";

TEST(InitDeviceEvidence, AnotherFilesGlobalRankIsNamedWithWhatItReturns) {
  auto found = findingsWithHelper(
      "import torch.distributed as dist\n"
      "def get_rank():\n"
      "    return dist.get_rank() if dist.is_initialized() else 0\n",
      kTrainer);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("torch.cuda.set_device(get_rank()) at line 6 selects cuda:get_rank() "
                                  "(mypkg.utils.get_rank (defined in another file) returns "
                                  "torch.distributed.get_rank() or 0)"),
            std::string::npos)
      << found[0].message;
  EXPECT_NE(found[0].message.find("the same device only where the job has no more ranks than a node has GPUs"),
            std::string::npos)
      << found[0].message;

  // Defined in a module of the package the import names (its __init__.py re-exports it), with a
  // return in each arm.
  auto reExported = findingsWithHelper(
      "import torch\n"
      "def get_rank():\n"
      "    if torch.distributed.is_initialized():\n"
      "        return torch.distributed.get_rank()\n"
      "    return 0\n",
      kTrainer, "mypkg.utils.distributed");
  ASSERT_EQ(reExported.size(), 1u);
  EXPECT_NE(reExported[0].message.find("(mypkg.utils.get_rank (defined in another file) returns "
                                       "torch.distributed.get_rank() or 0)"),
            std::string::npos)
      << reExported[0].message;

  auto fromEnvironment = findingsWithHelper("import os\ndef get_rank():\n    return int(os.environ[\"RANK\"])\n", kTrainer);
  ASSERT_EQ(fromEnvironment.size(), 1u);
  EXPECT_NE(fromEnvironment[0].message.find("selects cuda:RANK (mypkg.utils.get_rank (defined in another file) "
                                            "returns os.environ[\"RANK\"])"),
            std::string::npos)
      << fromEnvironment[0].message;
}

TEST(InitDeviceEvidence, AnotherFilesLocalRankIsNotReported) {
  EXPECT_TRUE(findingsWithHelper("import os\ndef get_rank():\n    return int(os.environ[\"LOCAL_RANK\"])\n", kTrainer).empty());
  EXPECT_TRUE(findingsWithHelper("import torch\nimport torch.distributed as dist\n"
                                 "def get_rank():\n    return dist.get_rank() % torch.cuda.device_count()\n",
                                 kTrainer)
                  .empty());
}

TEST(InitDeviceEvidence, AFunctionOfAnotherFileNotKnownIsNoEvidence) {
  EXPECT_TRUE(findingsWithHelper("", kTrainer).empty());
  // A function of the same name in a module the import does not name.
  SourceModel helper = parsePython("other/utils.py", "import os\ndef get_rank():\n    return int(os.environ[\"RANK\"])\n", {});
  NameEquivalences names;
  names.functionReturns["other.utils:get_rank"].push_back(traceBinding(helper, helper.returns.front()));
  SourceModel model = parsePython("train.py", kTrainer, names);
  LintConfig config;
  std::vector<Finding> out;
  findRule("NM102")->check(model, RuleContext{config}, out);
  EXPECT_TRUE(out.empty());
}

// A run over a project: the module-level function a device selection calls is read in the file that
// defines it, whatever the order the files come in.
class DeviceHelperProject : public testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("nccl-migrate-device-helper-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "mypkg");
    write("mypkg/__init__.py", "");
    write("train.py",
          "import torch\n"
          "import torch.distributed as dist\n"
          "from mypkg.utils import get_rank\n"
          "def main():\n"
          "    dist.init_process_group(backend=\"nccl\")\n"
          "    torch.cuda.set_device(get_rank())\n");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void write(const std::string& file, const std::string& text) { std::ofstream(root_ / file) << text; }
  std::vector<Finding> findings(const std::string& select = "") {
    LintOptions options;
    options.jobs = 2;
    options.config.environment = false;
    if (!select.empty()) options.config.select = {select};
    LintReport report = lintPaths({root_}, options);
    EXPECT_TRUE(report.warnings.empty()) << report.warnings.front();
    std::vector<Finding> out;
    for (Finding& f : report.findings)
      if (f.code == "NM102") out.push_back(std::move(f));
    return out;
  }
  std::filesystem::path root_;
};

TEST_F(DeviceHelperProject, AHelperReturningTheGlobalRankIsNamed) {
  write("mypkg/utils.py",
        "import torch.distributed as dist\n"
        "def get_rank():\n"
        "    return dist.get_rank() if dist.is_initialized() else 0\n");
  for (const std::string& select : {std::string(), std::string("NM102")}) {
    auto found = findings(select);
    ASSERT_EQ(found.size(), 1u) << select;
    EXPECT_EQ(std::filesystem::path(found[0].path).filename(), "train.py");
    EXPECT_NE(found[0].message.find("selects cuda:get_rank() (mypkg.utils.get_rank (defined in another file) returns "
                                    "torch.distributed.get_rank() or 0)"),
              std::string::npos)
        << found[0].message;
  }
}

TEST_F(DeviceHelperProject, AHelperReturningTheLocalRankIsNotReported) {
  write("mypkg/utils.py", "import os\ndef get_rank():\n    return int(os.environ[\"LOCAL_RANK\"])\n");
  EXPECT_TRUE(findings().empty());
}

TEST_F(DeviceHelperProject, OnlyAModuleLevelFunctionIsFollowed) {
  // A method of the same name is no function the import names.
  write("mypkg/utils.py",
        "import torch.distributed as dist\n"
        "class Ranks:\n"
        "    def get_rank(self):\n"
        "        return dist.get_rank()\n");
  EXPECT_TRUE(findings().empty());
}


// A method's string default (`backend="gloo"`) is its world's backend only where no call in the
// linted tree passes another value: a benchmark that passes its own backend from another file makes
// the backend the caller's, so the init and the groups are read as a world the file does not show.
class CallerBackendProject : public testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("nccl-migrate-caller-backend-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "bench");
    write("bench/__init__.py", "");
    write("bench/dist_backend.py",
          "import os\n"
          "import torch\n"
          "import torch.distributed as dist\n"
          "\n"
          "class DistBackend:\n"
          "    def initialize_backend(self, master_ip, master_port, backend=\"gloo\"):\n"
          "        torch.cuda.set_device(int(os.environ[\"RANK\"]) % 8)\n"
          "        dist.init_process_group(backend, init_method=f\"tcp://{master_ip}:{master_port}\")\n"
          "\n"
          "    def initialize_groups(self, group_ranks, backend=\"gloo\"):\n"
          "        return [dist.new_group(ranks, backend=backend) for ranks in group_ranks]\n");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void write(const std::string& file, const std::string& text) { std::ofstream(root_ / file) << text; }
  // "code:line" of each finding in dist_backend.py.
  std::vector<std::string> findings() {
    LintOptions options;
    options.jobs = 2;
    options.config.environment = false;
    LintReport report = lintPaths({root_}, options);
    EXPECT_TRUE(report.warnings.empty()) << report.warnings.front();
    std::vector<std::string> out;
    for (const Finding& f : report.findings)
      if (std::filesystem::path(f.path).filename() == "dist_backend.py") out.push_back(f.code + ":" + std::to_string(f.where.line));
    return out;
  }
  std::filesystem::path root_;
};

TEST_F(CallerBackendProject, ACallerPassingItsBackendMakesTheWorldTheCallers) {
  write("bench/run.py",
        "from bench.dist_backend import DistBackend\n"
        "\n"
        "def run(args):\n"
        "    comms = DistBackend()\n"
        "    comms.initialize_backend(args.master_ip, args.master_port, backend=args.backend)\n"
        "    comms.initialize_groups(args.group_ranks, args.backend)\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"NM102:8", "NM401:11"}));
}

TEST_F(CallerBackendProject, CallersLeavingTheDefaultKeepAGlooWorld) {
  write("bench/run.py",
        "from bench.dist_backend import DistBackend\n"
        "\n"
        "def run(args):\n"
        "    comms = DistBackend()\n"
        "    comms.initialize_backend(args.master_ip, args.master_port)\n"
        "    comms.initialize_groups(args.group_ranks, backend=\"gloo\")\n");
  EXPECT_TRUE(findings().empty());
}

// Which arguments a call passes, as a scan of the text tells it.
TEST(ParametersCallersPass, ArgumentsByKeywordPositionAndUnpacking) {
  std::string definitions =
      "def job(world, backend=\"gloo\", *, store_backend='gloo'):\n    pass\n"
      "class Runner:\n"
      "    def __init__(self, backend: str = \"gloo\"):\n        pass\n"
      "    def start(self, backend=\"gloo\"):\n        pass\n";
  auto passed = [&](const std::string& calls) { return parametersCallersPass({definitions, calls}); };
  EXPECT_TRUE(passed("job(2)\nRunner().start()\n").empty());
  EXPECT_TRUE(passed("job(2, 'gloo', store_backend=\"gloo\")\n").empty());  // the default itself
  EXPECT_EQ(passed("job(2, args.backend)\n"), (std::set<std::string>{"job:backend"}));
  EXPECT_EQ(passed("job(2, store_backend=b)\n"), (std::set<std::string>{"job:store_backend"}));
  EXPECT_EQ(passed("job(*argv)\n"), (std::set<std::string>{"job:backend"}));  // keyword-only stays
  EXPECT_EQ(passed("job(2, **options)\n"), (std::set<std::string>{"job:backend", "job:store_backend"}));
  EXPECT_EQ(passed("Runner(args.backend)\n"), (std::set<std::string>{"Runner:backend"}));
  EXPECT_EQ(passed("runner.start(\"nccl\")\n"), (std::set<std::string>{"start:backend"}));
  // A name after `def` or `class` is no call; a call over several lines, with comments and nested
  // brackets, is read whole.
  EXPECT_TRUE(passed("def job(x, backend='nccl'):\n    pass\nclass job(Base):\n    pass\n").empty());
  EXPECT_EQ(passed("job(\n    [1, (2, 3)],  # world\n    backend=cfg[\"b\"],\n)\n"), (std::set<std::string>{"job:backend"}));
}


// Only a call that can reach the definition counts: in its own module, one that names the
// defining module (as importing it does), or a method's call on an object. Another class's
// `super().__init__(...)`, a `setup(**kwargs)` of setuptools' in setup.py, or an explicit
// `Base.__init__(self)` passes nothing to a harness's own `__init__` or `setup`.
TEST(ParametersCallersPass, OnlyCallsThatCanReachTheDefinition) {
  std::string harness =
      "import torch.distributed as dist\n"
      "class GlooHarness:\n"
      "    def __init__(self, world_size, backend=\"gloo\"):\n"
      "        dist.init_process_group(backend, world_size=world_size)\n"
      "def setup(rank, world_size, backend=\"gloo\"):\n"
      "    dist.init_process_group(backend, rank=rank, world_size=world_size)\n";
  std::vector<std::string> modules{"pkg.harness", "pkg.other"};
  auto passed = [&](const std::string& other) { return parametersCallersPass({harness, other}, modules, 2); };
  EXPECT_TRUE(passed("from torch import nn\nclass Wide(nn.Module):\n    def __init__(self, dim):\n"
                     "        super().__init__(dim, dim)\n").empty());
  EXPECT_TRUE(passed("from setuptools import setup\nsetup(**dict(name='pkg'))\n").empty());
  EXPECT_TRUE(passed("from pkg.harness import GlooHarness\nclass Fast(GlooHarness):\n    def __init__(self):\n"
                     "        GlooHarness.__init__(self)\n").empty());
  EXPECT_EQ(passed("from pkg.harness import GlooHarness\nGlooHarness(8, args.backend)\n"),
            (std::set<std::string>{"pkg.harness.GlooHarness:backend"}));
  EXPECT_EQ(passed("from pkg import harness\nharness.setup(0, 8, backend=args.backend)\n"),
            (std::set<std::string>{"pkg.harness.setup:backend"}));
  EXPECT_EQ(passed("def main(args):\n    from pkg.harness import setup\n    setup(0, 8, **vars(args))\n"),
            (std::set<std::string>{"pkg.harness.setup:backend"}));
}

// The defining module is named only by an import of it: `torch.utils` in code, or an import of
// torch's utils, is no import of the tree's `pkg.utils`.
TEST(ParametersCallersPass, AModulesNameOnlyInAnImportOfIt) {
  std::string utils = "def init_dist(backend=\"gloo\"):\n    pass\n";
  std::vector<std::string> modules{"pkg.utils", "train"};
  auto passed = [&](const std::string& other) { return parametersCallersPass({utils, other}, modules, 1); };
  EXPECT_TRUE(passed("import torch.utils.data\nfrom launcher.helpers import init_dist\ninit_dist(\"nccl\")\n").empty());
  EXPECT_TRUE(passed("# see pkg/utils.py\nx = loader.utils\ninit_dist(\"nccl\")\n").empty());
  EXPECT_EQ(passed("from pkg.utils import init_dist\ninit_dist(\"nccl\")\n"), (std::set<std::string>{"pkg.utils.init_dist:backend"}));
  EXPECT_EQ(passed("from pkg import utils\nutils.init_dist(backend=\"nccl\")\n"), (std::set<std::string>{"pkg.utils.init_dist:backend"}));
}

// Two functions of one name in two modules keep their own callers: a logging helper's
// `setup("syslog")` passes nothing to a training script's `setup(backend="gloo")`.
TEST(ParametersCallersPass, FunctionsOfOneNameInTwoModules) {
  std::string job = "def setup(backend=\"gloo\"):\n    pass\nsetup()\n";
  std::string logs = "def setup(backend=\"gloo\"):\n    pass\nsetup(\"syslog\")\n";
  EXPECT_EQ(parametersCallersPass({job, logs}, {"a.job", "b.other"}, 1), (std::set<std::string>{"b.other.setup:backend"}));
}

// A name passed on is read where the call stands: its last assignment in the calling function, or
// the calling function's own parameter of that name, whose callers then decide.
TEST(ParametersCallersPass, ANamePassedOnIsReadWhereTheCallStands) {
  std::string groups =
      "def make_groups(layout, cpu_backend: str = 'gloo'):\n    pass\n"
      "def build_tp(layout,\n             cpu_backend: str = 'gloo'):\n"
      "    make_groups(layout, cpu_backend=cpu_backend)\n";
  auto passed = [&](const std::string& caller) { return parametersCallersPass({groups, caller}, 2); };
  EXPECT_TRUE(passed("def setup(layout):\n    cpu_backend = 'gloo'\n    build_tp(layout, cpu_backend)\n").empty());
  EXPECT_TRUE(passed("build_tp([[0, 1]])\n").empty());
  std::set<std::string> both{"build_tp:cpu_backend", "make_groups:cpu_backend"};
  EXPECT_EQ(passed("def setup(layout, args):\n    build_tp(layout, args.cpu_backend)\n"), both);
  EXPECT_EQ(passed("def setup(layout, args):\n    cpu_backend = args.cpu_backend\n    build_tp(layout, cpu_backend)\n"), both);
  EXPECT_EQ(passed("def setup(layout, cpu_backend):\n    build_tp(layout, cpu_backend)\n"), both);
}

}  // namespace
}  // namespace nccl_migrate::lint
