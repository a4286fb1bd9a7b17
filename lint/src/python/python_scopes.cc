// Reading a Python source in parts (see python_scopes.h). Statements are found from the lines
// around a position (a line at column 0 that starts one), and split with pythonStatements, which
// follows brackets, strings and continuation lines; no whole-file pass is made.
#include "python/python_scopes.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "python/python_text.h"

namespace nccl_migrate::lint {
namespace {

// A line at column 0 that starts a statement: code, not a closing bracket or a comment.
bool startsStatement(std::string_view text, size_t line) {
  if (line >= text.size()) return false;
  char c = text[line];
  return isIdentifierByte(c) || c == '@';
}

// A clause that continues the compound statement above it.
bool continuesStatement(std::string_view text, size_t line) {
  std::string_view rest = text.substr(line, 8);
  return rest.starts_with("else") || rest.starts_with("elif ") || rest.starts_with("except") || rest.starts_with("finally");
}

size_t nextLine(std::string_view text, size_t at) {
  size_t nl = text.find('\n', at);
  return nl == std::string_view::npos ? text.size() : nl + 1;
}

// The newlines in [begin, end), sixteen bytes at a time.
uint32_t newlinesIn(std::string_view text, size_t begin, size_t end) {
  uint32_t n = 0;
#if defined(__SSE2__)
  const __m128i newline = _mm_set1_epi8('\n');
  for (; begin + 16 <= end; begin += 16) {
    __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + begin));
    n += static_cast<uint32_t>(__builtin_popcount(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, newline)))));
  }
#endif
  for (; begin < end; ++begin) n += text[begin] == '\n';
  return n;
}

// [begin, end) as a region of whole lines; `row` is the row of `begin` when known.
ParseRegion regionOf(std::string_view text, size_t begin, size_t end, std::optional<uint32_t> row = std::nullopt) {
  ParseRegion r;
  r.begin = begin;
  r.end = end;
  r.beginRow = row ? *row : newlinesIn(text, 0, begin);
  r.endRow = r.beginRow + newlinesIn(text, begin, end);
  if (end == text.size() && (end == 0 || text[end - 1] != '\n')) r.endColumn = static_cast<uint32_t>(end - lineStart(text, end));
  return r;
}

// The top-level statement around `at`, from the lines around it alone (a file can be large and
// the call is in one of its statements): back to the line at column 0 that starts it (an `if` for
// its `else`, with the decorators above a `def`), forward to the next such line. A line at column 0
// inside a triple-quoted string can cut it short; the parse then reads less.
ParseRegion topLevelStatementAt(std::string_view text, size_t at, std::vector<std::pair<size_t, uint32_t>>& rows) {
  size_t begin = lineStart(text, at);
  while (begin > 0 && (!startsStatement(text, begin) || continuesStatement(text, begin))) begin = lineStart(text, begin - 1);
  // The decorators above, across the comments and blank lines Python allows between them.
  for (size_t above = begin; above > 0;) {
    above = lineStart(text, above - 1);
    size_t lead = firstNotAny(text, " \t\r", above);
    if (lead < text.size() && (text[lead] == '\n' || text[lead] == '#')) continue;
    if (text[above] != '@') break;
    begin = above;
  }
  size_t end = nextLine(text, at);
  while (end < text.size() && !startsStatement(text, end)) end = nextLine(text, end);
  // The row of `begin`, counted from the nearest position before it whose row is known.
  auto known = std::upper_bound(rows.begin(), rows.end(), std::make_pair(begin, UINT32_MAX)) - 1;
  uint32_t row = known->second + newlinesIn(text, known->first, begin);
  rows.insert(known + 1, {begin, row});
  return regionOf(text, begin, end, row);
}

// A statement whose body is statements of their own: `def` and `class`, decorated or not (comments
// and blank lines may stand between the decorators and it, as python_regions.cc's isClassBlock
// reads them), and the clauses of compound statements (`if is_available():` around a whole module).
bool hasBody(std::string_view text, const ParseRegion& block) {
  for (size_t start = block.begin; start < block.end;) {
    size_t end = std::min(text.find('\n', start), block.end);
    std::string_view line = text.substr(start, end - start);
    line.remove_prefix(std::min(firstNotAny(line, " \t\r"), line.size()));
    if (line.starts_with("class ")) return true;
    if (line.starts_with("async ")) line.remove_prefix(6);
    if (!line.starts_with("@") && !line.starts_with("#") && !line.empty()) {
      for (std::string_view keyword : {"def ", "if ", "elif ", "else:", "try:", "except", "finally:", "with ", "for ", "while "})
        if (line.starts_with(keyword)) return true;
      return false;
    }
    start = end + 1;
  }
  return false;
}

// The indentation of a block's body: that of its first code line indented deeper than the block's
// own first line (a decorated method's `def` stands at its decorator's); 0 when none.
size_t bodyIndent(std::string_view text, const ParseRegion& block) {
  size_t own = std::min(firstNonBlank(text, block.begin), block.end) - block.begin;
  for (size_t nl = text.find('\n', block.begin); nl != std::string_view::npos && nl + 1 < block.end; nl = text.find('\n', nl + 1)) {
    size_t lead = firstNonBlank(text, nl + 1);
    if (lead == std::string_view::npos || lead >= block.end) break;
    if (text[lead] != '\n' && text[lead] != '\r' && text[lead] != '#' && lead - nl - 1 > own) return lead - nl - 1;
  }
  return 0;
}

}  // namespace

PythonScopes::PythonScopes(std::string_view text) : text_(text) {}

// Splits unit `k` into its header and body statements, when it has a body worth splitting.
void PythonScopes::split(size_t k) {
  constexpr int kMaxBodyDepth = 6;
  const Unit& unit = units_[k];
  if (unit.depth >= kMaxBodyDepth || !hasBody(text_, unit.region)) return;
  size_t indent = bodyIndent(text_, unit.region);
  std::vector<ParseRegion> members = indent ? pythonStatements(text_, unit.region, indent) : std::vector<ParseRegion>{};
  if (members.size() < 2) return;
  int header = static_cast<int>(units_.size());
  int parent = unit.header, depth = unit.depth + 1;
  std::vector<int> children;
  for (size_t m = 0; m < members.size(); ++m) {
    children.push_back(static_cast<int>(units_.size()));
    units_.push_back({members[m], m == 0 ? parent : header, depth});
  }
  units_[k].children = std::move(children);
}

// The unit (split as far as it goes) that holds `at`, unless a unit read before does; -1 for none.
int PythonScopes::unitAt(size_t at) {
  auto holds = [&](const std::vector<int>& among) -> int {
    auto it = std::upper_bound(among.begin(), among.end(), at,
                               [&](size_t offset, int u) { return offset < units_[static_cast<size_t>(u)].region.begin; });
    if (it == among.begin()) return -1;
    int u = *(it - 1);
    return at < units_[static_cast<size_t>(u)].region.end ? u : -1;
  };
  int k = holds(topLevel_);
  if (k < 0) {
    k = static_cast<int>(units_.size());
    units_.push_back({topLevelStatementAt(text_, at, rows_)});
    auto where = std::upper_bound(topLevel_.begin(), topLevel_.end(), units_.back().region.begin,
                                  [&](size_t begin, int u) { return begin < units_[static_cast<size_t>(u)].region.begin; });
    topLevel_.insert(where, k);
  }
  while (k >= 0 && !units_[static_cast<size_t>(k)].read) {
    if (units_[static_cast<size_t>(k)].children.empty()) split(static_cast<size_t>(k));
    const std::vector<int>& children = units_[static_cast<size_t>(k)].children;
    if (children.empty()) return k;
    int inner = holds(children);
    if (inner < 0) return k;
    k = inner;
  }
  return -1;
}

std::vector<ParseRegion> PythonScopes::unreadAround(const std::vector<size_t>& offsets) {
  std::vector<ParseRegion> regions;
  for (size_t at : offsets) {
    int k = unitAt(at);
    if (k < 0) continue;
    units_[static_cast<size_t>(k)].read = true;
    for (int u = k; u >= 0; u = units_[static_cast<size_t>(u)].header) regions.push_back(units_[static_cast<size_t>(u)].region);
  }
  return mergeRegions(std::move(regions));
}

std::vector<ParseRegion> mergeRegions(std::vector<ParseRegion> regions) {
  std::sort(regions.begin(), regions.end(), [](const ParseRegion& a, const ParseRegion& b) { return a.begin < b.begin; });
  std::vector<ParseRegion> merged;
  for (const ParseRegion& r : regions) {
    if (!merged.empty() && merged.back().end >= r.begin) {
      if (r.end > merged.back().end) {
        merged.back().end = r.end;
        merged.back().endRow = r.endRow;
        merged.back().endColumn = r.endColumn;
      }
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

namespace {

enum class BlockKind { Simple, Def, Class, Compound };

// A statement's head: the first line at the statement's own indentation that is no decorator,
// comment or blank (a decorator's arguments may continue on deeper lines), and what it opens.
struct Head {
  BlockKind kind = BlockKind::Simple;
  size_t start = 0;  // where its line starts
  size_t own = 0;    // the statement's indentation
};

Head headOf(std::string_view text, const ParseRegion& block) {
  Head head;
  head.own = std::string_view::npos;
  int depth = 0;  // brackets open before the line
  for (size_t start = block.begin; start < block.end;) {
    size_t end = std::min(text.find('\n', start), block.end);
    std::string_view line = text.substr(start, end - start);
    size_t lead = std::min(firstNotAny(line, " \t\r"), line.size());
    std::string_view code = line.substr(lead);
    size_t at = start;
    start = end + 1;
    if (code.empty() || code.starts_with("#")) continue;
    bool inBrackets = depth > 0;
    depth = std::max(0, depth + pythonBracketBalance(line));
    if (head.own == std::string_view::npos) head.own = lead;
    if (inBrackets || lead != head.own || code.starts_with("@")) continue;
    head.start = at;
    if (code.starts_with("async ")) code.remove_prefix(6);
    if (code.starts_with("def ")) head.kind = BlockKind::Def;
    else if (code.starts_with("class ")) head.kind = BlockKind::Class;
    for (std::string_view keyword : {"if ", "elif ", "else:", "try:", "except", "finally:", "with ", "for ", "while "})
      if (code.starts_with(keyword)) head.kind = BlockKind::Compound;
    return head;
  }
  return head;
}

// The indentation of the body after a head: that of the first code line after the head's
// statement ends (brackets closed, no continuation), when deeper than the statement's own; 0
// otherwise (a body on the head's line).
size_t bodyIndentAfter(std::string_view text, const ParseRegion& block, const Head& head) {
  int depth = 0;
  size_t start = head.start;
  while (start < block.end) {
    size_t end = std::min(text.find('\n', start), block.end);
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    depth += pythonBracketBalance(line);
    std::string_view trimmed = line.substr(0, lastNotAny(line, " \t\r") + 1);
    if (depth <= 0 && !trimmed.ends_with("\\")) break;
  }
  while (start < block.end) {
    size_t end = std::min(text.find('\n', start), block.end);
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    size_t lead = firstNotAny(line, " \t\r");
    if (lead == std::string_view::npos || line[lead] == '#') continue;
    return lead > head.own ? lead : 0;
  }
  return 0;
}

// Whether a line of [begin, end) opens a function definition.
bool holdsDef(std::string_view text, size_t begin, size_t end) {
  for (size_t start = begin; start < end;) {
    size_t stop = std::min(text.find('\n', start), end);
    std::string_view line = text.substr(start, stop - start);
    line.remove_prefix(std::min(firstNotAny(line, " \t\r"), line.size()));
    if (line.starts_with("def ") || line.starts_with("async def ")) return true;
    start = stop + 1;
  }
  return false;
}

// A block's body split into statements (its header first), empty when it has no indented body;
// `head` the block's.
std::vector<ParseRegion> bodyOf(std::string_view text, const ParseRegion& block, const Head& head) {
  size_t indent = bodyIndentAfter(text, block, head);
  if (indent == 0) return {};  // a one-line body, or none
  return pythonStatements(text, block, indent);
}

// The innermost def around `at` by indentation alone: up from its line, the nearest `def` line
// indented less than every code line passed (blank and comment lines aside, a line that starts
// with a closing bracket as deep as the line it closes); empty when none.
std::string defAbove(std::string_view text, size_t at) {
  size_t begin = lineStart(text, at);
  size_t limit = std::min(firstNonBlank(text, begin), at) - begin;
  while (begin > 0) {
    size_t above = lineStart(text, begin - 1);
    std::string_view line = text.substr(above, begin - above);
    begin = above;
    size_t lead = firstNonBlank(line);
    if (lead == std::string_view::npos || line[lead] == '\n' || line[lead] == '\r' || line[lead] == '#' || lead >= limit) continue;
    std::string_view code = line.substr(lead);
    // A closing bracket continues the statement above it at its indentation (a black-style
    // signature's `):` stands at its def's).
    limit = code.starts_with(")") || code.starts_with("]") || code.starts_with("}") ? lead + 1 : lead;
    if (code.starts_with("async ")) code.remove_prefix(6);
    if (!code.starts_with("def ")) continue;
    code.remove_prefix(4);
    size_t end = 0;
    while (end < code.size() && isIdentifierByte(code[end])) ++end;
    return std::string(code.substr(0, end));
  }
  return "";
}

}  // namespace

std::vector<std::string> enclosingFunctions(std::string_view text, const std::vector<size_t>& offsets) {
  constexpr int kMaxDepth = 32;
  const std::vector<ParseRegion> topLevel = pythonTopLevelBlocks(text);
  std::map<size_t, std::vector<ParseRegion>> bodies;  // by the block's start: offsets share their blocks
  std::vector<std::string> names;
  names.reserve(offsets.size());
  for (size_t at : offsets) {
    // Down the statements holding `at`, through the bodies of defs, classes and compound
    // statements; empty where unsure.
    std::string outer;  // the innermost def entered so far
    const std::vector<ParseRegion>* level = &topLevel;
    bool sure = false;
    for (int depth = 0; depth < kMaxDepth; ++depth) {
      auto it = std::upper_bound(level->begin(), level->end(), at, [](size_t offset, const ParseRegion& r) { return offset < r.begin; });
      if (it == level->begin() || at >= (it - 1)->end) break;
      const ParseRegion& block = *(it - 1);
      Head head = headOf(text, block);
      if (head.kind == BlockKind::Simple) {
        sure = !holdsDef(text, block.begin, block.end);
        break;
      }
      auto [body, added] = bodies.try_emplace(block.begin);
      if (added) body->second = bodyOf(text, block, head);
      const std::vector<ParseRegion>& members = body->second;
      if (members.size() < 2) break;
      // The first member is the block's header: a def's decorators and signature, a clause's line.
      if (at < members.front().end) {
        sure = head.kind != BlockKind::Def && !holdsDef(text, members.front().begin, members.front().end);
        break;
      }
      if (head.kind == BlockKind::Def) {
        if (block.name.empty()) break;
        outer = block.name;
      }
      level = &members;
    }
    // The statements split by lines can be wrong where a string's line looks like code; the
    // indentation above must name the same def.
    names.push_back(sure && !outer.empty() && defAbove(text, at) == outer ? outer : "");
  }
  return names;
}

std::vector<ParseRegion> leadingImports(std::string_view text) {
  std::vector<ParseRegion> imports;
  uint32_t row = 0;
  for (size_t line = 0; line < text.size();) {
    std::string_view rest = text.substr(line, 10);
    if (rest.starts_with("def ") || rest.starts_with("class ") || rest.starts_with("async def ") || rest.starts_with("@")) break;
    size_t next = nextLine(text, line);
    if (rest.starts_with("import ") || rest.starts_with("from ")) {
      while (next < text.size() && !startsStatement(text, next)) next = nextLine(text, next);
      imports.push_back(regionOf(text, line, next, row));
      row = imports.back().endRow;
    } else {
      ++row;
    }
    line = next;
  }
  return imports;
}

}  // namespace nccl_migrate::lint
