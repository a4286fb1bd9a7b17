// Where a definition a fix calls goes in a C/C++/CUDA file: after its includes, at file scope.
#pragma once

#include <string>

#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::lint {

// The edit that puts `definition` (ending with its newline) after the last #include before
// `firstUse`, past the #endif of a conditional block it stands in (an include guard around the
// whole file excepted), with a blank line on either side.
Edit cppDefinitionPlacement(const std::string& text, const std::string& definition, size_t firstUse);

}  // namespace nccl_migrate::lint
