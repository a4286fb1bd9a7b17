// Frontends turn one file's text into a SourceModel. They are the only code that touches a
// parser's API.
#pragma once

#include <string>

#include "nccl_migrate/lint/source_model.h"

namespace nccl_migrate::lint {

// Python through tree-sitter-python: error tolerant, so a file with a syntax error keeps its
// other findings.
SourceModel parsePython(const std::string& path, const std::string& text);

// C/C++/CUDA through Clang's raw lexer: needs no headers and no compile database.
SourceModel lexCpp(const std::string& path, const std::string& text);

}  // namespace nccl_migrate::lint
