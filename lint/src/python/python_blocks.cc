// A Python file's top-level statements by lines (see frontends.h): a statement starts on a line
// that begins at column 0 with code, outside a triple-quoted string and not continuing the line
// before; decorators join the definition they decorate. Heuristic by design: a statement split
// wrongly is still parsed (tree-sitter tolerates the fragments), only the saving is smaller.
#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "python/python_frontend.h"
#include "python/python_scopes.h"
#include "python/python_text.h"

namespace nccl_migrate::lint {
namespace {

// The name after `def`/`async def`/`class` at the start of a line, else empty.
std::string definedName(std::string_view line) {
  for (std::string_view keyword : {"def ", "async def ", "class "}) {
    if (!line.starts_with(keyword)) continue;
    line.remove_prefix(keyword.size());
    size_t end = 0;
    while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_')) ++end;
    return std::string(line.substr(0, end));
  }
  return "";
}

bool startsDefinition(std::string_view line) {
  return line.starts_with("def ") || line.starts_with("async def ") || line.starts_with("class ") ||
         line.starts_with("@");
}

// Triple quotes on a line, each toggling whether the next line is inside a string.
int tripleQuotes(std::string_view line) {
  int count = 0;
  for (std::string_view quote : {std::string_view("\"\"\""), std::string_view("\'\'\'")}) {
    for (size_t at = line.find(quote); at != std::string_view::npos; at = line.find(quote, at + 3)) ++count;
  }
  return count;
}

// The bytes that change pythonBracketBalance's count or state.
constexpr std::array<bool, 256> kSpecialBytes = [] {
  std::array<bool, 256> special{};
  for (unsigned char c : std::string_view("\"'#\\()[]{}")) special[c] = true;
  return special;
}();

// Where the next byte of kSpecialBytes is in `line` from `at`, sixteen bytes at a time: most of a
// line is names, blanks and operators, and every line of a file is scanned.
size_t nextSpecial(std::string_view line, size_t at) {
#if defined(__SSE2__)
  const char* data = line.data();
  for (; at + 16 <= line.size(); at += 16) {
    __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + at));
    __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(bytes, _mm_set1_epi8('"')), _mm_cmpeq_epi8(bytes, _mm_set1_epi8('\''))),
                               _mm_or_si128(_mm_cmpeq_epi8(bytes, _mm_set1_epi8('#')), _mm_cmpeq_epi8(bytes, _mm_set1_epi8('\\'))));
    hit = _mm_or_si128(hit, _mm_or_si128(_mm_cmpeq_epi8(bytes, _mm_set1_epi8('(')), _mm_cmpeq_epi8(bytes, _mm_set1_epi8(')'))));
    hit = _mm_or_si128(hit, _mm_or_si128(_mm_cmpeq_epi8(bytes, _mm_set1_epi8('[')), _mm_cmpeq_epi8(bytes, _mm_set1_epi8(']'))));
    hit = _mm_or_si128(hit, _mm_or_si128(_mm_cmpeq_epi8(bytes, _mm_set1_epi8('{')), _mm_cmpeq_epi8(bytes, _mm_set1_epi8('}'))));
    if (int mask = _mm_movemask_epi8(hit)) return at + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
#endif
  while (at < line.size() && !kSpecialBytes[static_cast<unsigned char>(line[at])]) ++at;
  return at;
}

}  // namespace

int pythonBracketBalance(std::string_view line) {
  int depth = 0;
  char quote = 0;
  for (size_t i = nextSpecial(line, 0); i < line.size(); i = nextSpecial(line, i + 1)) {
    char c = line[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '#') break;
    if (c == '"' || c == '\'') quote = c;
    else if (c == '(' || c == '[' || c == '{') ++depth;
    else if (c == ')' || c == ']' || c == '}') --depth;
  }
  return depth;
}

std::vector<ParseRegion> pythonStatements(std::string_view text, const ParseRegion& within, size_t indent) {
  std::vector<ParseRegion> blocks;
  bool inString = false, continues = false, awaitingDefinition = false;
  int depth = 0;  // brackets open at the end of the previous line (strings skipped)
  uint32_t row = within.beginRow;
  size_t stop = std::min(within.end, text.size());
  auto close = [&](size_t at, uint32_t atRow, uint32_t column) {
    blocks.back().end = at;
    blocks.back().endRow = atRow;
    blocks.back().endColumn = column;
  };
  for (size_t start = within.begin; start < stop; ++row) {
    size_t newline = text.find('\n', start);
    size_t end = newline == std::string_view::npos || newline >= stop ? stop : newline + 1;
    std::string_view line = text.substr(start, end - start);
    size_t lead = firstNonBlank(line);
    char first = lead == std::string_view::npos ? '\n' : line[lead];
    bool code = lead == indent && first != '\n' && first != '\r' && first != '#';
    std::string_view stripped = code ? line.substr(lead) : std::string_view();
    bool opensStatement = code && !inString && !continues && depth <= 0;
    if (opensStatement && !(awaitingDefinition && !blocks.empty())) {
      if (!blocks.empty()) close(start, row, 0);
      blocks.push_back({start, start, row, row, 0, startsDefinition(stripped), definedName(stripped)});
      awaitingDefinition = stripped.starts_with("@");
    } else if (opensStatement && awaitingDefinition) {
      awaitingDefinition = stripped.starts_with("@");  // the decorated def or class joins its decorators
      if (!awaitingDefinition) blocks.back().name = definedName(stripped);
    } else if (blocks.empty()) {
      blocks.push_back({within.begin, within.begin, within.beginRow, within.beginRow, 0, false, ""});
    }
    if (tripleQuotes(line) % 2 == 1) inString = !inString;
    if (!inString) depth = std::max(depth + pythonBracketBalance(line), 0);
    std::string_view trimmed = line.substr(0, lastNotAny(line, "\r\n") + 1);
    continues = !trimmed.empty() && trimmed.back() == '\\';
    start = end;
    if (end == stop && (newline == std::string_view::npos || newline >= stop)) {
      close(stop, row, static_cast<uint32_t>(line.size()));
      return blocks;
    }
  }
  if (!blocks.empty()) close(stop, row, 0);
  return blocks;
}

std::vector<ParseRegion> pythonTopLevelBlocks(std::string_view text) {
  ParseRegion whole{0, text.size(), 0, 0, 0, false, ""};
  return pythonStatements(text, whole, 0);
}

}  // namespace nccl_migrate::lint
