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

namespace nccl_migrate::lint {

// One source's functions that call one of `creators` (bare names) outside a comment, where the
// call names no backend other than an eager NCCL one. Exposed for tests and the fuzzer.
std::set<std::string> functionsCalling(std::string_view source, const std::set<std::string>& creators);

// The bare names of the wrappers defined in `texts` (Python sources), to the fixed point; each
// round scans the sources on up to `threads` threads.
std::set<std::string> inferGroupWrappers(const std::vector<std::string_view>& texts, unsigned threads = 1);

}  // namespace nccl_migrate::lint
