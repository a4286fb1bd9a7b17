// A lexical check of C/C++/CUDA text that needs no Clang: whether its brackets balance.
#pragma once

#include <string>

namespace nccl_migrate::lint {

// (), [] and {} outside comments, string and character literals, each closed by its own kind.
// Enough to catch an edit that cut a parenthesis or left one open.
bool cppBracketsBalance(const std::string& text);

}  // namespace nccl_migrate::lint
