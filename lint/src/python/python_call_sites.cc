// onlyFewCallsOutsideLoops: see python_call_sites.h. One pass over the text as Python's tokenizer
// sees it (strings, comments, brackets, continuation lines) gives its logical lines; each is in a
// loop when it is a loop's header or loop `else`, holds `for` or `while` (a comprehension), or is
// indented under a line that is one of those.
#include "python/python_call_sites.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>
#include <string>

#include "python/python_text.h"

namespace nccl_migrate::lint {
namespace {

// A byte of a name, a non-ASCII one's included (a table: this runs for every byte of a file).
bool isWordByte(unsigned char c) { return kWordOrNonAsciiBytes[c]; }

struct LogicalLine {
  size_t begin = 0, end = 0;  // [begin, end): from its first token to its closing newline
  size_t indent = 0;
  std::string_view first, second;  // its first two words ("async", "for")
  bool loopWord = false;           // `for` or `while` among its tokens
  bool inLoop = false;
};

struct NotCode {
  size_t begin = 0, end = 0;
  bool formatted = false;  // an f-string, whose interpolations are code
};

// The text's logical lines and the comments and strings between their tokens; nothing where the
// text leaves a doubt about them.
class Tokens {
 public:
  explicit Tokens(std::string_view text) : text_(text) {}

  bool read() {
    size_t n = text_.size();
    for (size_t i = 0; i < n;) {
      if (!open_) {
        size_t j = i;
        while (j < n && (text_[j] == ' ' || text_[j] == '\t' || text_[j] == '\f')) ++j;
        if (j >= n) break;
        if (text_[j] == '\n' || text_[j] == '\r') {  // a blank line
          if (text_[j] == '\r' && (j + 1 >= n || text_[j + 1] != '\n')) return false;
          i = j + (text_[j] == '\r' ? 2 : 1);
          continue;
        }
        if (text_[j] == '#') {  // a comment line
          i = comment(j);
          continue;
        }
        if (text_.substr(i, j - i).find_first_of("\t\f") != std::string_view::npos) return false;
        line_ = LogicalLine{j, j, j - i, {}, {}, false, false};
        open_ = true;
        tokens_ = 0;
        i = j;
        continue;
      }
      char c = text_[i];
      if (c == '#') {
        i = comment(i);
      } else if (c == '\\') {
        if (text_.compare(i + 1, 1, "\n") == 0) i += 2;
        else if (text_.compare(i + 1, 2, "\r\n") == 0) i += 3;
        else i += 1;
      } else if (c == '\n' || c == '\r') {
        if (c == '\r' && (i + 1 >= n || text_[i + 1] != '\n')) return false;
        if (depth_ == 0) {
          line_.end = i;
          lines.push_back(line_);
          open_ = false;
        }
        i += c == '\r' ? 2 : 1;
      } else if (c == '"' || c == '\'') {
        if (!string(i, i, false, i)) return false;
      } else if (isWordByte(static_cast<unsigned char>(c))) {
        size_t k = i;
        while (k < n && isWordByte(static_cast<unsigned char>(text_[k]))) ++k;
        std::string_view word = text_.substr(i, k - i);
        if (k < n && (text_[k] == '"' || text_[k] == '\'') && isStringPrefix(word)) {
          if (!string(i, k, word.find_first_of("fF") != std::string_view::npos, i)) return false;
          continue;
        }
        if (line_.first.empty() && line_.begin == i) line_.first = word;
        else if (line_.second.empty() && !line_.first.empty() && tokens_ == 1) line_.second = word;
        ++tokens_;
        if (word == "for" || word == "while") line_.loopWord = true;
        i = k;
      } else {
        if (c == '(' || c == '[' || c == '{') ++depth_;
        else if (c == ')' || c == ']' || c == '}') depth_ = std::max(depth_ - 1, 0);
        if (c != ' ' && c != '\t') ++tokens_;
        ++i;
      }
    }
    if (open_) {
      line_.end = n;
      lines.push_back(line_);
    }
    return true;
  }

  std::vector<LogicalLine> lines;
  std::vector<NotCode> notCode;

 private:
  static bool isStringPrefix(std::string_view word) {
    if (word.size() > 2) return false;
    std::string lower(word);
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return lower == "r" || lower == "u" || lower == "b" || lower == "f" || lower == "br" || lower == "rb" ||
           lower == "fr" || lower == "rf";
  }

  size_t comment(size_t at) {
    size_t end = text_.find('\n', at);
    if (end == std::string_view::npos) end = text_.size();
    if (end > at && text_[end - 1] == '\r') --end;
    notCode.push_back({at, end, false});
    return end;
  }

  // The string whose prefix starts at `begin` and whose quote is at `quoteAt`; `next` receives
  // where reading goes on. False when it is not closed where Python would close it.
  bool string(size_t begin, size_t quoteAt, bool formatted, size_t& next) {
    char quote = text_[quoteAt];
    bool triple = text_.compare(quoteAt, 3, std::string(3, quote)) == 0;
    size_t n = text_.size();
    for (size_t i = quoteAt + (triple ? 3 : 1); i < n; ++i) {
      char c = text_[i];
      if (c == '\\') {
        ++i;
      } else if (!triple && (c == '\n' || c == '\r')) {
        return false;
      } else if (c == quote && (!triple || text_.compare(i, 3, std::string(3, quote)) == 0)) {
        next = i + (triple ? 3 : 1);
        notCode.push_back({begin, next, formatted});
        ++tokens_;
        return true;
      }
    }
    return false;
  }

  std::string_view text_;
  bool open_ = false;
  int depth_ = 0;
  size_t tokens_ = 0;  // in the open logical line
  LogicalLine line_;
};

bool isCompoundKeyword(std::string_view w) {
  for (std::string_view k : {"if", "elif", "else", "for", "while", "try", "except", "finally", "with", "def", "class",
                             "match", "case"})
    if (w == k) return true;
  return false;
}

// Marks the lines in loops: a stack of the compound statements' headers open above each line.
void markLoops(std::vector<LogicalLine>& lines) {
  struct Open {
    size_t indent = 0;
    bool loop = false;       // its body runs repeatedly
    bool loopChain = false;  // it continues a `for` or `while` (whose `else` is the loop's)
  };
  std::vector<Open> open;
  for (LogicalLine& line : lines) {
    std::optional<Open> sibling;  // the clause before, at the same indentation
    while (!open.empty() && open.back().indent >= line.indent) {
      if (open.back().indent == line.indent) sibling = open.back();
      open.pop_back();
    }
    bool enclosed = std::any_of(open.begin(), open.end(), [](const Open& o) { return o.loop; });
    std::string_view word = line.first == "async" ? line.second : line.first;
    bool chain = word == "for" || word == "while" ||
                 ((word == "else" || word == "elif" || word == "except" || word == "finally") && sibling && sibling->loopChain);
    bool header = word == "for" || word == "while" || (word == "else" && chain);
    line.inLoop = enclosed || header || line.loopWord;
    if (isCompoundKeyword(word)) open.push_back({line.indent, header, chain});
  }
}

// The next token after `at` on its line, blanks skipped.
std::string_view nextToken(std::string_view text, size_t at) {
  while (at < text.size() && (text[at] == ' ' || text[at] == '\t')) ++at;
  if (at >= text.size()) return {};
  size_t end = at;
  while (end < text.size() && isWordByte(static_cast<unsigned char>(text[end]))) ++end;
  return text.substr(at, std::max(end, at + 1) - at);
}

// Whether the dotted name that ends the span starting at `begin` follows an `=` (an assignment or a
// keyword argument; not a comparison).
bool assignedFrom(std::string_view text, size_t begin) {
  size_t at = begin;
  while (at > 0 && (isWordByte(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '.')) --at;
  while (at > 0 && (text[at - 1] == ' ' || text[at - 1] == '\t')) --at;
  if (at == 0 || text[at - 1] != '=') return false;
  char before = at >= 2 ? text[at - 2] : ' ';
  return before != '=' && before != '!' && before != '<' && before != '>';
}

// The word before `at` on its line, blanks skipped; empty when something else comes first.
std::string_view previousWord(std::string_view text, size_t at) {
  while (at > 0 && (text[at - 1] == ' ' || text[at - 1] == '\t')) --at;
  size_t begin = at;
  while (begin > 0 && isWordByte(static_cast<unsigned char>(text[begin - 1]))) --begin;
  return text.substr(begin, at - begin);
}

// Whether the one-name receiver `name` is bound only as itself: each of its tokens in the code is
// followed by a dot, or stands in an import without `as` around it.
bool boundAsItself(std::string_view text, std::string_view name, const std::vector<LogicalLine>& lines,
                   const std::vector<NotCode>& notCode) {
  for (size_t at = text.find(name); at != std::string_view::npos; at = text.find(name, at + 1)) {
    size_t end = at + name.size();
    if ((at > 0 && isWordByte(static_cast<unsigned char>(text[at - 1]))) ||
        (end < text.size() && isWordByte(static_cast<unsigned char>(text[end]))))
      continue;  // part of a longer name
    auto in = std::upper_bound(notCode.begin(), notCode.end(), at, [](size_t a, const NotCode& s) { return a < s.begin; });
    if (in != notCode.begin() && at < std::prev(in)->end) {
      if (std::prev(in)->formatted) return false;
      continue;
    }
    if (previousWord(text, at) == "as") return false;
    std::string_view next = nextToken(text, end);
    if (next == ".") continue;
    auto line = std::upper_bound(lines.begin(), lines.end(), at, [](size_t a, const LogicalLine& l) { return a < l.begin; });
    if (line == lines.begin()) return false;
    std::string_view first = std::prev(line)->first;
    if ((first != "from" && first != "import") || next == "as") return false;
  }
  return true;
}

// The receiver of a call whose name spans [begin, ...): the name before the dot, and whether it is
// the whole receiver (no dot before it). Empty when the receiver is no name (`f().name`), or there
// is no dot.
std::pair<std::string_view, bool> receiverOf(std::string_view text, size_t begin) {
  if (begin == 0 || text[begin - 1] != '.') return {{}, false};
  size_t end = begin - 1, start = end;
  while (start > 0 && isWordByte(static_cast<unsigned char>(text[start - 1]))) --start;
  return {text.substr(start, end - start), start == 0 || text[start - 1] != '.'};
}

}  // namespace

// The text's logical lines with their loops marked, and what is no code; `complete` false where the
// text leaves a doubt about them (then every question is answered false).
struct PythonCallSites::Read {
  bool complete = false;
  std::vector<LogicalLine> lines;
  std::vector<NotCode> notCode;
};

PythonCallSites::PythonCallSites(std::string_view text) : text_(text) {}
PythonCallSites::~PythonCallSites() = default;

bool onlyFewCallsOutsideLoops(std::string_view text, const std::vector<std::pair<size_t, size_t>>& spans, size_t maxCalls,
                              const ReceiverFilter& mayCount) {
  return PythonCallSites(text).onlyFewCallsOutsideLoops(spans, maxCalls, mayCount);
}

bool PythonCallSites::onlyFewCallsOutsideLoops(const std::vector<std::pair<size_t, size_t>>& spans, size_t maxCalls,
                                               const ReceiverFilter& mayCount) const {
  if (!read_) {
    Tokens tokens(text_);
    auto read = std::make_unique<Read>();
    read->complete = tokens.read();
    if (read->complete) {
      markLoops(tokens.lines);
      read->lines = std::move(tokens.lines);
      read->notCode = std::move(tokens.notCode);
    }
    read_ = std::move(read);
  }
  if (!read_->complete) return false;
  std::string_view text = text_;
  const std::vector<LogicalLine>& lines = read_->lines;
  const std::vector<NotCode>& notCode = read_->notCode;
  size_t calls = 0, lastCallEnd = std::string_view::npos;
  for (const auto& [begin, end] : spans) {
    auto in = std::upper_bound(notCode.begin(), notCode.end(), begin, [](size_t at, const NotCode& s) { return at < s.begin; });
    if (in != notCode.begin() && begin < std::prev(in)->end) {
      if (std::prev(in)->formatted) return false;
      continue;  // a comment or a string: no name of the code
    }
    auto at = std::upper_bound(lines.begin(), lines.end(), begin, [](size_t b, const LogicalLine& l) { return b < l.begin; });
    if (at == lines.begin() || begin >= std::prev(at)->end) return false;
    const LogicalLine& line = *std::prev(at);
    // A function or class of that name defined here (a test that calls a wrapper is one too): no call.
    if (std::string_view before = previousWord(text, begin); before == "def" || before == "class") continue;
    std::string_view next = nextToken(text, end);
    if (next == "(") {
      if (mayCount) {
        auto [receiver, whole] = receiverOf(text, begin);
        bool named = !receiver.empty() && !std::isdigit(static_cast<unsigned char>(receiver.front()));
        if (named && !mayCount(receiver, text.substr(begin, end - begin)) &&
            (!whole || boundAsItself(text, receiver, lines, notCode)))
          continue;  // a call on something no wrapper's module is named as
      }
      if (line.inLoop) return false;
      if (end != lastCallEnd) ++calls;  // one call, whichever of its words ends there
      lastCallEnd = end;
    } else if (next == "as" || assignedFrom(text, begin)) {
      return false;  // an alias (`import ... as`, `x = mod.name`): the name may be called as another
    }
    // Else a use that binds no other name to it (an import as itself, an argument, a base class, an
    // annotation): the frontend qualifies a call through an import's `as` and a plain assignment only.
  }
  return maxCalls == 0 || calls < maxCalls;
}

namespace {

size_t skipBlanksBack(std::string_view text, size_t at) {
  while (at > 0 && (text[at - 1] == ' ' || text[at - 1] == '\t')) --at;
  return at;
}

// Where the dotted name ending at `end` starts (`dist.new_group`, `torch.distributed.new_group`).
size_t dottedStart(std::string_view text, size_t end) {
  while (end > 0 && (isWordByte(static_cast<unsigned char>(text[end - 1])) || text[end - 1] == '.')) --end;
  return end;
}

// The last name of the assignment target whose `=` is at `equals` (`_orig` of `self._orig`,
// `_SAVED` of `_SAVED["k"]`, a keyword argument's name, a tuple's last target); empty when the
// target is no name (a call's result).
std::string_view assignedName(std::string_view text, size_t equals) {
  size_t at = skipBlanksBack(text, equals);
  if (at > 0 && text[at - 1] == ']') {  // a subscript: the name it is taken of
    int depth = 0;
    while (at > 0) {
      char c = text[--at];
      if (c == ']') ++depth;
      else if (c == '[' && --depth == 0) break;
      else if (c == '\n') return {};
    }
    if (depth != 0) return {};
    at = skipBlanksBack(text, at);
  }
  size_t begin = at;
  while (begin > 0 && isWordByte(static_cast<unsigned char>(text[begin - 1]))) --begin;
  if (begin == at || std::isdigit(static_cast<unsigned char>(text[begin]))) return {};
  return text.substr(begin, at - begin);
}

// Whether `=` at `at` assigns (`x = v`, `x := v`, a keyword argument), rather than compares.
bool assigns(std::string_view text, size_t at) {
  if (text[at] != '=') return false;
  char before = at > 0 ? text[at - 1] : ' ';
  return before != '=' && before != '!' && before != '<' && before != '>' && before != '+' && before != '-' &&
         before != '*' && before != '/' && before != '%' && before != '&' && before != '|' && before != '^';
}

}  // namespace

std::optional<std::vector<size_t>> savedCreatorMentions(std::string_view text, const std::vector<std::pair<size_t, size_t>>& words,
                                                        const std::set<std::string>& creators) {
  std::set<std::string_view> keepers;
  for (auto [at, end] : words) {
    if (at < text.size() && text[at] == '.') ++at;  // a word found as `.new_group`
    while (end < text.size() && isWordByte(static_cast<unsigned char>(text[end]))) ++end;  // as `new_subgroups*`
    if (at >= end || end > text.size() || (at > 0 && isWordByte(static_cast<unsigned char>(text[at - 1]))) ||
        !creators.contains(std::string(text.substr(at, end - at))))
      continue;  // part of a longer name, or no creator's
    size_t next = firstNonBlank(text, end);
    if (next < text.size() && (text[next] == '(' || (text[next] == '=' && text.compare(next, 2, "==") != 0)))
      continue;  // called, or assigned to
    size_t before = skipBlanksBack(text, dottedStart(text, at));
    if (before == 0) continue;
    if (text[before - 1] == ':') return std::nullopt;  // a dict entry's value (or an annotation): no keeper on the line
    if (text[before - 1] == '(') {  // an argument: `staticmethod(dist.new_group)`, kept where the call's result is
      size_t callee = dottedStart(text, before - 1);
      if (callee == before - 1) continue;
      before = skipBlanksBack(text, callee);
      if (before == 0) continue;
    }
    if (!assigns(text, before - 1)) continue;
    size_t equals = before - 1;
    if (equals > 0 && text[equals - 1] == ':') --equals;  // `x := v`
    std::string_view name = assignedName(text, equals);
    if (name.empty()) return std::nullopt;
    keepers.insert(name);
  }
  std::vector<size_t> ends;
  for (std::string_view name : keepers) {
    for (size_t at = text.find(name); at != std::string_view::npos; at = text.find(name, at + 1)) {
      size_t end = at + name.size();
      if ((at > 0 && isWordByte(static_cast<unsigned char>(text[at - 1]))) ||
          (end < text.size() && isWordByte(static_cast<unsigned char>(text[end]))))
        continue;
      ends.push_back(end);
    }
  }
  std::sort(ends.begin(), ends.end());
  return ends;
}

namespace {

// Where the bracket opened at `open` closes, counting the brackets between (strings are not read
// apart: a bracket in one only makes the span longer or shorter); npos when it does not.
size_t closingBracket(std::string_view text, size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    char c = text[i];
    if (c == '(' || c == '[' || c == '{') ++depth;
    else if ((c == ')' || c == ']' || c == '}') && --depth == 0) return i;
  }
  return std::string_view::npos;
}

// The names called bare in [begin, end) of `text`: `name(` with no dot before it.
void addBareCalls(std::string_view text, size_t begin, size_t end, std::set<std::string>& names) {
  for (size_t i = begin; i < end;) {
    if (!isWordByte(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t k = i;
    while (k < end && isWordByte(static_cast<unsigned char>(text[k]))) ++k;
    size_t next = firstNonBlank(text, k);
    size_t before = skipBlanksBack(text, i);
    bool bare = before == 0 || text[before - 1] != '.';
    if (bare && next < end && text[next] == '(' && !std::isdigit(static_cast<unsigned char>(text[i])))
      names.emplace(text.substr(i, k - i));
    i = k;
  }
}

// The spans inside the brackets that follow each whole-word `word` (`set_device(...)`), or, with
// `open` '{', each `word{...}`, the brace right after it.
void addCallsAfter(std::string_view text, std::string_view word, char open, std::set<std::string>& names) {
  for (size_t at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
    if (at > 0 && isWordByte(static_cast<unsigned char>(text[at - 1])) && isWordByte(static_cast<unsigned char>(word[0])))
      continue;  // part of a longer name
    size_t bracket = open == '(' ? firstNonBlank(text, at + word.size()) : at + word.size();
    if (bracket >= text.size() || text[bracket] != open) continue;
    size_t close = closingBracket(text, bracket);
    if (close != std::string_view::npos) addBareCalls(text, bracket + 1, close, names);
  }
}

}  // namespace

std::set<std::string> namesCalledInDeviceSelections(std::string_view text) {
  std::set<std::string> names;
  addCallsAfter(text, "set_device", '(', names);
  addCallsAfter(text, "torch.device", '(', names);
  addCallsAfter(text, "cuda:", '{', names);
  return names;
}

}  // namespace nccl_migrate::lint
