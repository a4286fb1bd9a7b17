// A class that holds a rule's word is parsed in its header, its class-level statements and the
// members that hold a word, whatever stands between its decorators and its `class` line, and
// whether the word is in a method or in a class-level statement (a dataclass field): the other
// methods are left out. What the rules find does not change.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nccl_migrate/lint/linter.h"
#include "python/python_frontend.h"
#include "python/python_regions.h"
#include "lint_test_support.h"

namespace nccl_migrate::lint {
namespace {

using testing::regionTexts;

std::vector<ParseRegion> regionsFor(const std::string& source, const std::string& word) {
  std::vector<size_t> ends;
  for (size_t at = source.find(word); at != std::string::npos; at = source.find(word, at + 1)) ends.push_back(at + word.size());
  std::vector<ParseRegion> leftOut;
  return pythonRegions(source, ends, leftOut);
}

TEST(PythonRegionsOfClasses, ACommentBetweenDecoratorAndClassStillSplitsTheClass) {
  const std::string source =
      "import x\n"
      "@internal_api\n"
      "# pylint: disable=line-too-long\n"
      "class Context(Base):\n"
      "    limit = 3\n"
      "    def __init__(self):\n"
      "        self.nccl = WORD()\n"
      "    def other(self):\n"
      "        return 1\n";
  EXPECT_EQ(regionTexts(source, regionsFor(source, "WORD")),
            (std::vector<std::string>{"import x\n@internal_api\n# pylint: disable=line-too-long\nclass Context(Base):\n"
                                      "    limit = 3\n    def __init__(self):\n        self.nccl = WORD()\n"}));
}

TEST(PythonRegionsOfClasses, AWordInAFieldKeepsTheFieldsNotTheMethods) {
  const std::string source =
      "import x\n"
      "@dataclass\n"
      "class Config:\n"
      "    \"\"\"Settings.\"\"\"\n"
      "    size: int = 1\n"
      "    dispatcher: Literal[WORD, 'nvls'] = 'nvls'\n"
      "    \"\"\"The dispatcher.\"\"\"\n"
      "    def __post_init__(self):\n"
      "        self.size = 2\n";
  EXPECT_EQ(regionTexts(source, regionsFor(source, "WORD")),
            (std::vector<std::string>{"import x\n@dataclass\nclass Config:\n",
                                      "    size: int = 1\n    dispatcher: Literal[WORD, 'nvls'] = 'nvls'\n"}));
}

// A class whose body would be left empty is kept whole, so that it stays a class with a body.
TEST(PythonRegionsOfClasses, AClassWithNothingOfItsBodyKeptStaysWhole) {
  const std::string source =
      "import x\n"
      "class Holder(WORD):\n"
      "    \"\"\"Only a docstring and a method.\"\"\"\n"
      "    def m(self):\n"
      "        return 1\n";
  EXPECT_EQ(regionTexts(source, regionsFor(source, "WORD")), (std::vector<std::string>{}));  // the whole file
}

// The findings of a file split so: the method's check in a class whose decorators a comment
// follows, and a field's comparison, found as in the whole file.
TEST(PythonRegionsOfClasses, SplittingTheseClassesChangesNoFinding) {
  std::string filler;
  for (int i = 0; i < 120; ++i) filler += "    def unrelated" + std::to_string(i) + "(self, a):\n        return [a,\n  1]\n";
  const std::string source =
      "import torch.distributed as dist\n"
      "@register\n"
      "# a comment\n"
      "class Trainer:\n"
      "    def check(self, pg):\n"
      "        return isinstance(pg, dist.ProcessGroupNCCL)\n" +
      filler +
      "@dataclass\n"
      "class Settings:\n"
      "    legacy = isinstance(DEFAULT, dist.ProcessGroupNCCL)\n" +
      filler;
  ASSERT_GT(source.size(), 8u * 1024);
  std::vector<std::string> lines;
  for (const Finding& f : lintSource("job.py", source).findings) lines.push_back(std::to_string(f.where.line) + ":" + f.code);
  EXPECT_EQ(lines, (std::vector<std::string>{"6:NM201", std::to_string(6 + 360 + 3) + ":NM201"}));
}

}  // namespace
}  // namespace nccl_migrate::lint
