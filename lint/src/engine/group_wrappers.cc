// Wrapper inference by text (see group_wrappers.h). A call is `name(` not continuing an identifier;
// its function is the nearest `def` above it with less indentation. Every scan is bounded, so no
// file can make it quadratic.
#include "group_wrappers.h"

#include <algorithm>
#include <cctype>

#include "rules/torch_names.h"

namespace nccl_migrate::lint {
namespace {

constexpr size_t kMaxCallBytes = 4096;    // a call's argument text looked at for backend=
constexpr size_t kMaxLinesUp = 4000;      // lines looked at above a call for its `def`
constexpr int kMaxRounds = 8;             // wrappers of wrappers of ...

bool isIdentifierByte(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

size_t lineStart(std::string_view text, size_t at) {
  size_t nl = text.rfind('\n', at == 0 ? 0 : at - 1);
  return at == 0 || nl == std::string_view::npos ? 0 : nl + 1;
}

size_t indentation(std::string_view line) {
  size_t n = 0;
  while (n < line.size() && (line[n] == ' ' || line[n] == '\t')) ++n;
  return n;
}

// The name of the function whose body holds the line starting at `start`, or "".
std::string enclosingFunction(std::string_view text, size_t start) {
  size_t limit = indentation(text.substr(start, text.find('\n', start) - start));
  size_t lines = 0;
  while (start > 0 && limit > 0 && lines++ < kMaxLinesUp) {
    size_t prev = lineStart(text, start - 1);
    std::string_view line = text.substr(prev, start - 1 - prev);
    start = prev;
    size_t indent = indentation(line);
    std::string_view code = line.substr(indent);
    if (code.empty() || code.front() == '#' || indent >= limit) continue;
    limit = indent;
    if (code.starts_with("async ")) code.remove_prefix(6);
    if (!code.starts_with("def ")) continue;  // a class, if, with, ...: keep looking outward
    code.remove_prefix(4);
    size_t end = 0;
    while (end < code.size() && isIdentifierByte(code[end])) ++end;
    return std::string(code.substr(0, end));
  }
  return "";
}

// The argument text of the call whose '(' is at `open`, up to its ')' or the bound.
std::string_view callArguments(std::string_view text, size_t open) {
  int depth = 0;
  size_t end = std::min(text.size(), open + kMaxCallBytes);
  for (size_t i = open; i < end; ++i) {
    if (text[i] == '(') ++depth;
    else if (text[i] == ')' && --depth == 0) return text.substr(open + 1, i - open - 1);
  }
  return text.substr(open + 1, end - open - 1);
}

// `backend="..."` naming no eager NCCL backend ("gloo", "nccl-lazy"); a computed backend counts
// as NCCL, as in NM401.
bool namesOtherBackend(std::string_view arguments) {
  size_t at = arguments.find("backend");
  if (at == std::string_view::npos) return false;
  size_t eq = arguments.find_first_not_of(" \t", at + 7);
  if (eq == std::string_view::npos || arguments[eq] != '=') return false;
  size_t quote = arguments.find_first_not_of(" \t", eq + 1);
  if (quote == std::string_view::npos || (arguments[quote] != '"' && arguments[quote] != '\'')) return false;
  size_t close = arguments.find(arguments[quote], quote + 1);
  if (close == std::string_view::npos) return false;
  return !selectsEagerNccl(std::string(arguments.substr(quote + 1, close - quote - 1)));
}

}  // namespace

std::set<std::string> functionsCalling(std::string_view source, const std::set<std::string>& creators) {
  std::set<std::string> found;
  for (const std::string& creator : creators) {
    for (size_t at = source.find(creator); at != std::string_view::npos; at = source.find(creator, at + 1)) {
      size_t open = at + creator.size();
      if (at > 0 && isIdentifierByte(source[at - 1])) continue;
      if (open >= source.size() || source[open] != '(') continue;
      size_t start = lineStart(source, at);
      std::string_view before = source.substr(start, at - start);
      if (before.find('#') != std::string_view::npos) continue;  // a comment (or a '#' in a string: rare)
      std::string_view head = before.substr(indentation(before));
      if (head.starts_with("def ") || head.starts_with("async def ")) continue;  // its own definition
      if (namesOtherBackend(callArguments(source, open))) continue;
      std::string function = enclosingFunction(source, start);
      if (!function.empty()) found.insert(function);
    }
  }
  return found;
}

std::set<std::string> inferGroupWrappers(const std::vector<std::string>& texts) {
  std::set<std::string> creators = {"new_group", "split_group", "new_subgroups", "new_subgroups_by_enumeration"};
  std::set<std::string> wrappers;
  std::set<std::string> searching = creators;
  for (int round = 0; round < kMaxRounds && !searching.empty(); ++round) {
    std::set<std::string> next;
    for (const std::string& text : texts) {
      for (const std::string& name : functionsCalling(text, searching)) {
        if (!creators.contains(name) && wrappers.insert(name).second) next.insert(name);
      }
    }
    searching = std::move(next);
  }
  return wrappers;
}

}  // namespace nccl_migrate::lint
