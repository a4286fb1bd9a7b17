// pythonDocstrings: see python_docstrings.h. A tokenizer reduced to what tells a string statement
// apart: comments, strings (prefixes, triple quotes, escapes, f-strings' replacement fields as
// Python 3.12 nests them), brackets and line continuations. Where the text cannot be valid Python
// as read (a single-quoted string running into its line's end), the reading went astray and no
// docstring is reported at all.
#include "python/python_docstrings.h"

#include "python/python_text.h"

#include <cstring>

namespace nccl_migrate::lint {
namespace {

constexpr size_t kAstray = std::string_view::npos;  // the reading cannot go on

bool isStringPrefix(std::string_view name) {
  if (name.size() > 2) return false;
  for (char c : name)
    if (!std::strchr("rRbBuUfF", c)) return false;
  return true;
}

// The width of the line break at `at` ("\r\n" counts as one), 0 where there is none.
size_t lineBreakAt(std::string_view text, size_t at) {
  if (at < text.size() && text[at] == '\n') return 1;
  if (at < text.size() && text[at] == '\r') return at + 1 < text.size() && text[at + 1] == '\n' ? 2 : 1;
  return 0;
}

struct Literal {
  size_t quote = 0;          // its first quote
  std::string_view closing;  // its quotes: one or three
  bool formatted = false;
};

// The string literal starting at `start` (its prefix or its quote), if one does.
bool literalAt(std::string_view text, size_t start, Literal& literal) {
  size_t quote = start;
  while (quote < text.size() && isIdentifierByte(text[quote])) ++quote;
  if (quote >= text.size() || (text[quote] != '"' && text[quote] != '\'')) return false;
  std::string_view prefix = text.substr(start, quote - start);
  if (!isStringPrefix(prefix)) return false;
  std::string_view three = text[quote] == '"' ? std::string_view("\"\"\"") : std::string_view("'''");
  literal.quote = quote;
  literal.closing = text.substr(quote, 3) == three ? three : three.substr(0, 1);
  literal.formatted = prefix.find_first_of("fF") != std::string_view::npos;
  return true;
}

size_t literalEnd(std::string_view text, const Literal& literal);

// One past the `}` that closes the replacement field whose `{` is just before `at`: an expression
// (brackets, nested strings of any quotes) then, after `!` or a `:` outside brackets, a
// conversion or a format spec of literal text with fields of its own. A field over several lines
// (a triple-quoted f-string's, which Python 3.12 lets hold comments) is not followed: kAstray.
size_t fieldEnd(std::string_view text, size_t at) {
  int depth = 0;
  bool spec = false;
  while (at < text.size()) {
    char c = text[at];
    if (c == '\n' || c == '\r') return kAstray;
    if (spec) {
      if (c == '{') {
        at = fieldEnd(text, at + 1);
        if (at == kAstray) return kAstray;
        continue;
      }
      if (c == '}') return at + 1;
      ++at;
      continue;
    }
    Literal nested;
    if ((c == '"' || c == '\'' || isIdentifierByte(c)) && literalAt(text, at, nested)) {
      at = literalEnd(text, nested);
      if (at == kAstray) return kAstray;
      continue;
    }
    if (isIdentifierByte(c)) {
      while (at < text.size() && isIdentifierByte(text[at])) ++at;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    else if ((c == ')' || c == ']') && depth > 0) --depth;
    else if (c == '}' && depth > 0) --depth;
    else if (c == '}') return at + 1;
    else if (depth == 0 && (c == ':' || c == '!') && text.compare(at, 2, "!=") != 0) spec = true;
    ++at;
  }
  return kAstray;
}

// One past the end of `literal`; kAstray when it never ends (a triple-quoted one at the end of
// the text) or runs into its line's end (single-quoted: no valid Python does).
size_t literalEnd(std::string_view text, const Literal& literal) {
  std::string_view closing = literal.closing;
  size_t i = literal.quote + closing.size();
  while (i < text.size()) {
    char c = text[i];
    if (c == '\\') {
      // In raw strings too, a backslash keeps the next quote from closing the literal; before a
      // line break (either kind) it continues the line.
      size_t brk = lineBreakAt(text, i + 1);
      i += 1 + (brk ? brk : 1);
    } else if (c == closing[0] && text.substr(i, closing.size()) == closing) {
      return i + closing.size();
    } else if (closing.size() == 1 && (c == '\n' || c == '\r')) {
      return kAstray;
    } else if (literal.formatted && c == '{') {
      if (i + 1 < text.size() && text[i + 1] == '{') {
        i += 2;
      } else {
        i = fieldEnd(text, i + 1);
        if (i == kAstray) return kAstray;
      }
    } else {
      ++i;
    }
  }
  return kAstray;
}

// Whether only blanks, a comment or the end of the line follow `at` on its line.
bool endsItsLine(std::string_view text, size_t at) {
  while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\f')) ++at;
  return at >= text.size() || text[at] == '\n' || text[at] == '\r' || text[at] == '#';
}

}  // namespace

std::vector<std::pair<size_t, size_t>> pythonDocstrings(std::string_view text) {
  std::vector<std::pair<size_t, size_t>> found;
  size_t i = 0, n = text.size();
  int depth = 0;          // brackets open
  bool lineStart = true;  // nothing but blanks since a logical line began
  // The literal starting at `i`: noted when it is a docstring, `i` moved past it; false when it
  // cannot be read.
  auto takeLiteral = [&](const Literal& literal) {
    size_t end = literalEnd(text, literal);
    if (end == kAstray) return false;
    if (lineStart && depth == 0 && literal.closing.size() == 3 && !literal.formatted && endsItsLine(text, end)) {
      found.emplace_back(i, end);
    }
    lineStart = false;
    i = end;
    return true;
  };
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n' || c == '\r') {
      if (depth == 0) lineStart = true;
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\f') {
      ++i;
    } else if (c == '#') {
      while (i < n && text[i] != '\n' && text[i] != '\r') ++i;
    } else if (c == '\\') {
      // A continued line (or a stray backslash): what follows is no new statement.
      lineStart = false;
      size_t brk = lineBreakAt(text, i + 1);
      i += 1 + (brk ? brk : 1);
    } else if (isIdentifierByte(c)) {
      size_t end = i;
      while (end < n && isIdentifierByte(text[end])) ++end;  // a name, keyword or number
      Literal literal;
      if (end < n && end - i <= 2 && (text[end] == '"' || text[end] == '\'') && literalAt(text, i, literal)) {
        if (!takeLiteral(literal)) return {};  // a prefixed string
        continue;
      }
      lineStart = false;
      i = end;
    } else if (Literal literal; (c == '"' || c == '\'') && literalAt(text, i, literal)) {
      if (!takeLiteral(literal)) return {};  // nothing here can be told for sure
    } else {
      if (c == '(' || c == '[' || c == '{') ++depth;
      else if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      lineStart = false;
      ++i;
    }
  }
  return found;
}

}  // namespace nccl_migrate::lint
