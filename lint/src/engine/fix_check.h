// Whether applying fixes left a file its language still reads: a fix must never turn a file
// that parsed into one that does not. Defined in lint/src/language_syntax.cc, which knows the
// languages; the engine only asks.
#pragma once

#include <optional>
#include <string>

namespace nccl_migrate::lint {

// Why `after` no longer reads where `before` did (Python: tree-sitter finds a syntax error it
// did not find before; C/C++/CUDA: brackets that balanced no longer do), or nullopt. Other
// languages are edited line by line and are not checked.
std::optional<std::string> fixBreaksSyntax(const std::string& path, const std::string& before, const std::string& after);

}  // namespace nccl_migrate::lint
