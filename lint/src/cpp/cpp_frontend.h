// The C/C++/CUDA frontend: Clang's raw lexer, and its AST where a compile database is given.
// Clang itself lives in a module loaded on first use (cpp_module.h).
#pragma once

#include <string>

#include "nccl_migrate/lint/linter.h"
#include "nccl_migrate/lint/source_model.h"

namespace nccl_migrate::lint {

// C/C++/CUDA through Clang's raw lexer: needs no headers and no compile database.
SourceModel lexCpp(const std::string& path, const std::string& text);

// C/C++/CUDA through Clang's AST with the given compile commands; adds to `model` the type checks
// the lexer cannot see (typedefs, aliases, templates). Missing headers are not fatal: torch's
// classes are stubbed. Returns a note when the file could not be parsed at all.
std::string addCppAstFacts(SourceModel& model, const std::string& text, const CppAstOptions& options);

}  // namespace nccl_migrate::lint
