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

// Python identifier bytes and every byte of a UTF-8 sequence (a non-ASCII name's), for the
// scanners that take a word to run through such bytes.
inline constexpr std::array<bool, 256> kWordOrNonAsciiBytes = [] {
  std::array<bool, 256> table = kPythonIdentifierBytes;
  for (int c = 0x80; c < 256; ++c) table[c] = true;
  return table;
}();

// The first offset at or after `from` whose byte is none of `blanks`, else npos: what
// find_first_not_of answers, without the library call it makes for every byte it passes (the
// indentation of every line of every file goes through here).
inline size_t firstNotAny(std::string_view text, std::string_view blanks, size_t from = 0) {
  for (size_t at = from; at < text.size(); ++at) {
    bool blank = false;
    for (char b : blanks) blank |= text[at] == b;
    if (!blank) return at;
  }
  return std::string_view::npos;
}

// The same for spaces and tabs, the blanks that indent a line.
inline size_t firstNonBlank(std::string_view text, size_t from = 0) {
  for (size_t at = from; at < text.size(); ++at)
    if (text[at] != ' ' && text[at] != '\t') return at;
  return std::string_view::npos;
}

// The last offset whose byte is none of `blanks`, else npos: find_last_not_of, as firstNotAny.
inline size_t lastNotAny(std::string_view text, std::string_view blanks) {
  for (size_t at = text.size(); at-- > 0;) {
    bool blank = false;
    for (char b : blanks) blank |= text[at] == b;
    if (!blank) return at;
  }
  return std::string_view::npos;
}

// The offset where the line holding offset `at` starts.
inline size_t lineStart(std::string_view text, size_t at) {
  size_t nl = text.rfind('\n', at == 0 ? 0 : at - 1);
  return at == 0 || nl == std::string_view::npos ? 0 : nl + 1;
}

}  // namespace nccl_migrate::lint
