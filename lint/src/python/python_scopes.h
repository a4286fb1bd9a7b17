// A Python source read in parts: the statement around a position, narrowed to the innermost
// statement of the function, class or compound statement (`if`, `try`, loop) holding it, with the
// headers it stands under, so that a parse of a large file reads one call's surroundings and still
// sees which function and class they belong to. Used by the table of group wrappers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "python/python_frontend.h"

namespace nccl_migrate::lint {

class PythonScopes {
 public:
  explicit PythonScopes(std::string_view text);  // the text must outlive this

  // The regions to parse around `offsets` (each the innermost statement holding it, and the headers
  // above it), in order and merged; what an earlier call returned is not returned again.
  std::vector<ParseRegion> unreadAround(const std::vector<size_t>& offsets);

 private:
  struct Unit {
    ParseRegion region;
    int header = -1;            // the unit of the header this one stands under
    int depth = 0;
    bool read = false;
    std::vector<int> children;  // once split: its header, then its body's statements
  };

  int unitAt(size_t at);
  void split(size_t k);

  std::string_view text_;
  std::vector<Unit> units_;
  std::vector<int> topLevel_;  // the units of the top-level statements found so far, in order
  std::vector<std::pair<size_t, uint32_t>> rows_ = {{0, 0}};  // (offset, row) known so far, in order
};

// For each of `offsets`, the name of the innermost `def` whose body holds it, as the Python
// frontend names a call's function (Call::inGroupWrapper): by the file's statements split by lines
// (pythonTopLevelBlocks, pythonStatements), and the same def found by indentation alone; empty at
// module level and in a class body outside every def, and wherever the lines leave a doubt: in a
// def's decorators or signature, in a one-line def, in a statement the lines do not split (`match`)
// that holds a nested def, where the two readings differ.
std::vector<std::string> enclosingFunctions(std::string_view text, const std::vector<size_t>& offsets);

// The brackets a line opens less those it closes, outside its strings and before its comment (a
// string is taken to end on its line): how pythonStatements follows a statement over lines.
int pythonBracketBalance(std::string_view line);

// The imports at column 0 before the source's first definition, where a module's imports stand.
std::vector<ParseRegion> leadingImports(std::string_view text);

// `regions` sorted, with overlapping and adjacent ones joined.
std::vector<ParseRegion> mergeRegions(std::vector<ParseRegion> regions);

}  // namespace nccl_migrate::lint
