// Parsing a Python source, whole or in the regions chosen for a run, with tree-sitter-python: the
// one place the Python frontend and the project model make their trees.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <tree_sitter/api.h>

#include "python/python_frontend.h"

namespace nccl_migrate::lint {

using PythonTree = std::unique_ptr<TSTree, decltype(&ts_tree_delete)>;

// The tree of `text`, parsed only in `regions` (each with the file's own positions), or whole
// when there are none; null when tree-sitter gives up. One parser per thread, kept for the run:
// creating one allocates its stacks and tables.
PythonTree parsePythonRegions(std::string_view text, const std::vector<ParseRegion>& regions);

// The keywords a call's argument list passes as False or None (`Mesh(..., init_groups=False)`):
// values that turn off a wrapper's creation standing under `if init_groups:` (GroupWrapperTable's
// switches). Both the wrapper table and the frontend read a call's through it.
std::vector<std::string> keywordsPassedOff(TSNode arguments, std::string_view text);

// Whether tree-sitter finds a syntax error anywhere in `text` (fixes must not add one).
bool pythonHasSyntaxErrors(const std::string& text);

}  // namespace nccl_migrate::lint
