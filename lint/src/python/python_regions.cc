// Region selection for Python files (see python_regions.h). Module-level statements are kept; a
// definition without a word is left out; a class with one keeps its header, its class-level
// statements and the members with a word; a compound statement (`if`, `else`, `try`, `with`,
// loops) keeps its header and treats its body as module level again, so a module whose code sits
// under `if is_available():` is split like any other.
#include "python/python_regions.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "python/python_text.h"

namespace nccl_migrate::lint {
namespace {

std::string_view firstLineOf(const std::string& text, const ParseRegion& block) {
  size_t end = std::min(text.find('\n', block.begin), block.end);
  std::string_view line(text.data() + block.begin, end - block.begin);
  size_t lead = firstNonBlank(line);
  return lead == std::string_view::npos ? std::string_view() : line.substr(lead);
}

// A statement that is only a string (a docstring, a string used as a comment).
bool isBareString(const std::string& text, const ParseRegion& block) {
  std::string_view line = firstLineOf(text, block);
  size_t at = 0;
  while (at < line.size() && std::strchr("rRbBuUfF", line[at]) && line[at] != '\0') ++at;
  return at < line.size() && (line[at] == '"' || line[at] == '\'') && at <= 2;
}

// A statement that is one string literal and nothing else: the Python frontend never looks
// inside one (a docstring documents, it sets nothing), so it is left out whatever words it holds.
bool isOnlyAString(const std::string& text, const ParseRegion& block) {
  size_t at = firstNonBlank(text, block.begin);
  size_t prefix = 0;
  while (at < block.end && prefix < 2 && std::strchr("rRbBuUfF", text[at]) && text[at] != '\0') ++at, ++prefix;
  if (at >= block.end || (text[at] != '"' && text[at] != '\'')) return false;
  char quote = text[at];
  bool triple = text.compare(at, 3, std::string(3, quote)) == 0;
  size_t end = std::string::npos;  // one past the closing quote
  for (size_t i = at + (triple ? 3 : 1); i < block.end; ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (!triple && (text[i] == '\n' || text[i] == '\r')) {
      return false;
    } else if (text[i] == quote && (!triple || text.compare(i, 3, std::string(3, quote)) == 0)) {
      end = i + (triple ? 3 : 1);
      break;
    }
  }
  // Blanks only after it: a comment there (a suppression) must still be seen.
  return end != std::string::npos && firstNotAny(text, " \t\r\n", end) >= block.end;
}

// A `class` statement, decorated or not; comments may stand between its decorators and it
// (`@internal_api`, `# pylint: ...`, `class Context:`).
bool isClassBlock(const std::string& text, const ParseRegion& block) {
  for (size_t start = block.begin; start < block.end;) {
    size_t end = std::min(text.find('\n', start), block.end);
    std::string_view line(text.data() + start, end - start);
    line.remove_prefix(std::min(firstNonBlank(line), line.size()));
    if (line.starts_with("class ")) return true;
    if (!line.starts_with("@") && !line.starts_with("#") && !line.empty()) return false;
    start = end + 1;
  }
  return false;
}

// A clause of a compound statement whose body binds at the level of the clause itself.
bool isCompoundClause(const std::string& text, const ParseRegion& block) {
  std::string_view line = firstLineOf(text, block);
  if (line.starts_with("async ")) line.remove_prefix(6);
  for (std::string_view keyword : {"if ", "elif ", "else:", "try:", "except", "finally:", "with ", "for ", "while "})
    if (line.starts_with(keyword)) return true;
  return false;
}

// Whether a word ends inside (begin, end]; `ends` sorted.
bool holdsWord(const std::vector<size_t>& ends, size_t begin, size_t end) {
  auto it = std::upper_bound(ends.begin(), ends.end(), begin);
  return it != ends.end() && *it <= end;
}

void appendRegion(std::vector<ParseRegion>& kept, const ParseRegion& block) {
  if (!kept.empty() && kept.back().end == block.begin) {
    kept.back().end = block.end;
    kept.back().endRow = block.endRow;
    kept.back().endColumn = block.endColumn;
  } else {
    kept.push_back(block);
  }
}

// The indentation of a block's body: that of its first indented code line.
size_t bodyIndent(const std::string& text, const ParseRegion& block) {
  for (size_t start = text.find('\n', block.begin); start != std::string::npos && start + 1 < block.end;
       start = text.find('\n', start + 1)) {
    size_t lead = firstNonBlank(text, start + 1);
    if (lead == std::string::npos || lead >= block.end) break;
    if (text[lead] != '\n' && text[lead] != '\r' && text[lead] != '#' && lead > start + 1) return lead - start - 1;
  }
  return 0;
}

// A block's header and the statements of its body (empty when it has no indented body).
std::vector<ParseRegion> headerAndBody(const std::string& text, const ParseRegion& block) {
  size_t indent = bodyIndent(text, block);
  return indent ? pythonStatements(text, block, indent) : std::vector<ParseRegion>{};
}

class RegionChooser {
 public:
  RegionChooser(const std::string& text, const std::vector<size_t>& ends, std::vector<ParseRegion>& leftOut)
      : text_(text), ends_(ends), leftOut_(leftOut) {}

  // Statements that bind at module level, in order.
  void keepModuleLevel(const std::vector<ParseRegion>& statements) {
    for (const ParseRegion& block : statements) {
      bool word = holdsWord(ends_, block.begin, block.end);
      if (isOnlyAString(text_, block) || (!word && isBareString(text_, block))) continue;  // binds nothing
      if (block.definition && !word) {
        leftOut_.push_back(block);
      } else if (block.definition && isClassBlock(text_, block)) {
        keepClass(block);
      } else if (!block.definition && isCompoundClause(text_, block)) {
        keepCompound(block);
      } else {
        appendRegion(kept, block);
      }
    }
  }

  std::vector<ParseRegion> kept;

 private:
  // A class a rule needs: its header and class-level statements, and the members that hold a
  // word (all of it when nothing of its body is kept, so that its body stays a body). A word in a
  // class-level statement alone (a dataclass field) keeps the fields, not every method.
  void keepClass(const ParseRegion& block) {
    std::vector<ParseRegion> needed;
    bool anyBody = false;
    std::vector<ParseRegion> members = headerAndBody(text_, block);
    for (size_t i = 0; i < members.size(); ++i) {
      const ParseRegion& member = members[i];
      bool word = holdsWord(ends_, member.begin, member.end);
      if ((member.definition && !word) || (i > 0 && isOnlyAString(text_, member))) continue;
      anyBody |= i > 0;
      needed.push_back(member);
    }
    if (!anyBody) return appendRegion(kept, block);
    for (const ParseRegion& member : needed) appendRegion(kept, member);
  }

  // A compound clause: its header, then its body as module level, when that leaves out some
  // definition and keeps some statement of the body (a body must not be empty).
  void keepCompound(const ParseRegion& block) {
    std::vector<ParseRegion> parts = headerAndBody(text_, block);
    if (parts.size() < 2) return appendRegion(kept, block);
    bool leavesOut = false, keepsSome = false;
    for (size_t i = 1; i < parts.size(); ++i) {
      bool word = holdsWord(ends_, parts[i].begin, parts[i].end);
      bool dropped = isOnlyAString(text_, parts[i]) || (!word && (parts[i].definition || isBareString(text_, parts[i])));
      leavesOut |= dropped;
      keepsSome |= !dropped;
    }
    if (!leavesOut || !keepsSome) return appendRegion(kept, block);
    appendRegion(kept, parts.front());
    keepModuleLevel(std::vector<ParseRegion>(parts.begin() + 1, parts.end()));
  }

  const std::string& text_;
  const std::vector<size_t>& ends_;
  std::vector<ParseRegion>& leftOut_;
};

}  // namespace

std::vector<ParseRegion> pythonRegions(const std::string& text, const std::vector<size_t>& wordEnds,
                                       std::vector<ParseRegion>& leftOut) {
  RegionChooser chooser(text, wordEnds, leftOut);
  chooser.keepModuleLevel(pythonTopLevelBlocks(text));
  std::vector<ParseRegion>& kept = chooser.kept;
  if (kept.size() == 1 && kept.front().begin == 0 && kept.front().end == text.size()) return {};
  if (kept.empty()) kept.push_back({0, 0, 0, 0, 0, false, ""});  // nothing to parse
  return kept;
}

}  // namespace nccl_migrate::lint
