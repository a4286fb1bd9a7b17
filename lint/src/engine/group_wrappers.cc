// Wrapper inference by text (see group_wrappers.h). Each round is one pass over each source: every
// '(' is looked back from to the identifier before it, which is looked up in the round's names; a
// source with a hit gets one forward pass over its lines that tracks the enclosing `def`s. So a
// round costs a scan of the sources whatever the number of names, and nothing is quadratic.
#include "group_wrappers.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <thread>
#include <cctype>
#include <cstring>
#include <unordered_set>
#include <utility>

#include "rules/torch_names.h"

namespace nccl_migrate::lint {
namespace {

constexpr size_t kMaxCallBytes = 4096;  // a call's argument text looked at for backend=
constexpr int kMaxRounds = 8;           // wrappers of wrappers of ...

// A table, not std::isalnum: this runs for every '(' of every Python file of the run.
constexpr auto kIdentifierBytes = [] {
  std::array<bool, 256> table{};
  for (int c = 0; c < 256; ++c) table[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  return table;
}();

bool isIdentifierByte(char c) { return kIdentifierBytes[static_cast<unsigned char>(c)]; }

size_t lineStart(std::string_view text, size_t at) {
  size_t nl = text.rfind('\n', at == 0 ? 0 : at - 1);
  return at == 0 || nl == std::string_view::npos ? 0 : nl + 1;
}

size_t indentation(std::string_view line) {
  size_t n = 0;
  while (n < line.size() && (line[n] == ' ' || line[n] == '\t')) ++n;
  return n;
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

// `def name(` (or `async def`) at the start of a stripped line: the name, else empty.
std::string_view definedName(std::string_view code) {
  if (code.starts_with("async ")) code.remove_prefix(6);
  if (!code.starts_with("def ")) return {};
  code.remove_prefix(4);
  size_t end = 0;
  while (end < code.size() && isIdentifierByte(code[end])) ++end;
  return code.substr(0, end);
}

// Offsets of the calls of `names` that create an eager NCCL group, outside comments and outside
// their own `def` lines.
std::vector<size_t> callsOf(std::string_view source, const std::unordered_set<std::string_view>& names) {
  std::vector<size_t> hits;
  if (source.empty()) return hits;  // a view of nothing may have no data at all, which memchr may not see
  for (const char* p = static_cast<const char*>(std::memchr(source.data(), '(', source.size())); p;
       p = static_cast<const char*>(std::memchr(p + 1, '(', source.data() + source.size() - p - 1))) {
    size_t open = static_cast<size_t>(p - source.data());
    size_t end = open;
    while (end > 0 && (source[end - 1] == ' ' || source[end - 1] == '\t')) --end;
    size_t begin = end;
    while (begin > 0 && isIdentifierByte(source[begin - 1])) --begin;
    if (begin == end || !names.contains(source.substr(begin, end - begin))) continue;
    size_t start = lineStart(source, begin);
    std::string_view before = source.substr(start, begin - start);
    if (before.find('#') != std::string_view::npos) continue;  // a comment (or a '#' in a string: rare)
    std::string_view head = before.substr(indentation(before));
    if (head == "def " || head == "async def ") continue;  // its own definition
    if (namesOtherBackend(callArguments(source, open))) continue;
    hits.push_back(begin);
    if (p + 1 >= source.data() + source.size()) break;
  }
  return hits;
}

// The function around each hit (sorted offsets), by one pass over the lines with the stack of
// enclosing `def`s; module-level hits have none.
std::set<std::string> enclosingFunctions(std::string_view source, const std::vector<size_t>& hits) {
  std::set<std::string> out;
  std::vector<std::pair<size_t, std::string_view>> defs;  // (indentation, name), innermost last
  size_t next = 0;
  for (size_t start = 0; start < source.size() && next < hits.size();) {
    size_t end = source.find('\n', start);
    if (end == std::string_view::npos) end = source.size();
    std::string_view line = source.substr(start, end - start);
    size_t indent = indentation(line);
    std::string_view code = line.substr(indent);
    if (!code.empty() && code.front() != '#') {
      while (!defs.empty() && defs.back().first >= indent) defs.pop_back();
      for (; next < hits.size() && hits[next] < end; ++next) {
        if (!defs.empty()) out.insert(std::string(defs.back().second));
      }
      if (std::string_view name = definedName(code); !name.empty()) defs.emplace_back(indent, name);
    }
    start = end + 1;
  }
  return out;
}

// Names whose calls cannot be told from other functions' by name alone: a class's __init__ is
// called as the class, dunders run implicitly, and generic names (a `setup()` that creates groups
// once) are called in loops as other objects' methods.
bool isTrackable(const std::string& name) {
  static const std::unordered_set<std::string_view> kGeneric = {
      "main", "run", "setup", "init", "initialize", "build", "start", "forward", "wrapper", "inner",
      "decorator", "fn", "func", "f", "g", "helper", "worker", "apply", "call", "execute", "_run", "_setup"};
  return !(name.starts_with("__") && name.ends_with("__")) && !kGeneric.contains(name);
}

}  // namespace

std::set<std::string> functionsCalling(std::string_view source, const std::set<std::string>& creators) {
  std::unordered_set<std::string_view> names(creators.begin(), creators.end());
  std::vector<size_t> hits = callsOf(source, names);
  if (hits.empty()) return {};
  std::set<std::string> found = enclosingFunctions(source, hits);
  std::erase_if(found, [](const std::string& name) { return !isTrackable(name); });
  return found;
}

std::set<std::string> inferGroupWrappers(const std::vector<std::string_view>& texts, unsigned threads) {
  const std::set<std::string> creators = {"new_group", "split_group", "new_subgroups", "new_subgroups_by_enumeration"};
  std::set<std::string> wrappers;
  std::set<std::string> searching = creators;
  for (int round = 0; round < kMaxRounds && !searching.empty(); ++round) {
    std::unordered_set<std::string_view> names(searching.begin(), searching.end());
    std::vector<std::set<std::string>> found(texts.size());
    std::atomic<size_t> next{0};
    auto scan = [&] {
      for (size_t i = next++; i < texts.size(); i = next++) {
        std::vector<size_t> hits = callsOf(texts[i], names);
        if (!hits.empty()) found[i] = enclosingFunctions(texts[i], hits);
      }
    };
    std::vector<std::thread> workers;
    for (unsigned t = 1; t < std::min<size_t>(threads, texts.size()); ++t) workers.emplace_back(scan);
    scan();
    for (std::thread& w : workers) w.join();
    std::set<std::string> fresh;
    for (const std::set<std::string>& names : found) {
      for (const std::string& name : names) {
        if (isTrackable(name) && !creators.contains(name) && wrappers.insert(name).second) fresh.insert(name);
      }
    }
    searching = std::move(fresh);
  }
  return wrappers;
}

}  // namespace nccl_migrate::lint
