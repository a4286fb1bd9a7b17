// Docstrings decide nothing: a rule's word inside one neither makes the rule run on a file nor has
// a definition parsed, while the same word in code does, and what is found stays the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "python/python_docstrings.h"
#include "engine/prefilter.h"
#include "python/python_regions.h"
#include "nccl_migrate/lint/linter.h"
#include "lint_test_support.h"

namespace nccl_migrate::lint {
namespace {

using testing::StubRule;

std::vector<std::string> docstrings(const std::string& source) {
  std::vector<std::string> out;
  for (auto [begin, end] : pythonDocstrings(source)) out.push_back(source.substr(begin, end - begin));
  return out;
}

TEST(PythonDocstrings, StringStatementsAtEveryDepthAreFound) {
  const std::string source =
      "\"\"\"Module (with a bracket.\"\"\"\n"
      "class C:\n"
      "    r'''Class, raw: \\''' still in it.'''\n"
      "    def m(self):\n"
      "        b\"\"\"Bytes.\"\"\"  # a comment after it\n"
      "        Rb'\'\'Two letters of prefix.'\'\'\n"
      "        def inner():\n"
      "\t\t\t\"\"\"Tabs.\n"
      "over lines \"quoted\" ''' other quotes\n"
      "\"\"\"\n"
      "        return 1\n";
  EXPECT_EQ(docstrings(source), (std::vector<std::string>{"\"\"\"Module (with a bracket.\"\"\"",
                                                          "r'''Class, raw: \\''' still in it.'''",
                                                          "b\"\"\"Bytes.\"\"\"", "Rb'\'\'Two letters of prefix.'\'\'",
                                                          "\"\"\"Tabs.\nover lines \"quoted\" ''' other quotes\n\"\"\""}));
}

// Each of these strings is a value, or may be: its words count.
TEST(PythonDocstrings, StringsThatAreValuesAreNot) {
  const std::string source =
      "x = \"\"\"assigned\"\"\"\n"
      "call(\n"
      "    \"\"\"an argument on its own line\"\"\"\n"
      ")\n"
      "y = \\\n"
      "\"\"\"after a continued line\"\"\"\n"
      "f\"\"\"formatted {x}\"\"\"\n"
      "\"\"\"joined\"\"\" \"to another\"\n"
      "\"\"\"a method's receiver\"\"\".format(1)\n"
      "'single-quoted is never taken'\n"
      "z = 1; \"\"\"after a semicolon\"\"\"\n"
      "if ok: \"\"\"after a colon\"\"\"\n"
      "s = '\"\"\"'  # triple quotes inside a string\n"
      "\"\"\"kept: the one docstring here\"\"\"\n";
  EXPECT_EQ(docstrings(source), (std::vector<std::string>{"\"\"\"kept: the one docstring here\"\"\""}));
}

// A text that cannot be valid Python as read has no docstrings: its words all count.
TEST(PythonDocstrings, ATextThatCannotBeReadHasNone) {
  EXPECT_EQ(docstrings("\"\"\"doc\"\"\"\nx = '''never closed\n\"\"\"not a docstring\"\"\"\n"), std::vector<std::string>{});
  EXPECT_EQ(docstrings("\"\"\"doc\"\"\"\nx = 'runs into the line end\n\"\"\"not either\"\"\"\n"), std::vector<std::string>{});
  EXPECT_EQ(docstrings("# only a comment \"\"\"x\"\"\"\n"), std::vector<std::string>{});
}

// Python 3.12 lets an f-string's fields hold strings in its own quotes; a format spec is text.
TEST(PythonDocstrings, FStringFieldsAreReadAsPythonReadsThem) {
  EXPECT_EQ(docstrings("x = f\"{'\"'}\" + '''\ntext'''\nfor i in r:\n    g()\n'''doc'''\n"),
            (std::vector<std::string>{"'''doc'''"}));
  EXPECT_EQ(docstrings("x = f\"{d[\"k\"]!r:>{w}} {{literal}}\"\n\"\"\"doc\"\"\"\n"),
            (std::vector<std::string>{"\"\"\"doc\"\"\""}));
  EXPECT_EQ(docstrings("s = f\"{x:'>10}\"\n\"\"\"doc\"\"\"\n"), (std::vector<std::string>{"\"\"\"doc\"\"\""}));
  // A field over several lines may hold a comment (3.12), whose quotes and braces are no code:
  // such a text is not followed, and its words all count.
  EXPECT_EQ(docstrings("s = f'''{\n  x!r}'''\n'''doc'''\n"), std::vector<std::string>{});
  const std::string hidden =
      "import torch.distributed as dist\n"
      "x = 1\n"
      "s = f\"\"\"{x # \"\"\"\n"
      "}\"\"\"\n"
      "if True: y = \"}\" + \"\"\"\n"
      "\"\"\"\n"
      "for i in range(3):\n"
      "    g = dist.new_group([0])\n"
      "z = 1  # \"\"\"\n";
  LintReport report = lintSource("job.py", hidden);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].code, "NM401");
}

// Windows line breaks: a backslash before "\r\n" continues a string as before "\n".
TEST(PythonDocstrings, CrLfLineBreaksAreLineBreaks) {
  const std::string source =
      "import torch.distributed as dist\r\n"
      "x = \"a\\\r\n"
      "\"\"\"\r\n"
      "for i in range(8):\r\n"
      "    g = dist.new_group([i])\r\n"
      "y = \"\"\"\r\n"
      "\"\"\"\r\n"
      "def f():\r\n"
      "    \"\"\"Doc.\"\"\"\r\n";
  EXPECT_EQ(docstrings(source), (std::vector<std::string>{"\"\"\"Doc.\"\"\""}));
  LintReport report = lintSource("job.py", source);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].code, "NM401");
  EXPECT_EQ(report.findings[0].where.line, 5);
}

// How lintCode chooses what to parse: the prefilter's words, less those in docstrings, then the
// regions. A definition whose only word is in its docstring is left out; one with the word in
// its code is kept, docstring and all.
TEST(PythonRegions, AWordInADocstringKeepsNoDefinition) {
  const std::string source =
      "import x\n"
      "def documented():\n"
      "    \"\"\"Calls WORD.\"\"\"\n"
      "    return 1\n"
      "def calls():\n"
      "    \"\"\"Calls WORD.\"\"\"\n"
      "    WORD()\n";
  StubRule rule;
  Prefilter prefilter({{&rule, {{.anyOf = {"WORD"}}}}}, {});
  PrefilterMatches matches = prefilter.scan(source);
  prefilter.dropWithin(matches, pythonDocstrings(source));
  std::vector<ParseRegion> leftOut;
  std::vector<ParseRegion> regions = pythonRegions(source, prefilter.wordEnds(matches, {&rule}), leftOut);
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_EQ(source.substr(regions[0].begin, regions[0].end - regions[0].begin), "import x\n");
  EXPECT_EQ(source.substr(regions[1].begin, regions[1].end - regions[1].begin),
            "def calls():\n    \"\"\"Calls WORD.\"\"\"\n    WORD()\n");
  ASSERT_EQ(leftOut.size(), 1u);
  EXPECT_EQ(leftOut[0].name, "documented");
}

// A file big enough to be split whose rule words are all in docstrings is not parsed; the same
// file with one of them in code is, and reports it.
TEST(PythonDocstrings, WordsOnlyInDocstringsLeaveAFileUnparsed) {
  std::string filler;
  for (int i = 0; i < 150; ++i) filler += "def f" + std::to_string(i) + "(a):\n    return a + " + std::to_string(i) + "\n";
  const std::string documented =
      "\"\"\"Groups for torch.distributed: see dist.new_group and isinstance(pg, dist.ProcessGroupNCCL).\"\"\"\n"
      "import torch.distributed as dist\n" + filler +
      "def build(layout):\n"
      "    \"\"\"for r in layout: dist.new_group(r); model.cuda(0) under DistributedDataParallel\"\"\"\n"
      "    return layout\n";
  ASSERT_GT(documented.size(), 4096u);
  LintReport quiet = lintSource("groups.py", documented);
  EXPECT_EQ(quiet.filesParsed, 0);
  EXPECT_TRUE(quiet.findings.empty());
  const std::string coded = documented + "def make(layout):\n    return [dist.new_group(r) for r in layout]\n";
  LintReport report = lintSource("groups.py", coded);
  EXPECT_EQ(report.filesParsed, 1);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].code, "NM401");
  EXPECT_EQ(report.findings[0].where.line, 1 + static_cast<int>(std::count(documented.begin(), documented.end(), '\n')) + 1);
}

}  // namespace
}  // namespace nccl_migrate::lint
