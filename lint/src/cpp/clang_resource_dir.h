// Where Clang's builtin headers (stddef.h, the intrinsics) are for the AST tier.
#pragma once

#include <string>

namespace nccl_migrate::lint {

// The copy shipped beside an installed binary (<prefix>/share/nccl-migrate/clang, found from the
// binary's own path, links resolved) when it is there, else the directory the build pinned.
const std::string& clangResourceDir();

}  // namespace nccl_migrate::lint
