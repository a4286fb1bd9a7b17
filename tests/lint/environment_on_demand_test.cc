// The environment is asked for only what can change a finding: installed modules are read for the
// names the tree calls in a loop or many times (directly or through its own functions), the
// interpreter starts on the first read, and no .pth file's code runs when it does.
#include "python/group_wrappers.h"
#include "python/python_environment.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace nccl_migrate::lint {
namespace {
namespace fs = std::filesystem;

// An installed package's module that wraps new_group.
constexpr const char* kInstalledWrapper =
    "import torch.distributed as dist\n"
    "def make_group(ranks):\n"
    "    return dist.new_group(ranks)\n"
    "class Maker:\n"
    "    def make(self, ranks):\n"
    "        return dist.new_group(ranks)\n";

// The table of `tree` (module name -> source) with an environment holding `installed`; `asked`
// gets every module the table reads.
GroupWrapperTable tableOf(const std::map<std::string, std::string>& tree, const std::map<std::string, std::string>& installed,
                          std::vector<std::string>& asked, int groupSitesThreshold = 4) {
  std::vector<std::string_view> texts;
  std::vector<std::string> modules;
  for (const auto& [module, text] : tree) {
    modules.push_back(module);
    texts.push_back(text);
  }
  ModuleReader reader = [&](const std::string& dotted) -> std::optional<std::string> {
    asked.push_back(dotted);
    auto it = installed.find(dotted);
    if (it == installed.end()) return std::nullopt;
    return it->second;
  };
  return buildGroupWrapperTable(texts, modules, 2, reader, {}, groupSitesThreshold);
}

std::string chains(const GroupWrapperTable& table) {
  std::string out;
  for (const ProjectSite& site : table.sites) out += site.via + "\n";
  return out;
}

TEST(EnvironmentOnDemand, CallsOutsideLoopsAndTheStandardLibraryReadNothing) {
  std::vector<std::string> asked;
  GroupWrapperTable table = tableOf(
      {{"app.main",
        "import os\n"
        "import numpy as np\n"
        "from grouplib.groups import make_group\n"
        "def setup_once(ranks):\n"
        "    return make_group(ranks)\n"
        "def shapes(paths):\n"
        "    for p in paths:\n"
        "        os.path.join(p, 'x')\n"
        "    return np.zeros(3)\n"}},
      {{"grouplib.groups", kInstalledWrapper}}, asked);
  EXPECT_TRUE(asked.empty()) << asked.front();
  EXPECT_TRUE(table.environmentModules.empty());
}

TEST(EnvironmentOnDemand, AnInstalledWrapperCalledInALoopIsReadWithItsChain) {
  std::vector<std::string> asked;
  GroupWrapperTable table = tableOf(
      {{"app.main",
        "import numpy as np\n"
        "from grouplib.groups import make_group\n"
        "def build(layout):\n"
        "    np.zeros(3)\n"
        "    return [make_group(r) for r in layout]\n"}},
      {{"grouplib.groups", kInstalledWrapper}}, asked);
  // Once a loop needs the interpreter, every module the tree calls through is read (numpy's
  // module file costs a read; telling it apart would cost a parse).
  EXPECT_EQ(asked, (std::vector<std::string>{"grouplib.groups", "grouplib.groups.make_group", "numpy"}));
  EXPECT_EQ(table.environmentModules, (std::vector<std::string>{"grouplib.groups"}));
  EXPECT_NE(chains(table).find("grouplib.groups.make_group -> torch.distributed.new_group"), std::string::npos) << chains(table);
}

// The tree's own wrapper calls the installed one once; the tree's wrapper is called in a loop.
TEST(EnvironmentOnDemand, ThroughTheTreesOwnFunctionCalledInALoop) {
  std::vector<std::string> asked;
  GroupWrapperTable table = tableOf(
      {{"app.parallel",
        "def create_group(ranks):\n"
        "    from grouplib.groups import make_group as lib_make_group\n"
        "    return lib_make_group(ranks)\n"},
       {"app.train",
        "from app.parallel import create_group\n"
        "def build(layout):\n"
        "    for ranks in layout:\n"
        "        create_group(ranks)\n"}},
      {{"grouplib.groups", kInstalledWrapper}}, asked);
  ASSERT_FALSE(asked.empty());
  EXPECT_EQ(asked.front(), "grouplib.groups");
  EXPECT_NE(chains(table).find("create_group -> grouplib.groups.make_group -> torch.distributed.new_group"), std::string::npos)
      << chains(table);
}

// Calls outside loops are read when they may reach the file's group-sites-threshold together with
// its calls of torch's creators. (`main` is no wrapper, so its calls count where they are: a
// function that would wrap the installed one has its own calls counted instead.)
TEST(EnvironmentOnDemand, CallsThatMayReachTheSitesThresholdAreRead) {
  const std::string once = "import grouplib.groups as gg\ndef main(r):\n    gg.make_group(r)\n";
  const std::string twice = once + "    gg.make_group(r + 1)\n";
  const std::string withCreators = "import torch.distributed as dist\n" + once + "    dist.new_group(r)\n    dist.new_group(r)\n";
  const std::map<std::string, std::string> installed = {{"grouplib.groups", kInstalledWrapper}};
  std::vector<std::string> asked;
  tableOf({{"app.once", once}}, installed, asked, 2);
  EXPECT_TRUE(asked.empty()) << asked.front();
  tableOf({{"app.twice", twice}}, installed, asked, 4);
  EXPECT_TRUE(asked.empty()) << asked.front();
  tableOf({{"app.twice", twice}}, installed, asked, 2);
  EXPECT_EQ(asked, (std::vector<std::string>{"grouplib.groups"}));
  asked.clear();
  tableOf({{"app.creators", withCreators}}, installed, asked, 3);
  EXPECT_EQ(asked, (std::vector<std::string>{"grouplib.groups"}));
  asked.clear();
  tableOf({{"app.creators", withCreators}}, installed, asked, 4);
  EXPECT_TRUE(asked.empty()) << asked.front();
  // Without a threshold, any call may complete one.
  std::vector<std::string_view> texts = {once};
  std::vector<std::string> modules = {"app.once"};
  ModuleReader reader = [&](const std::string& dotted) -> std::optional<std::string> {
    asked.push_back(dotted);
    return installed.contains(dotted) ? std::optional<std::string>(installed.at(dotted)) : std::nullopt;
  };
  buildGroupWrapperTable(texts, modules, 1, reader, {});
  EXPECT_EQ(asked, (std::vector<std::string>{"grouplib.groups"}));
}

// An installed class's object kept by the tree: its methods may be called anywhere, so its module
// is read, and the loop over the kept object's method is a site with its chain.
TEST(EnvironmentOnDemand, AnInstalledObjectKeptByTheTreeIsRead) {
  std::vector<std::string> asked;
  GroupWrapperTable table = tableOf(
      {{"app.engine",
        "from grouplib.groups import Maker\n"
        "class Engine:\n"
        "    def __init__(self):\n"
        "        self.maker = Maker()\n"
        "    def data_groups(self, layout):\n"
        "        for ranks in layout:\n"
        "            self.maker.make(ranks)\n"}},
      {{"grouplib.groups", kInstalledWrapper}}, asked);
  ASSERT_FALSE(asked.empty());
  EXPECT_EQ(asked.front(), "grouplib.groups");
  EXPECT_NE(chains(table).find("self.maker.make -> grouplib.groups.Maker.make -> torch.distributed.new_group"), std::string::npos) << chains(table);
}

class OnDemandInterpreter : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("nccl-migrate-on-demand-" + std::to_string(::getpid()));
    fs::remove_all(base_);
    fs::create_directories(base_ / "site-packages/grouplib");
    std::ofstream(base_ / "site-packages/grouplib/groups.py") << kInstalledWrapper;
  }
  void TearDown() override { fs::remove_all(base_); }
  // An interpreter that appends its arguments to a log, then prints the fake site-packages.
  std::string recordingPython() {
    fs::path script = base_ / "python";
    std::ofstream(script) << "#!/bin/sh\necho \"$1\" >> '" << log().string() << "'\necho '{\"path\": [\""
                          << (base_ / "site-packages").string() << "\"], \"stdlib\": []}'\n";
    fs::permissions(script, fs::perms::owner_all);
    return script.string();
  }
  fs::path log() const { return base_ / "invocations"; }
  int invocations() const {
    std::ifstream in(log());
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }
  fs::path base_;
};

TEST_F(OnDemandInterpreter, StartsOnTheFirstReadOnly) {
  PythonEnvironmentOnDemand environment(recordingPython());
  EXPECT_EQ(invocations(), 0);
  EXPECT_FALSE(environment.asked());
  EXPECT_FALSE(environment.moduleSource("no.such.module"));
  EXPECT_EQ(invocations(), 1);
  std::optional<std::string> text = environment.moduleSource("grouplib.groups");
  ASSERT_TRUE(text);
  EXPECT_NE(text->find("def make_group"), std::string::npos);
  EXPECT_EQ(invocations(), 1);
  EXPECT_TRUE(environment.note().empty());
  // Started without `site`, so that no .pth file's code runs.
  std::ifstream in(log());
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "-S");
}

TEST_F(OnDemandInterpreter, ANamedInterpreterThatCannotRunGivesItsNoteWhenAsked) {
  PythonEnvironmentOnDemand environment((base_ / "no-such-python").string());
  EXPECT_TRUE(environment.note().empty());
  EXPECT_FALSE(environment.moduleSource("grouplib.groups"));
  EXPECT_NE(environment.note().find("no Python environment read"), std::string::npos) << environment.note();
}

// A real interpreter: the user site (PYTHONUSERBASE) and the folder its .pth names are on the
// path, and the .pth's import line has not run.
TEST_F(OnDemandInterpreter, APthFilesFoldersCountAndItsCodeDoesNotRun) {
  if (std::system("python3 -c 'import sys, site; sys.exit(0 if site.check_enableusersite() and sys.prefix == sys.base_prefix else 1)' "
                  ">/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 on PATH is a virtual environment's or has no user site: the user site cannot be set up here";
  std::string version;
  {
    FILE* pipe = popen("python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'", "r");
    char buffer[32] = {};
    if (pipe && fgets(buffer, sizeof buffer, pipe)) version = buffer;
    if (pipe) pclose(pipe);
    while (!version.empty() && version.back() == '\n') version.pop_back();
  }
  ASSERT_FALSE(version.empty());
  fs::path userSite = base_ / "userbase/lib" / ("python" + version) / "site-packages";
  fs::create_directories(userSite / "extra");
  fs::path marker = base_ / "pth-code-ran";
  std::ofstream(userSite / "a.pth") << "extra\nimport os; open('" << marker.string() << "', 'w')\n";
  const char* before = getenv("PYTHONUSERBASE");
  std::string saved = before ? before : "";
  setenv("PYTHONUSERBASE", (base_ / "userbase").c_str(), 1);
  std::string note;
  PythonEnvironment environment = PythonEnvironment::ask("", note);
  if (before) setenv("PYTHONUSERBASE", saved.c_str(), 1);
  else unsetenv("PYTHONUSERBASE");
  const std::vector<fs::path>& path = environment.searchPath();
  EXPECT_NE(std::find(path.begin(), path.end(), userSite.lexically_normal()), path.end());
  EXPECT_NE(std::find(path.begin(), path.end(), (userSite / "extra").lexically_normal()), path.end());
  EXPECT_FALSE(fs::exists(marker));
}

}  // namespace
}  // namespace nccl_migrate::lint
