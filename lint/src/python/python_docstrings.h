// Where a Python file's docstrings are: triple-quoted strings that are a statement of their own,
// at any depth of nesting. No rule reads a string, so a word inside one decides nothing: not
// whether a rule runs on the file, nor which of its definitions are parsed (a large function's
// docstring often names what its code never does: `cuda:0`, `device_id` in torch's own).
#pragma once

#include <string_view>
#include <utility>
#include <vector>

namespace nccl_migrate::lint {

// [begin, end) of each string statement, in order: a triple-quoted literal without an f prefix
// that starts a logical line outside brackets and is followed on its last line by blanks or a
// comment only. One pass over the text; anything it is unsure of (an f-string, a string joined to
// another, a line continued with `\`) is not one, so a word is never taken for a docstring's
// unless it is in one; a text it cannot read as valid Python (a single-quoted string that runs
// into its line's end, a string never closed) has none.
std::vector<std::pair<size_t, size_t>> pythonDocstrings(std::string_view text);

}  // namespace nccl_migrate::lint
