// Preprocessor branches torch 2.15 never compiles. The rules are about torch 2.15, so code that
// only an older (or newer) torch compiles holds none of their hazards: `#if TORCH_VERSION_MAJOR < 2`
// guards what torch 1.x needed. A condition is decided where it names only torch's version macros
// and constants (comparisons, arithmetic, `defined`, `&&`, `||`, `!`, `?:`, parentheses); one that
// names anything else (a project's macro, `__has_include`, a function-like macro) is undecided, and
// every branch it guards is kept. Both tiers ask here: the lexer drops the tokens, the AST drops
// what it finds in them, so the two read a file alike whatever torch a build's headers are of.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "cpp/cpp_tokens.h"

namespace nccl_migrate::lint {

// torch 2.15's version macros (torch/headeronly/version.h). `value` is what a condition may rely
// on: any 2.15 release counts, so TORCH_VERSION_PATCH is defined with no value known, and
// TORCH_VERSION is a string. `definition` is what the AST tier defines where a build has no
// torch headers (the first release).
struct TorchVersionMacro {
  const char* name;
  std::optional<int64_t> value;
  const char* definition;
};
const std::vector<TorchVersionMacro>& torchVersionMacros();

// For each token, whether torch 2.15 may compile it (directives included: a directive in a
// branch that is not compiled is not read). Directives are read in order, so a file's own
// `#define`/`#undef` of a version macro makes that macro undecided from there on. Blocks are kept
// on a stack, not walked recursively; an `#endif` or `#else` with no `#if` is ignored.
std::vector<bool> compiledForTorch(const std::vector<Tok>& toks);

// The tokens torch 2.15 may compile, in order.
std::vector<Tok> keepCompiledForTorch(std::vector<Tok> toks);

// The byte ranges of the text torch 2.15 does not compile (each from its first token to its last).
std::vector<Range> notCompiledForTorch(const std::vector<Tok>& toks);

}  // namespace nccl_migrate::lint
