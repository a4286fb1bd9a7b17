// Byte-level questions about Python source text that the scans before any parse ask for every
// line or call they look at: identifier bytes and line starts.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace nccl_migrate::lint {

// A table, not std::isalnum: this runs for every '(' and line of every Python file of the run.
inline constexpr std::array<bool, 256> kPythonIdentifierBytes = [] {
  std::array<bool, 256> table{};
  for (int c = 0; c < 256; ++c) table[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  return table;
}();

inline bool isIdentifierByte(char c) { return kPythonIdentifierBytes[static_cast<unsigned char>(c)]; }

// The offset where the line holding offset `at` starts.
inline size_t lineStart(std::string_view text, size_t at) {
  size_t nl = text.rfind('\n', at == 0 ? 0 : at - 1);
  return at == 0 || nl == std::string_view::npos ? 0 : nl + 1;
}

}  // namespace nccl_migrate::lint
