// The run's C/C++ headers that alias a class the rules look for (`using PG = c10d::ProcessGroupNCCL;`,
// `typedef ... ProcessGroupNCCL PG;`): their alias names become prefilter words, so a file that
// names the class only through a header of the tree still reaches the frontend, which reads that
// header (cpp_frontend.cc).
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace nccl_migrate::lint {

// Aliases of `className` (a last name, "ProcessGroupNCCL") declared in `source`, found by text.
// Aliases of a member (ProcessGroupNCCL::Options) are not aliases of the class.
std::set<std::string> aliasesOf(std::string_view source, std::string_view className);

// Whether a file name is a C/C++/CUDA header (where aliases of the tree live).
bool isCppHeader(std::string_view filename);

}  // namespace nccl_migrate::lint
