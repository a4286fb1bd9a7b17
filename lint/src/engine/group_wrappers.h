// The project-wide table of group-creating wrappers: functions of the scanned tree whose body calls
// torch.distributed's group creators, directly or through another such function. Built from the
// text of the files that name a creator (a prefilter, then a look at the enclosing `def`), so it
// costs one read of the Python files and no parse.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>
#include <vector>

namespace nccl_migrate::lint {

// One source's functions that call one of `creators` (bare names) outside a comment, where the
// call names no backend other than an eager NCCL one. Exposed for tests and the fuzzer.
std::set<std::string> functionsCalling(std::string_view source, const std::set<std::string>& creators);

struct GroupWrappers {
  std::set<std::string> names;     // bare names of the wrapper functions
  std::vector<bool> callsWrapper;  // per source: calls one of them outside its own `def` line
};

// The wrappers defined in `texts` (Python sources), to the fixed point; each round scans the
// sources on up to `threads` threads.
GroupWrappers inferGroupWrappers(const std::vector<std::string>& texts, unsigned threads = 1);

}  // namespace nccl_migrate::lint
