// NM401 is left out of a file whose only reason to run it is a few calls of a group wrapper outside
// loops, which the text shows without a parse (python_call_sites.h): the findings stay those of a
// full run, the file is not parsed for it.
#include "python/python_call_sites.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
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

}  // namespace
}  // namespace nccl_migrate::lint
