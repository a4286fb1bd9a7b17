// Python files are parsed only in the parts the triggered rules need: top-level statements and the
// definitions (class members) that hold one of their words. The split must follow Python's
// statements, and leaving parts out must not change what is found.
#include <gtest/gtest.h>

#include <algorithm>

#include "python/python_regions.h"
#include "python/python_frontend.h"
#include "nccl_migrate/lint/linter.h"
#include "lint_test_support.h"

namespace nccl_migrate::lint {
namespace {

using testing::regionTexts;

TEST(PythonBlocks, FollowStatementsNotLines) {
  const std::string source =
      "import os\n"
      "@decorator\n"
      "@other(\n"
      ")\n"
      "def f(\n"
      "    a,\n"
      ") -> int:\n"
      "    \"\"\"Doc\n"
      "text at column 0\n"
      "\"\"\"\n"
      "    return a\n"
      "x = [\n"
      "1]\n"
      "y = 1 + \\\n"
      "2\n"
      "# a comment\n"
      "class C:\n"
      "    s = \"(\"\n"
      "    def m(self):\n"
      "        pass\n"
      "z = 3";
  std::vector<ParseRegion> blocks = pythonTopLevelBlocks(source);
  ASSERT_EQ(regionTexts(source, blocks),
            (std::vector<std::string>{"import os\n",
                                      "@decorator\n@other(\n)\ndef f(\n    a,\n) -> int:\n    \"\"\"Doc\ntext at column 0\n"
                                      "\"\"\"\n    return a\n",
                                      "x = [\n1]\n", "y = 1 + \\\n2\n# a comment\n",
                                      "class C:\n    s = \"(\"\n    def m(self):\n        pass\n", "z = 3"}));
  EXPECT_TRUE(blocks[1].definition);
  EXPECT_EQ(blocks[1].name, "f");
  EXPECT_EQ(blocks[1].beginRow, 1u);
  EXPECT_EQ(blocks[1].endRow, 11u);
  EXPECT_FALSE(blocks[2].definition);
  EXPECT_EQ(blocks[4].name, "C");
  EXPECT_EQ(blocks.back().endRow, 20u);
  EXPECT_EQ(blocks.back().endColumn, 5u);
  std::vector<ParseRegion> members = pythonStatements(source, blocks[4], 4);
  EXPECT_EQ(regionTexts(source, members),
            (std::vector<std::string>{"class C:\n", "    s = \"(\"\n", "    def m(self):\n        pass\n"}));
  EXPECT_TRUE(members[2].definition);
}

std::vector<std::string> found(const std::string& source) {
  std::vector<std::string> out;
  for (const Finding& f : lintSource("job.py", source).findings) out.push_back(std::to_string(f.where.line) + ":" + f.code);
  return out;
}

int lineOf(const std::string& source, const std::string& needle) {
  size_t at = source.find(needle);
  return at == std::string::npos ? 0 : 1 + static_cast<int>(std::count(source.begin(), source.begin() + at, '\n'));
}

// Findings after, inside and between left-out definitions keep their places; a left-out
// definition still shadows the name it defines from where it stands; facts a rule reads elsewhere
// in the file (the process selecting its GPU) are parsed with it. The file is large enough to be
// split.
std::string trainerSource(const std::string& indent) {
  std::string filler;
  for (int i = 0; i < 200; ++i) filler += "def unrelated" + std::to_string(i) + "(a):\n    \"\"\"Doc\nat column 0\n\"\"\"\n    return [a,\n  1]\n";
  const std::string source =
      "import torch\n"
      "import torch.distributed as dist\n"
      "from torch.nn.parallel import DistributedDataParallel as DDP\n" +
      filler +
      "class Trainer:\n" + "    def helper(self):\n"
      "        return 1\n"
      "    def check(self, pg):\n"
      "        return isinstance(pg, dist.ProcessGroupNCCL)  # method\n" +
      filler +
      "def setup(rank):\n"
      "    torch.cuda.set_device(rank)\n"
      "def wrap(model):\n"
      "    return DDP(model.cuda())\n"
      "def isinstance(a, b):\n"
      "    return False\n"
      "def later(pg):\n"
      "    return isinstance(pg, dist.ProcessGroupNCCL)  # shadowed\n";
  if (indent.empty()) return source;
  // The imports first, then the rest indented under the `if`.
  std::string imports, body;
  for (size_t start = 0; start < source.size();) {
    size_t end = source.find('\n', start) + 1;
    std::string line = source.substr(start, end - start);
    if (line.starts_with("import ") || line.starts_with("from ")) imports += line;
    else body += indent + line;
    start = end;
  }
  return imports + "if dist.is_available():\n" + body + "else:\n" + indent + "pass\n";
}

TEST(PythonRegions, LeavingDefinitionsOutChangesNoFinding) {
  const std::string source = trainerSource("");
  ASSERT_GT(source.size(), 16u * 1024);
  // The method's check is found; the one after `def isinstance` is no builtin isinstance; the DDP
  // is fine because setup() selects the device.
  EXPECT_EQ(found(source), (std::vector<std::string>{std::to_string(lineOf(source, "# method")) + ":NM201"}));
}

// The same module under `if dist.is_available():`, as modules that stub themselves out are
// written: the same findings.
TEST(PythonRegions, LeavingDefinitionsOutOfACompoundStatementChangesNoFinding) {
  const std::string source = trainerSource("    ");
  EXPECT_EQ(found(source), (std::vector<std::string>{std::to_string(lineOf(source, "# method")) + ":NM201"}));
}

// A compound statement's body is split like the module: its header and the statements that bind,
// without the definitions no rule's word is in; a clause whose body would be left empty is kept
// whole.
TEST(PythonRegions, CompoundStatementsAreSplitLikeTheModule) {
  const std::string source =
      "import x\n"
      "if ok:\n"
      "    def unused(a):\n"
      "        return a\n"
      "    def needed():\n"
      "        WORD()\n"
      "    y = 1\n"
      "else:\n"
      "    def other():\n"
      "        pass\n";
  std::vector<size_t> ends = {source.find("WORD") + 4};
  std::vector<ParseRegion> leftOut;
  std::vector<ParseRegion> regions = pythonRegions(source, ends, leftOut);
  EXPECT_EQ(regionTexts(source, regions),
            (std::vector<std::string>{"import x\nif ok:\n",
                                      "    def needed():\n        WORD()\n    y = 1\nelse:\n    def other():\n        pass\n"}));
  ASSERT_EQ(leftOut.size(), 1u);
  EXPECT_EQ(leftOut[0].name, "unused");
}

// A statement that is only a string is left out even when it holds a rule's word (the frontend
// never looks inside one); a string that starts an expression is kept, and so is one followed by
// a comment (a suppression must be seen).
TEST(PythonRegions, StringStatementsAreLeftOutWhateverWordsTheyHold) {
  const std::string source =
      "\"\"\"Run with new_group(...)\nper stage.\"\"\"\n"
      "import x\n"
      "\", \".join(new_group(r))\n"
      "r'''new_group''' # noqa: NM401\n"
      "'new_group'\n"
      "def f():\n"
      "    \"\"\"Calls new_group.\"\"\"\n";
  std::vector<size_t> ends;
  for (size_t at = source.find("new_group"); at != std::string::npos; at = source.find("new_group", at + 1)) ends.push_back(at + 9);
  std::vector<ParseRegion> leftOut;
  std::vector<ParseRegion> regions = pythonRegions(source, ends, leftOut);
  EXPECT_EQ(regionTexts(source, regions),
            (std::vector<std::string>{"import x\n\", \".join(new_group(r))\nr'''new_group''' # noqa: NM401\n",
                                      "def f():\n    \"\"\"Calls new_group.\"\"\"\n"}));
}

}  // namespace
}  // namespace nccl_migrate::lint
