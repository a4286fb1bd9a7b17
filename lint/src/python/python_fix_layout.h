// How a fix's edits sit in a Python file: the file's line length (its ruff, black or flake8
// configuration), where a definition a fix calls goes (after the module's imports), and a call a
// fix rewrote, laid out as `ruff format` lays out a call.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::lint {

// The line length of the project around `file`: from the nearest folder, upward, that configures
// one: `line-length` in .ruff.toml, ruff.toml or pyproject.toml's [tool.ruff], [tool.black]'s
// `line-length` (or `line_length`), `max-line-length` in the [flake8] section of setup.cfg,
// tox.ini or .flake8; else 88, ruff's and black's default.
int pythonLineLength(const std::filesystem::path& file);

// The edit that puts `definition` (a top-level function, ending with its newline) after the last
// top-level import before `firstUse` (after the module's docstring and leading comments where no
// import comes first), with the two blank lines ruff format keeps around a function.
Edit pythonDefinitionPlacement(const std::string& text, const std::string& definition, size_t firstUse);

// Each call whose function an edit renames to one of `helpers` (`isinstance(b, C)` ->
// `_is_nccl_backend(b)`), its arguments' edits applied, written as one edit over the whole call:
// on one line where it fits in `lineLength`, else its arguments on a line of their own; a call
// with comments, or arguments over several lines, keeps the edits as they are.
std::vector<Edit> layOutPythonCalls(const std::string& text, std::vector<Edit> edits,
                                    const std::vector<std::string>& helpers, int lineLength);

}  // namespace nccl_migrate::lint
