// bindPlainImports (python_project.h) binds a source's leading imports from their text exactly as
// the parse binds them, or declines the whole source (binding nothing) when one statement is not
// written plainly, so that the tables' findings never depend on which of the two bound them.
#include "python/python_project.h"
#include "python/python_scopes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace nccl_migrate::lint {
namespace {

// What the names a source may bind resolve to, one line per name: the probe of a binding.
std::string resolved(const PythonNames& names, const std::vector<std::string>& probes) {
  std::string out;
  for (const std::string& probe : probes) out += probe + " -> " + names.qualify(probe + ".f") + "\n";
  return out;
}

const std::vector<std::string> kProbes = {"os", "torch", "dist", "c", "d", "e", "x", "y", "p", "q", "r",
                                          "annotations", "np", "numpy", "star", "b", "g", "h"};

// The bindings the parse of the source's leading imports makes.
std::string byParse(const std::string& text) {
  PythonNames names;
  pythonFunctionCalls(text, leadingImports(text), names);
  return resolved(names, kProbes);
}

class PlainImports : public ::testing::TestWithParam<std::string> {};

TEST_P(PlainImports, BindAsTheParseBinds) {
  const std::string& text = GetParam();
  PythonNames names;
  ASSERT_TRUE(bindPlainImports(text, leadingImports(text), names)) << text;
  EXPECT_EQ(resolved(names, kProbes), byParse(text)) << text;
}

INSTANTIATE_TEST_SUITE_P(
    Statements, PlainImports,
    ::testing::Values("import os\nimport torch.distributed as dist\n", "import os, numpy as np\n",
                      "from a.b import c, d as e\n", "from .rel import x\nfrom .. import y\n",
                      "from m import (p,\n    q as r,  # the second\n)\n", "from m import(p)\n",
                      "from __future__ import annotations\nimport os\n", "import numpy as np  # noqa: F401\n",
                      "from m import *\nimport os\n", "import os\r\nfrom a import c\r\n",
                      "import os\n\n# a comment between imports\nfrom a import c\n",
                      "\"\"\"The module.\"\"\"\nimport os\nfrom a import (\n    c,\n    d,\n)\n\ndef f():\n    pass\n",
                      "import torch\nimport torch.distributed as dist\nfrom torch.distributed import new_group as g\n"));

class OtherImports : public ::testing::TestWithParam<std::string> {};

// Anything else is left to the parse, whole: no binding is made from the text.
TEST_P(OtherImports, AreLeftToTheParse) {
  const std::string& text = GetParam();
  PythonNames names;
  PythonNames untouched;
  EXPECT_FALSE(bindPlainImports(text, leadingImports(text), names)) << text;
  EXPECT_EQ(resolved(names, kProbes), resolved(untouched, kProbes)) << text;
}

INSTANTIATE_TEST_SUITE_P(
    Statements, OtherImports,
    ::testing::Values("import os\nfrom a import c; d = 1\n",           // a second statement on the line
                      "import os\nfrom a import c, \\\n    d\n",         // a continued line
                      "import os\nfrom a import c.d\n",                  // no name the grammar binds plainly
                      "import os\nimport caf\xc3\xa9\n",                 // a name that is not ASCII
                      "import os\nfrom a import (c,\n",                  // brackets left open
                      "import os\nfrom a import c,\n",                   // a comma ending the statement
                      "import os\nfrom a import print\n",                // a word the grammar reserves
                      "import os\nfrom . a import c\n",                  // a module with blanks in it
                      "from the original code\n  more of a docstring\n\"\"\"\nimport os\n"));  // prose, not an import

}  // namespace
}  // namespace nccl_migrate::lint
