// NM401 is left out of a file whose only reason to run it is a few calls of a group wrapper outside
// loops, which the text shows without a parse (python_call_sites.h): the findings stay those of a
// full run, the file is not parsed for it.
#include "python/python_call_sites.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {
namespace {
namespace fs = std::filesystem;

// The spans of `word` in `text`, as the prefilter would give them (whole tokens or not: the
// decision must hold for any span it is given).
std::vector<std::pair<size_t, size_t>> spansOf(const std::string& text, const std::string& word) {
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) spans.emplace_back(at, at + word.size());
  return spans;
}

bool decided(const std::string& text, size_t maxCalls = 4) {
  return onlyFewCallsOutsideLoops(text, spansOf(text, "make_groups"), maxCalls);
}

TEST(PythonCallSites, FewCallsOutsideLoopsAreDecided) {
  EXPECT_TRUE(decided("from pkg.groups import make_groups\n"
                      "def setup():\n"
                      "    make_groups(2)\n"
                      "class T:\n"
                      "    def test(self):\n"
                      "        if x:\n"
                      "            pass\n"
                      "        else:\n"
                      "            make_groups (4)\n"));
  EXPECT_TRUE(decided("import pkg\npkg.groups.make_groups(\n    [1, 2],\n)\n"));
  EXPECT_TRUE(decided("from pkg.groups import (\n    other,\n    make_groups,\n)\n"));
  // Words in comments and plain strings name nothing.
  EXPECT_TRUE(decided("# for make_groups in a loop\nx = 'make_groups'\ny = \"\"\"\nfor make_groups\n\"\"\"\n"));
  // Definitions of the name are no calls.
  EXPECT_TRUE(decided("def make_groups(r):\n    pass\nclass make_groups(Base):\n    pass\nasync def make_groups():\n    pass\n"
                      "make_groups(1)\n", 2));
  EXPECT_TRUE(decided("try:\n    make_groups(1)\nexcept E:\n    pass\nelse:\n    make_groups(2)\n"));
}

TEST(PythonCallSites, LoopsAndComprehensionsAreNot) {
  EXPECT_FALSE(decided("for r in ranks:\n    make_groups(r)\n"));
  EXPECT_FALSE(decided("while ok():\n    if x:\n        make_groups(r)\n"));
  EXPECT_FALSE(decided("async def f():\n    async for r in ranks:\n        make_groups(r)\n"));
  EXPECT_FALSE(decided("groups = [make_groups(r) for r in ranks]\n"));
  EXPECT_FALSE(decided("groups = list(\n    make_groups(r)\n    for r in ranks\n)\n"));
  EXPECT_FALSE(decided("for r in ranks: make_groups(r)\n"));
  // A loop's else runs once, but the frontend counts it in the loop.
  EXPECT_FALSE(decided("for r in ranks:\n    pass\nelse:\n    make_groups(r)\n"));
  // A function defined in a loop: counted in it here (the frontend restarts; this only costs a parse).
  EXPECT_FALSE(decided("for r in ranks:\n    def f():\n        make_groups(r)\n"));
  // A continued line stays in its loop.
  EXPECT_FALSE(decided("for r in ranks:\n    x = 1 + \\\n2\n    make_groups(r)\n"));
}

TEST(PythonCallSites, OtherUsesAndDoubtsAreNot) {
  EXPECT_FALSE(decided("from pkg.groups import make_groups as mg\nmg(1)\n"));
  EXPECT_FALSE(decided("from pkg import groups\nmg = groups.make_groups\nmg(1)\n"));
  EXPECT_FALSE(decided("run(f=make_groups)\n"));
  // Uses that bind no other name to it.
  EXPECT_TRUE(decided("run(make_groups, 1)\nclass A(make_groups):\n    x: make_groups = None\nif f == make_groups:\n    pass\n"));
  EXPECT_FALSE(decided("x = f\"{make_groups(1)}\"\n"));
  EXPECT_FALSE(decided("if x:\n\tmake_groups(1)\n"));
  EXPECT_FALSE(decided("x = 'unterminated\nmake_groups(1)\n"));
  std::string four = "make_groups(1)\nmake_groups(2)\nmake_groups(3)\nmake_groups(4)\n";
  EXPECT_FALSE(decided(four, 4));  // group-sites-threshold calls may make a finding
  EXPECT_TRUE(decided(four, 5));
  EXPECT_TRUE(decided(four, 0));   // no threshold: only loops report
}

// One reading of a text answers every question asked of it as a fresh reading would, whatever
// was asked before: other spans, thresholds and receivers.
TEST(PythonCallSites, OneReadingAnswersEachQuestionAsAFreshOne) {
  const std::string text = "import pkg\n"
                           "make_groups(1)\n"
                           "pkg.make_groups(2)\n"
                           "other.make_groups(3)\n"
                           "for r in ranks:\n"
                           "    later(r)\n";
  std::vector<std::pair<size_t, size_t>> calls = spansOf(text, "make_groups");
  std::vector<std::pair<size_t, size_t>> looped = spansOf(text, "later");
  ReceiverFilter onlyPkg = [](std::string_view receiver, std::string_view) { return receiver == "pkg"; };
  PythonCallSites sites(text);
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(sites.onlyFewCallsOutsideLoops(calls, 3), onlyFewCallsOutsideLoops(text, calls, 3));
    EXPECT_FALSE(sites.onlyFewCallsOutsideLoops(calls, 3));  // three calls reach a threshold of three
    EXPECT_TRUE(sites.onlyFewCallsOutsideLoops(calls, 3, onlyPkg));  // `other.` is no site
    EXPECT_TRUE(sites.onlyFewCallsOutsideLoops(calls, 0));
    EXPECT_FALSE(sites.onlyFewCallsOutsideLoops(looped, 0));
  }
  // A text that leaves a doubt answers false to every question, the first and the later ones.
  const std::string doubtful = "x = 'unterminated\nmake_groups(1)\n";
  PythonCallSites unsure(doubtful);
  EXPECT_FALSE(unsure.onlyFewCallsOutsideLoops(spansOf(doubtful, "make_groups"), 0));
  EXPECT_FALSE(unsure.onlyFewCallsOutsideLoops(spansOf(doubtful, "make_groups"), 5));
}

// A project whose wrapper is called at a few sites outside loops in one file and in a loop in
// another: the first is not parsed, the second keeps its finding.
TEST(PythonCallSites, AFileCallingAWrapperOutsideLoopsIsNotParsedForNM401) {
  fs::path root = fs::temp_directory_path() / ("nccl-migrate-call-sites-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "pkg");
  std::ofstream(root / "pkg" / "__init__.py") << "";
  std::ofstream(root / "pkg" / "groups.py") << "import torch.distributed as dist\n"
                                               "def make_groups(ranks):\n"
                                               "    return dist.new_group(ranks)\n";
  std::ofstream(root / "setup_test.py") << "from pkg.groups import make_groups\n"
                                           "def test_one():\n"
                                           "    make_groups([0, 1])\n"
                                           "def test_two():\n"
                                           "    make_groups([0, 1])\n";
  std::ofstream(root / "loop_test.py") << "from pkg.groups import make_groups\n"
                                          "def test_many():\n"
                                          "    for r in range(4):\n"
                                          "        make_groups([r])\n";
  LintOptions options;
  options.jobs = 1;
  options.config.environment = false;
  LintReport report = lintPaths({root}, options);
  std::vector<std::string> found;
  for (const Finding& f : report.findings) found.push_back(fs::path(f.path).filename().string() + ":" + std::to_string(f.where.line) + ":" + f.code);
  EXPECT_EQ(found, (std::vector<std::string>{"loop_test.py:4:NM401"}));
  // groups.py (its creator call) and loop_test.py; setup_test.py is decided from its text.
  EXPECT_EQ(report.filesParsed, 2);
  fs::remove_all(root);
}

const std::set<std::string> kCreators = {"new_group", "split_group", "new_subgroups"};

// The places of the creators' words as the prefilter gives them: each creator as found, also inside
// longer names, and once more with the dot before it, as NM401's `.new_group` trigger finds it.
std::vector<std::pair<size_t, size_t>> creatorWords(const std::string& text) {
  std::vector<std::pair<size_t, size_t>> words;
  for (const std::string& creator : kCreators) {
    for (const auto& span : spansOf(text, creator)) {
      words.push_back(span);
      if (span.first > 0 && text[span.first - 1] == '.') words.emplace_back(span.first - 1, span.second);
    }
  }
  std::sort(words.begin(), words.end());
  return words;
}

std::optional<std::vector<size_t>> saved(const std::string& text) {
  return savedCreatorMentions(text, creatorWords(text), kCreators);
}

// The names a text keeps a creator under, as the words whose mentions are parsed with it.
std::set<std::string> keepers(const std::string& text) {
  std::optional<std::vector<size_t>> ends = saved(text);
  EXPECT_TRUE(ends.has_value()) << text;
  std::set<std::string> names;
  for (size_t end : ends.value_or(std::vector<size_t>{})) {
    size_t begin = end;
    while (begin > 0 && (std::isalnum(static_cast<unsigned char>(text[begin - 1])) || text[begin - 1] == '_')) --begin;
    names.insert(text.substr(begin, end - begin));
  }
  return names;
}

TEST(SavedCreators, TheNamesKeepingACreatorAreMentioned) {
  EXPECT_EQ(keepers("class J:\n    _orig = dist.new_group\n    def f(cls):\n        cls._orig(r)\n"),
            (std::set<std::string>{"_orig"}));
  EXPECT_EQ(keepers("self._orig = torch.distributed.new_group\n"), (std::set<std::string>{"_orig"}));
  EXPECT_EQ(keepers("_SAVED[\"k\"] = dist.split_group\nx = _SAVED[\"k\"](r)\n"), (std::set<std::string>{"_SAVED"}));
  EXPECT_EQ(keepers("    make = staticmethod(dist.new_group)\n"), (std::set<std::string>{"make"}));
  EXPECT_EQ(keepers("from torch.distributed import new_group\n_real = new_group\n"), (std::set<std::string>{"_real"}));
  EXPECT_EQ(keepers("if (g := dist.new_group):\n    pass\n"), (std::set<std::string>{"g"}));
  EXPECT_EQ(keepers("Maker.make = dist.new_subgroups\n"), (std::set<std::string>{"make"}));
}

TEST(SavedCreators, CallsTargetsAndComparisonsKeepNone) {
  EXPECT_TRUE(keepers("g = dist.new_group(ranks)\n"
                      "dist.new_group = recorder\n"
                      "if fn == dist.new_group or fn != new_group:\n    pass\n"
                      "my_new_group = 1\n"
                      "x = dist.new_groups\n"
                      "patch(dist.new_group)\n")
                  .empty());
}

TEST(SavedCreators, AKeeperTheLineDoesNotNameAsksForTheWholeFile) {
  EXPECT_FALSE(saved("_SAVED = {\"new_group\": dist.new_group}\n").has_value());
  EXPECT_FALSE(saved("_SAVED = dict(\n    make=1,\n)\nx = {1: new_group}\n").has_value());
  // Words that are no creator's whole name are passed over.
  EXPECT_TRUE(saved("x = {1: dist.new_groups}\ny = {2: my_new_group}\n").has_value());
}

TEST(DeviceSelections, TheNamesCalledBareInSelectionsAreFound) {
  EXPECT_EQ(namesCalledInDeviceSelections("torch.cuda.set_device(get_rank() % local_count())\n"
                                          "device = torch.device(\"cuda\", pick( 1))\n"
                                          "name = f\"cuda:{gpu_index()}\"\n"
                                          "torch.cuda.set_device(\n    int(\n        rank_of(x)))\n"),
            (std::set<std::string>{"get_rank", "local_count", "pick", "gpu_index", "int", "rank_of"}));
  // Methods and modules' functions are no bare names; calls elsewhere are not in a selection.
  EXPECT_TRUE(namesCalledInDeviceSelections("torch.cuda.set_device(dist.get_rank())\n"
                                            "torch.cuda.set_device(self.rank())\n"
                                            "x = helper()\n"
                                            "my_set_device(other())\n")
                  .empty());
}

}  // namespace
}  // namespace nccl_migrate::lint
