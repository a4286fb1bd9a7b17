// pythonDocstrings: see python_docstrings.h. A tokenizer reduced to what tells a string statement
// apart: comments, strings (prefixes, triple quotes, escapes), brackets and line continuations.
#include "python_docstrings.h"

#include <cctype>
#include <cstring>

namespace nccl_migrate::lint {
namespace {

bool isIdentifierByte(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

bool isStringPrefix(std::string_view name) {
  if (name.size() > 2) return false;
  for (char c : name)
    if (!std::strchr("rRbBuUfF", c)) return false;
  return true;
}

// One past the end of the string literal whose opening quotes `closing` are at `quote`; for an
// unterminated one, npos (triple-quoted: it runs to the end of the text) or the end of its line.
size_t stringEnd(std::string_view text, size_t quote, std::string_view closing) {
  size_t i = quote + closing.size();
  while (i < text.size()) {
    char c = text[i];
    if (c == '\\') {
      i += 2;  // in raw strings too, a backslash keeps the next quote from closing the literal
    } else if (c == closing[0] && text.substr(i, closing.size()) == closing) {
      return i + closing.size();
    } else if (closing.size() == 1 && c == '\n') {
      return i;
    } else {
      ++i;
    }
  }
  return closing.size() == 3 ? std::string_view::npos : text.size();
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
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      if (depth == 0) lineStart = true;
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
      ++i;
    } else if (c == '#') {
      while (i < n && text[i] != '\n') ++i;
    } else if (c == '\\') {
      // A continued line (or a stray backslash): what follows is no new statement.
      lineStart = false;
      i += (i + 1 < n && text[i + 1] == '\r') ? 3 : 2;
    } else if (c == '"' || c == '\'' || isIdentifierByte(c)) {
      size_t start = i, quote = i;
      if (c != '"' && c != '\'') {
        while (quote < n && isIdentifierByte(static_cast<unsigned char>(text[quote]))) ++quote;
        if (quote >= n || (text[quote] != '"' && text[quote] != '\'') ||
            !isStringPrefix(text.substr(start, quote - start))) {
          lineStart = false;  // a name, keyword or number
          i = quote;
          continue;
        }
      }
      std::string_view three = text[quote] == '"' ? std::string_view("\"\"\"") : std::string_view("'''");
      bool triple = text.substr(quote, 3) == three;
      bool formatted = text.substr(start, quote - start).find_first_of("fF") != std::string_view::npos;
      size_t end = stringEnd(text, quote, triple ? three : three.substr(0, 1));
      if (end == std::string_view::npos) break;  // unterminated: the rest of the text is in it
      if (lineStart && depth == 0 && triple && !formatted && endsItsLine(text, end)) found.emplace_back(start, end);
      lineStart = false;
      i = end;
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
