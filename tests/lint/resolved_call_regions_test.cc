// A file large enough to be split, where the project model resolves a call through an object far
// from every rule's word: the function around the call is parsed (its file is no longer parsed
// whole for it), so the call in a loop is still found, and one outside loops is not.
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

class ResolvedCallRegions : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("nccl-migrate-resolved-regions-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "pkg");
    write("pkg/__init__.py", "");
    write("pkg/groups.py",
          "import torch.distributed as dist\n"
          "class Maker:\n"
          "    def make(self, ranks):\n"
          "        return dist.new_group(ranks)\n");
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& file, const std::string& text) { std::ofstream(root_ / file) << text; }
  std::vector<std::string> findings() {
    LintOptions options;
    options.jobs = 2;
    options.config.environment = false;
    LintReport report = lintPaths({root_}, options);
    EXPECT_TRUE(report.warnings.empty()) << report.warnings.front();
    filesParsed_ = report.filesParsed;
    std::vector<std::string> found;
    for (const Finding& f : report.findings)
      found.push_back(fs::path(f.path).filename().string() + ":" + std::to_string(f.where.line) + ":" + f.code);
    return found;
  }
  fs::path root_;
  int filesParsed_ = 0;
};

TEST_F(ResolvedCallRegions, TheFunctionAroundAResolvedCallIsParsed) {
  std::string filler;
  for (int i = 0; i < 150; ++i) filler += "def unrelated" + std::to_string(i) + "(a):\n    return [a,\n  1]\n";
  const std::string source =
      "from pkg.groups import Maker\n" + filler +
      "def build(layout):\n"
      "    maker = Maker()\n"
      "    for ranks in layout:\n"
      "        maker.make(ranks)\n" +
      filler +
      "def once(ranks):\n"
      "    maker = Maker()\n"
      "    return maker.make(ranks)\n";
  ASSERT_GT(source.size(), 8u * 1024);
  write("pkg/train.py", source);
  EXPECT_EQ(findings(), (std::vector<std::string>{"train.py:" + std::to_string(1 + 450 + 4) + ":NM401"}));
}

// A file whose only group creations are resolved calls, fewer than group-sites-threshold and
// outside loops, gets no NM401 finding: it is not parsed for them. One in a loop still is.
TEST_F(ResolvedCallRegions, FewResolvedCallsOutsideLoopsLeaveTheFileUnparsed) {
  write("pkg/train.py",
        "from pkg.groups import Maker\n"
        "def once(ranks):\n"
        "    maker = Maker()\n"
        "    return maker.make(ranks)\n");
  EXPECT_TRUE(findings().empty());
  EXPECT_EQ(filesParsed_, 1);  // groups.py alone
  write("pkg/loop.py",
        "from pkg.groups import Maker\n"
        "def build(layout):\n"
        "    maker = Maker()\n"
        "    for ranks in layout:\n"
        "        maker.make(ranks)\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"loop.py:5:NM401"}));
  EXPECT_EQ(filesParsed_, 2);
  // As many as group-sites-threshold, in a function that is no wrapper (`main` never is): found.
  write("pkg/many.py",
        "from pkg.groups import Maker\n"
        "def main():\n"
        "    maker = Maker()\n"
        "    maker.make([0])\n"
        "    maker.make([1])\n"
        "    maker.make([2])\n"
        "    maker.make([3])\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"loop.py:5:NM401", "many.py:4:NM401"}));
}

// A large file that keeps torch's group creator under other names (a class attribute, an object's
// attribute, a dict's entry) and calls it through them in methods and functions that hold none of
// NM401's words: those are parsed too, so each call in a loop is found, and one outside loops is not.
TEST_F(ResolvedCallRegions, ACreatorKeptUnderAnotherNameIsFollowed) {
  std::string filler;
  for (int i = 0; i < 100; ++i) filler += "    def unrelated" + std::to_string(i) + "(self, a):\n        return [a, 1]\n";
  write("journal.py",
        "import torch.distributed as dist\n"
        "class Journal:\n"
        "    _orig = dist.new_group\n"
        "    def __init__(self):\n"
        "        self._saved = dist.new_group\n" +
            filler +
            "    @classmethod\n"
            "    def reload_all(cls, layouts):\n"
            "        return [cls._orig(ranks) for ranks in layouts]\n"  // line 208
            "    @classmethod\n"
            "    def world(cls):\n"
            "        return cls._orig(None)\n"
            "    def replay(self, layouts):\n"
            "        for ranks in layouts:\n"
            "            self._saved(ranks)\n"  // line 214
            "_REGISTRY = {}\n"
            "def register():\n"
            "    _REGISTRY[\"make\"] = dist.new_group\n"
            "def reload_registry(layouts):\n"
            "    for ranks in layouts:\n"
            "        _REGISTRY[\"make\"](ranks)\n");  // line 220
  ASSERT_GE(fs::file_size(root_ / "journal.py"), 4096u);  // split into regions
  EXPECT_EQ(findings(), (std::vector<std::string>{"journal.py:208:NM401", "journal.py:214:NM401", "journal.py:220:NM401"}));
}

// One kept in a dict literal's entry, whose name the line does not show: the file is parsed whole.
TEST_F(ResolvedCallRegions, ACreatorKeptInADictLiteralIsFollowed) {
  std::string filler;
  for (int i = 0; i < 150; ++i) filler += "def unrelated" + std::to_string(i) + "(a):\n    return [a, 1]\n";
  write("saved.py",
        "import torch.distributed as dist\n"
        "_SAVED = {\"make\": dist.new_group}\n" +
            filler +
            "def rebuild(layouts):\n"
            "    return [_SAVED[\"make\"](ranks) for ranks in layouts]\n");  // line 304
  ASSERT_GE(fs::file_size(root_ / "saved.py"), 4096u);
  EXPECT_EQ(findings(), (std::vector<std::string>{"saved.py:304:NM401"}));
}

}  // namespace
}  // namespace nccl_migrate::lint
