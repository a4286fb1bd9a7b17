// A C/C++/CUDA file as Clang's raw lexer reads it: tokens with their spelling, place and bytes.
// Shared by the lexer tier and the AST tier (which asks which bytes torch 2.15 compiles), both
// inside the frontend module.
#pragma once

#include <string>
#include <vector>

#include <clang/Basic/TokenKinds.h>

#include "nccl_migrate/lint/source_model.h"

namespace nccl_migrate::lint {

struct Tok {
  clang::tok::TokenKind kind;
  std::string text;  // identifier spelling, or punctuation
  Location where;
  size_t begin = 0;  // bytes of the file, for fixes
  size_t end = 0;
  bool atLineStart = false;  // first on its line (a `\` continuation does not start one): where `#` opens a directive
};

std::vector<Tok> tokenize(const std::string& path, const std::string& text);

}  // namespace nccl_migrate::lint
