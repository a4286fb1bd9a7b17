// Byte ranges of settings in line-oriented files, for the fixes that remove them.
#include "settings/setting_ranges.h"

#include <array>
#include <cctype>

namespace nccl_migrate::lint {
namespace {

bool blank(char c) { return c == ' ' || c == '\t'; }

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (blank(s.front()) || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (blank(s.back()) || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Commands after which an assignment word is the whole statement.
bool setsOnly(std::string_view before) {
  constexpr std::array<std::string_view, 7> kPrefixes = {"export", "ENV", "env", "ARG", "local", "readonly", "declare -x"};
  for (std::string_view p : kPrefixes)
    if (before == p) return true;
  return before.empty();
}

// A word after which a command begins: a shell keyword or operator, a command that runs the rest
// of its line as a command (`env`, `sudo`, `exec`), or a Dockerfile instruction of the shell form.
bool beginsACommand(std::string_view word) {
  constexpr std::array<std::string_view, 24> kWords = {
      "then", "do", "else", "elif", "if", "while", "until", "!", "{", "(", "&&", "||", "|", ";",
      "time", "exec", "sudo", "env", "nohup", "command", "RUN", "CMD", "ENTRYPOINT", "SHELL"};
  for (std::string_view w : kWords)
    if (word == w) return true;
  return word.ends_with(";") || word.ends_with("&&") || word.ends_with("||") || word.ends_with("|");
}

// Whether an assignment is a prefix of a command rather than a word of one: every word before it
// is an assignment, back to the start of the line, a word after which a command begins, or a
// command that only sets (`export`, `ENV`, `declare -x`). Not `echo now X=0`, `deepspeed train.py
// X=0` (an argument), nor `docker run -e X=0 image` (removing the word would leave `-e` to take
// the image as its value).
bool assignmentsOnly(std::string_view before) {
  before = trimmed(before);
  while (!before.empty()) {
    size_t start = before.find_last_of(" \t");
    start = start == std::string_view::npos ? 0 : start + 1;
    std::string_view word = before.substr(start);
    size_t eq = word.find('=');
    bool assignment = eq != std::string_view::npos && eq > 0 &&
                      (std::isalpha(static_cast<unsigned char>(word[0])) || word[0] == '_');
    if (!assignment) return beginsACommand(word) || setsOnly(before);
    before = trimmed(before.substr(0, start));
  }
  return true;
}

// A word that can start the rest of a command line: another assignment, the command, a path.
bool startsWord(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '/' || c == '.' || c == '$' || c == '"' ||
         c == '\'' || c == '-';
}

}  // namespace

LineSpans::LineSpans(std::string_view text) : text_(text) {
  starts_.push_back(0);
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') starts_.push_back(i + 1);
}

Range LineSpans::withNewline(size_t index) const {
  size_t end = index + 1 < starts_.size() ? starts_[index + 1] : text_.size();
  return {starts_[index], end};
}

bool LineSpans::continued(size_t index) const {
  auto endsWithBackslash = [&](size_t i) {
    Range r = withNewline(i);
    std::string_view line = trimmed(text_.substr(r.begin, r.end - r.begin));
    while (!line.empty() && line.back() == '\n') line = trimmed(line.substr(0, line.size() - 1));
    return !line.empty() && line.back() == '\\';
  };
  return endsWithBackslash(index) || (index > 0 && endsWithBackslash(index - 1));
}

Range unquotedRange(std::string_view text, size_t begin, size_t end) {
  while (end > begin && (blank(text[end - 1]) || text[end - 1] == ',' || text[end - 1] == '\r')) --end;
  while (begin < end && blank(text[begin])) ++begin;
  if (end - begin >= 2 && (text[begin] == '"' || text[begin] == '\'') && text[end - 1] == text[begin]) {
    ++begin;
    --end;
  }
  return {begin, end};
}

Range assignmentStatement(std::string_view code, size_t codeStart, Range word, Range line, bool continued) {
  if (continued || word.begin < codeStart || word.end > codeStart + code.size()) return {};
  std::string_view before = code.substr(0, word.begin - codeStart);
  std::string_view after = code.substr(word.end - codeStart);
  if (trimmed(after).empty() && setsOnly(trimmed(before))) return line;
  size_t blanksAfter = 0;
  while (blanksAfter < after.size() && blank(after[blanksAfter])) ++blanksAfter;
  if (blanksAfter > 0 && blanksAfter < after.size() && startsWord(after[blanksAfter]) && assignmentsOnly(before)) {
    return {word.begin, word.end + blanksAfter};  // `X=0 torchrun`: the command stays
  }
  size_t keptEnd = before.find_last_not_of(" \t");
  if (trimmed(after).empty() && keptEnd != std::string_view::npos && keptEnd + 1 < before.size() &&
      trimmed(before).find('=') != std::string_view::npos && assignmentsOnly(before)) {
    return {codeStart + keptEnd + 1, word.end};  // `ENV A=1 X=0`: A=1 stays
  }
  return {};
}

bool onlyCommandOfShellBlock(const std::vector<std::string>& lines, size_t index) {
  auto code = [&](size_t i) {
    std::string_view line = lines[i];
    size_t hash = line.find(" #");
    if (!line.empty() && trimmed(line).starts_with("#")) return std::string_view();
    return trimmed(hash == std::string_view::npos ? line : line.substr(0, hash));
  };
  auto opens = [](std::string_view c) {
    for (std::string_view end : {"then", "do", "else", "{", "("})
      if (c == end || (c.ends_with(end) && c.size() > end.size() && !std::isalnum(static_cast<unsigned char>(c[c.size() - end.size() - 1])) &&
                       c[c.size() - end.size() - 1] != '_'))
        return true;
    return false;
  };
  auto closes = [](std::string_view c) {
    for (std::string_view start : {"fi", "done", "else", "elif", "}", ")", ";;", "esac"})
      if (c.starts_with(start) && (c.size() == start.size() || !std::isalnum(static_cast<unsigned char>(c[start.size()]))))
        return true;
    return false;
  };
  size_t before = index;
  while (before > 0 && code(before - 1).empty()) --before;
  size_t after = index + 1;
  while (after < lines.size() && code(after).empty()) ++after;
  return before > 0 && after < lines.size() && opens(code(before - 1)) && closes(code(after));
}

}  // namespace nccl_migrate::lint
