// Which parts of a Python file the triggered rules need parsed (see docs/lint.md, Speed): every
// statement at module level, and of the definitions only those that hold one of the rules' words.
#pragma once

#include <string>
#include <vector>

#include "python/python_frontend.h"

namespace nccl_migrate::lint {

// The regions to parse, given where (one past the end) the rules' words occur in `text`, sorted.
// Empty: the whole file (nothing would be left out). `leftOut` receives the module-level
// definitions left out, in order, whose names still bind where they stand.
std::vector<ParseRegion> pythonRegions(const std::string& text, const std::vector<size_t>& wordEnds,
                                       std::vector<ParseRegion>& leftOut);

}  // namespace nccl_migrate::lint
