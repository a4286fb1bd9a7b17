// Wrapper inference (see group_wrappers.h). One pass over each source notes the names it calls (the
// identifier before each '('). Each round then asks every source, without reading it again,
// whether it calls a name the round seeks (torch's creators first, then the wrappers the round
// before found; a method's name only in its own module); a source that does is scanned for those
// calls, and the statement around each, narrowed to the innermost statement of its function, class
// or compound statement, is parsed with the headers above it and the source's imports (those bound
// from their text where written plainly: bindPlainImports). No part of a source is parsed twice;
// the fixed point is taken over everything read so far.
#include "python/group_wrappers.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "python/python_environment.h"
#include "python/python_text.h"
#include "python/python_frontend.h"
#include "python/python_project.h"
#include "python/python_scopes.h"
#include "rules/torch_names.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace nccl_migrate::lint {
namespace {

constexpr int kMaxRounds = 4;  // wrappers of wrappers of ...

// FNV-1a: inline and cheap for the short identifiers hashed for every '(' of the run.
uint32_t hashName(std::string_view name) {
  uint32_t h = 2166136261u;
  for (unsigned char c : name) h = (h ^ c) * 16777619u;
  return h;
}

// Calls `visit` with the offset of each '(' of `source`, sixteen bytes at a time: a '(' comes every
// few dozen bytes of Python, too often for a memchr call per '('.
template <class Visit>
void forEachOpenParen(std::string_view source, Visit&& visit) {
  const char* data = source.data();
  size_t size = source.size(), at = 0;
#if defined(__SSE2__)
  const __m128i paren = _mm_set1_epi8('(');
  for (; at + 16 <= size; at += 16) {
    auto mask = static_cast<uint32_t>(_mm_movemask_epi8(
        _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + at)), paren)));
    for (; mask; mask &= mask - 1) visit(at + static_cast<size_t>(__builtin_ctz(mask)));
  }
#endif
  for (; at < size; ++at)
    if (data[at] == '(') visit(at);
}

// The names a source calls (the identifier before each '('), as a Bloom filter of their hashes:
// read in one pass, so that later rounds ask a source about their names without scanning it
// again. A false hit only has the source scanned for the names (callsOf), which finds none.
struct CalledNames {
  static constexpr uint32_t kBits = 4096;
  std::array<uint64_t, kBits / 64> bits{};
  void add(uint32_t h) {
    for (uint32_t bit : {h % kBits, (h >> 12) % kBits}) bits[bit / 64] |= uint64_t{1} << (bit % 64);
  }
  bool mayHold(uint32_t h) const {
    for (uint32_t bit : {h % kBits, (h >> 12) % kBits})
      if (!(bits[bit / 64] & (uint64_t{1} << (bit % 64)))) return false;
    return true;
  }
};

// The identifier just before the '(' at `open` (blanks between allowed): where it begins, and its
// text (empty when there is none: `(`, `)(`, `"x"(`).
std::pair<size_t, std::string_view> calleeBefore(std::string_view source, size_t open) {
  size_t stop = open;
  while (stop > 0 && (source[stop - 1] == ' ' || source[stop - 1] == '\t')) --stop;
  size_t begin = stop;
  while (begin > 0 && isIdentifierByte(source[begin - 1])) --begin;
  return {begin, source.substr(begin, stop - begin)};
}

// A class header with bases, `class Name(Base, metaclass=M):`: the name and the bases as written
// (keywords left out).
struct ClassHeader {
  std::string name;
  std::vector<std::string> bases;
};

std::string_view trimmed(std::string_view s);

// The bases of the class header whose '(' is at `open`, up to the first ')' (a base that is a call
// is no class of the tree's).
std::vector<std::string> basesAt(std::string_view source, size_t open) {
  std::vector<std::string> bases;
  size_t close = source.find(')', open);
  if (close == std::string_view::npos) return bases;
  std::string_view list = source.substr(open + 1, close - open - 1);
  for (size_t b = 0; b <= list.size();) {
    size_t e = std::min(list.find(',', b), list.size());
    std::string_view base = trimmed(list.substr(b, e - b));
    if (!base.empty() && base.find('=') == std::string_view::npos) bases.emplace_back(base);
    b = e + 1;
  }
  return bases;
}

// The names a source calls, and its class headers with bases, which stand before a '(' too: read
// in the same pass, for what NM502's table asks of the tree's classes.
CalledNames calledNames(std::string_view source, std::vector<ClassHeader>& headers) {
  static constexpr std::string_view kClass = "class ";
  CalledNames names;
  forEachOpenParen(source, [&](size_t open) {
    auto [begin, name] = calleeBefore(source, open);
    if (name.empty()) return;
    names.add(hashName(name));
    if (begin >= kClass.size() && source.substr(begin - kClass.size(), kClass.size()) == kClass &&
        (begin == kClass.size() || source[begin - kClass.size() - 1] == '\n' || source[begin - kClass.size() - 1] == ' '))
      headers.push_back({std::string(name), basesAt(source, open)});
  });
  return names;
}

// Offsets of what looks like a call of one of `names` outside a comment and a docstring's example:
// where the statements worth parsing are.
std::vector<size_t> callsOf(std::string_view source, const std::unordered_set<std::string_view>& names) {
  std::vector<size_t> hits;
  forEachOpenParen(source, [&](size_t open) {
    auto [begin, name] = calleeBefore(source, open);
    if (name.empty() || !names.contains(name)) return;
    size_t start = lineStart(source, begin);
    std::string_view before = source.substr(start, begin - start);
    if (before.find('#') != std::string_view::npos) return;  // a comment (or a '#' in a string: rare)
    before.remove_prefix(std::min(firstNonBlank(before), before.size()));
    if (before.starts_with(">>>") || before.starts_with("...")) return;  // a docstring's example
    hits.push_back(begin);
  });
  return hits;
}

bool callsAny(const CalledNames& called, const std::vector<uint32_t>& sought) {
  return std::any_of(sought.begin(), sought.end(), [&](uint32_t h) { return called.mayHold(h); });
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

// A call of one of torch's group creators (by their last name, unless the call resolves to
// another of torch's functions) or of a wrapper of `wrappers`, naming no backend without eager NCCL
// communicators.
bool createsGroups(const CallInFunction& call, const std::string& caller, const std::set<std::string>& creators,
                   const GroupWrapperIndex& wrappers) {
  if (call.backend && !selectsEagerNccl(*call.backend)) return false;
  if (creators.contains(call.name)) {
    if (!call.qualifiedName.starts_with("torch.")) return true;
    if (std::any_of(creators.begin(), creators.end(), [&](const std::string& c) { return isDistributed(call.qualifiedName, c); }))
      return true;
  }
  return wrappers.reaches(call, caller);
}

// What has been read of one source so far.
struct SourceReading {
  std::optional<PythonScopes> scopes;  // made on its first parse
  bool importsRead = false;  // its leading imports, parsed with its first statements, bind in `names`
  PythonNames names;
  std::vector<FunctionCalls> functions;
  ModuleFacts module;
};

// Parses the statements of `text` around `hits` not read yet, with the imports the first time.
void readAround(std::string_view text, const std::vector<size_t>& hits, SourceReading& reading) {
  if (!reading.scopes) reading.scopes.emplace(text);
  std::vector<ParseRegion> regions = reading.scopes->unreadAround(hits);
  if (regions.empty()) return;
  if (!reading.importsRead) {
    reading.importsRead = true;
    // The walk binds the imports before the statements below them: bound from their text first
    // when every statement read now stands below them and they are written plainly (a parse
    // spared), else parsed with the rest, in the source's order.
    std::vector<ParseRegion> imports = leadingImports(text);
    bool below = imports.empty() || regions.front().begin >= imports.back().end;
    if (!below || !bindPlainImports(text, imports, reading.names)) {
      regions.insert(regions.end(), imports.begin(), imports.end());
      regions = mergeRegions(std::move(regions));
    }
  }
  std::vector<FunctionCalls> read = pythonFunctionCalls(text, regions, reading.names, reading.module);
  std::move(read.begin(), read.end(), std::back_inserter(reading.functions));
}

// The names sought in a round, each with the part of its keys before the colon ("*" for torch's
// creators, which any source may call).
using Sought = std::map<std::string, std::vector<std::string>, std::less<>>;

// Whether the call at `hit` in a source of module `caller` may reach a wrapper of `scope`, by the
// text alone: a method only through self or cls in its own module, a nested function by its bare
// name in its own module, a module's function in its own module or in a source that names the
// module (as its import does). Keeps the parse to the statements that may matter.
// `mentions` answers whether the text holds a word, once per word and source: a source may hold
// thousands of hits of names sought under as many modules.
template <class Mentions>
bool mayReach(std::string_view text, size_t hit, const std::string& scope, const std::string& caller, Mentions&& mentions) {
  if (scope == "*") return true;
  size_t hash = scope.find('#');
  std::string_view module = std::string_view(scope).substr(0, hash);  // into `scope`, which outlives `mentions`
  std::string_view kind = hash == std::string::npos ? std::string_view() : std::string_view(scope).substr(hash + 1);
  bool same = module.empty() || caller.empty() || module == caller;
  bool attribute = hit > 0 && text[hit - 1] == '.';
  if (kind == "self") {
    size_t begin = hit - (attribute ? 1 : 0);
    while (begin > 0 && isIdentifierByte(text[begin - 1])) --begin;
    std::string_view receiver = attribute ? text.substr(begin, hit - 1 - begin) : std::string_view();
    return same && (receiver == "self" || receiver == "cls");
  }
  if (kind == "local") return same && !attribute;
  if (kind.starts_with("class=")) {
    // A method called on an object: in a file that names the class or its module.
    if (!attribute) return false;
    std::string_view last = module.substr(module.rfind('.') + 1);
    return same || mentions(last) || mentions(kind.substr(6));
  }
  if (same) return true;
  std::string_view last = module.substr(module.rfind('.') + 1);
  if (mentions(last)) return true;
  // The package above the module, whose __init__.py may re-export the name (`from pkg import X`),
  // as GroupWrapperIndex matches it.
  size_t dot = module.rfind('.');
  if (dot == std::string_view::npos) return false;
  std::string_view package = module.substr(0, dot);
  return mentions(package.substr(package.rfind('.') + 1));
}

// The hits of `sought` that may reach one of its wrappers.
std::vector<size_t> reachingHits(std::string_view text, std::vector<size_t> hits, const Sought& sought, const std::string& caller,
                                 const std::map<std::string, std::string, std::less<>>& aliases) {
  std::unordered_map<std::string_view, bool> mentioned;
  auto mentions = [&](std::string_view word) {
    auto [it, added] = mentioned.try_emplace(word, false);
    if (added) it->second = text.find(word) != std::string_view::npos;
    return it->second;
  };
  std::erase_if(hits, [&](size_t hit) {
    size_t end = hit;
    while (end < text.size() && isIdentifierByte(text[end])) ++end;
    std::string_view name = text.substr(hit, end - hit);
    if (auto alias = aliases.find(name); alias != aliases.end()) name = alias->second;
    auto it = sought.find(name);
    if (it == sought.end()) return true;
    for (const std::string& scope : it->second)
      if (mayReach(text, hit, scope, caller, mentions)) return false;
    return true;
  });
  return hits;
}

// An import as written: `from module import name as alias`, or `import module as alias` (name
// empty; alias empty when there is none).
struct ImportedName {
  std::string module;
  std::string name;
  std::string alias;
  std::string bound() const { return !alias.empty() ? alias : !name.empty() ? name : module.substr(0, module.find('.')); }
};

std::string_view trimmed(std::string_view s) {
  size_t a = firstNotAny(s, " \t\r\n");
  if (a == std::string_view::npos) return {};
  size_t b = lastNotAny(s, " \t\r\n,");
  return s.substr(a, b - a + 1);
}

// `a as b` -> (a, b).
std::pair<std::string, std::string> splitAlias(std::string_view item) {
  item = trimmed(item);
  size_t as = item.find(" as ");
  if (as == std::string_view::npos) return {std::string(item), ""};
  return {std::string(trimmed(item.substr(0, as))), std::string(trimmed(item.substr(as + 4)))};
}

// The starts of the lines that begin, after blanks, with `from ` or `import `, in order: line by
// line, one look at each line's first word (a search for the two words stops at every `from` and
// `import` in the text, and at each byte equal to their first ones).
std::vector<size_t> importLineStarts(std::string_view text) {
  std::vector<size_t> starts;
  for (size_t line = 0; line < text.size();) {
    size_t at = firstNonBlank(text, line);
    if (at == std::string_view::npos) break;
    char first = text[at];  // most lines fail here, before any comparison of words
    if ((first == 'f' && text.compare(at, 5, "from ") == 0) || (first == 'i' && text.compare(at, 7, "import ") == 0))
      starts.push_back(line);
    size_t newline = text.find('\n', at);
    if (newline == std::string_view::npos) break;
    line = newline + 1;
  }
  return starts;
}

// The imports of a source, at any indentation (a function's body imports too), by lines: a
// statement in brackets or continued with a backslash is joined first.
std::vector<ImportedName> importsOf(std::string_view text) {
  std::vector<ImportedName> out;
  size_t line = 0;  // where the next statement may start: the lines above are read
  for (size_t start : importLineStarts(text)) {
    if (start < line) continue;  // a line of the statement above, joined to it
    size_t next = text.find('\n', start);
    next = next == std::string_view::npos ? text.size() : next + 1;
    size_t at = start;
    while (at < next && (text[at] == ' ' || text[at] == '\t')) ++at;
    std::string_view rest = text.substr(at, next - at);
    bool from = rest.starts_with("from "), plain = rest.starts_with("import ");
    std::string statement(rest);
    bool open = statement.find('(') != std::string::npos && statement.find(')') == std::string::npos;
    while ((open || trimmed(statement).ends_with("\\")) && next < text.size()) {
      size_t more = text.find('\n', next);
      more = more == std::string_view::npos ? text.size() : more + 1;
      std::string_view piece = text.substr(next, more - next);
      if (open && piece.find(')') != std::string_view::npos) open = false;
      statement += piece;
      next = more;
    }
    line = next;
    if (size_t hash = statement.find('#'); hash != std::string::npos && statement.find('(') == std::string::npos) statement.resize(hash);
    for (char& c : statement)
      if (c == '(' || c == ')' || c == '\\' || c == '\n' || c == '\r') c = ' ';
    if (size_t semi = statement.find(';'); semi != std::string::npos) statement.resize(semi);
    std::string_view body = statement;
    if (from) {
      size_t imp = body.find(" import ");
      if (imp == std::string_view::npos) continue;
      std::string module(trimmed(body.substr(5, imp - 5)));
      std::string_view names = body.substr(imp + 8);
      for (size_t b = 0; b <= names.size();) {
        size_t e = names.find(',', b);
        if (e == std::string_view::npos) e = names.size();
        auto [name, alias] = splitAlias(names.substr(b, e - b));
        if (!name.empty() && name != "*") out.push_back({module, name, alias});
        b = e + 1;
      }
    } else {
      std::string_view names = body.substr(7);
      for (size_t b = 0; b <= names.size();) {
        size_t e = names.find(',', b);
        if (e == std::string_view::npos) e = names.size();
        auto [module, alias] = splitAlias(names.substr(b, e - b));
        if (!module.empty()) out.push_back({module, "", alias});
        b = e + 1;
      }
    }
  }
  return out;
}

// Calls made through an import in `text`: `bound(` (of a name imported from a module) and
// `bound.a.b(`, each with the dotted name it calls as the import resolves it ("numpy.linalg.norm"
// of `np.linalg.norm(` after `import numpy as np`) and the offset where it starts.
template <class Visit>
void forEachCallThrough(std::string_view text, const ImportedName& imported, Visit&& visit) {
  std::string bound = imported.bound();
  std::string base = !imported.name.empty()    ? imported.module + "." + imported.name
                     : !imported.alias.empty() ? imported.module
                                               : bound;  // `import a.b` binds `a`: `a.b.f(` is a.b.f
  for (size_t at = text.find(bound); at != std::string_view::npos; at = text.find(bound, at + 1)) {
    if (at > 0 && (isIdentifierByte(text[at - 1]) || text[at - 1] == '.')) continue;
    size_t end = at + bound.size();
    if (end < text.size() && isIdentifierByte(text[end])) continue;
    size_t chain = end;
    while (chain < text.size() && text[chain] == '.') {
      size_t e = chain + 1;
      while (e < text.size() && isIdentifierByte(text[e])) ++e;
      if (e == chain + 1) break;
      chain = e;
    }
    size_t open = chain;
    while (open < text.size() && (text[open] == ' ' || text[open] == '\t')) ++open;
    if (open == text.size() || text[open] != '(' || (chain == end && imported.name.empty())) continue;
    visit(base + std::string(text.substr(end, chain - end)), at);
  }
}

// Whether the word `word` stands alone in `line`.
bool hasWord(std::string_view line, std::string_view word) {
  for (size_t at = line.find(word); at != std::string_view::npos; at = line.find(word, at + 1)) {
    size_t end = at + word.size();
    if ((at == 0 || !isIdentifierByte(line[at - 1])) && (end == line.size() || !isIdentifierByte(line[end]))) return true;
  }
  return false;
}

// Whether the call at `at` looks, by the text alone, as if it ran in a loop: a `for` on its line
// (a comprehension), or a `for` or `while` header above it before the def or class it is in. Only
// a shortcut: a call it wrongly takes for a loop's has a module read for nothing, and one it misses
// is still found by the inference that follows (modulesNeeded).
bool looksInLoop(std::string_view text, size_t at) {
  size_t start = lineStart(text, at);
  size_t end = text.find('\n', at);
  std::string_view line = text.substr(start, (end == std::string_view::npos ? text.size() : end) - start);
  if (hasWord(line, "for")) return true;
  size_t indent = firstNonBlank(line);
  while (start > 0 && indent != std::string_view::npos && indent > 0) {
    size_t previous = lineStart(text, start - 1);
    std::string_view above = text.substr(previous, start - 1 - previous);
    start = previous;
    size_t i = firstNonBlank(above);
    if (i == std::string_view::npos || i >= indent || above[i] == '#') continue;
    std::string_view header = above.substr(i);
    if (header.starts_with("for ") || header.starts_with("while ") || header.starts_with("async for ")) return true;
    if (header.starts_with("def ") || header.starts_with("async def ") || header.starts_with("class ")) return false;
    indent = i;
  }
  return false;
}

// memmem, which skips ahead by the word's length where std::string_view::find stops at each byte
// equal to the word's first (the `s` of `self.`, the `c` of `class `), every few bytes of Python.
size_t findFrom(std::string_view text, std::string_view word, size_t from) {
  // Also keeps an empty text's data(), which may be null, away from memmem.
  if (from > text.size() || text.size() - from < word.size() || word.empty()) return std::string_view::npos;
  const void* at = ::memmem(text.data() + from, text.size() - from, word.data(), word.size());
  return at ? static_cast<size_t>(static_cast<const char*>(at) - text.data()) : std::string_view::npos;
}

// Where `word` (a name or a dotted name) stands whole in the text: not part of a longer name, nor
// an attribute of another object.
template <class Visit>
void forEachWhole(std::string_view text, std::string_view word, Visit&& visit) {
  for (size_t at = findFrom(text, word, 0); at != std::string_view::npos; at = findFrom(text, word, at + 1)) {
    size_t end = at + word.size();
    if (at > 0 && (isIdentifierByte(text[at - 1]) || text[at - 1] == '.')) continue;
    if (end < text.size() && isIdentifierByte(text[end])) continue;
    visit(at, end);
  }
}

size_t skipBlanks(std::string_view text, size_t at) {
  while (at < text.size() && (text[at] == ' ' || text[at] == '\t')) ++at;
  return at;
}

// The offsets of the assignments to `target` (`self.backend = ...`, `backend = ...`).
std::vector<size_t> assignmentsTo(std::string_view text, std::string_view target) {
  std::vector<size_t> out;
  forEachWhole(text, target, [&](size_t at, size_t end) {
    size_t next = skipBlanks(text, end);
    if (next < text.size() && text[next] == '=' && (next + 1 == text.size() || text[next + 1] != '=')) out.push_back(at);
  });
  return out;
}

// The offsets where `self.method` is named without being called: a bound method stored away.
std::vector<size_t> referencesTo(std::string_view text, std::string_view selfMethod) {
  std::vector<size_t> out;
  forEachWhole(text, selfMethod, [&](size_t at, size_t end) {
    size_t next = skipBlanks(text, end);
    if (next == text.size() || text[next] != '(') out.push_back(at);
  });
  return out;
}

// The offsets of calls of a table's entries, `.table[...](` (the table an attribute).
std::vector<size_t> entryCalls(std::string_view text, std::string_view table) {
  std::vector<size_t> out;
  std::string word = "." + std::string(table) + "[";
  for (size_t at = findFrom(text, word, 0); at != std::string_view::npos; at = findFrom(text, word, at + 1)) {
    size_t close = text.find(']', at + word.size());
    if (close == std::string_view::npos || text.substr(at, close - at).find('\n') != std::string_view::npos) continue;
    size_t next = skipBlanks(text, close + 1);
    if (next < text.size() && text[next] == '(') out.push_back(at + 1);
  }
  return out;
}

// A class whose methods create groups (or whose construction does), as the tree or an installed
// package defines it.
// An attribute of a capitalised name, as a class kept as a registry is written: `Backend.executor`.
bool isRegistryAttribute(const std::string& receiver) {
  size_t dot = receiver.find('.');
  return dot != std::string::npos && dot > 0 && std::isupper(static_cast<unsigned char>(receiver[0])) &&
         !receiver.ends_with("()");
}

// A function that makes instances of a class, where: a module's, or a class's (`owner`) called on it.
struct Factory {
  std::string module, made, owner;
  bool operator==(const Factory&) const = default;
};

struct ClassEntry {
  std::string module;
  std::string name;
  std::map<std::string, std::string> methods;  // wrapper method -> its chain
};

}  // namespace

struct TreeSurvey {
  std::vector<CalledNames> called;
  std::vector<std::vector<ClassHeader>> classHeaders;
  std::vector<std::vector<ImportedName>> imports;
  std::vector<std::map<std::string, std::string, std::less<>>> aliases;  // alias -> the name it imports
};

namespace {

// The wrapper inference over the tree, with installed modules and catalogue rows joined in.
class Inference {
 public:
  Inference(const std::vector<std::string_view>& texts, const std::vector<std::string>& modules, unsigned threads,
            const TableRoots& roots = groupCreatorRoots())
      : roots_(roots), texts_(texts), modules_(modules), environment_(texts.size(), false), threads_(threads) {}

  // The names each source calls and the imports it makes: one pass over each, on the run's threads.
  void readTree(const TreeSurvey* shared = nullptr) {
    if (shared && shared->called.size() == texts_.size()) {
      called_ = shared->called;
      classHeaders_ = shared->classHeaders;
      imports_ = shared->imports;
      aliases_ = shared->aliases;
      return;
    }
    called_.resize(texts_.size());
    classHeaders_.resize(texts_.size());
    imports_.resize(texts_.size());
    aliases_.resize(texts_.size());
    parallel(texts_.size(), [&](size_t i) { survey(i); });
  }

  TreeSurvey surveyed() const { return {called_, classHeaders_, imports_, aliases_}; }

  // The imports of the tree that leave it and that it calls through (`name(` or `name.`), by the
  // module they name. Relative imports, torch, the standard library and the tree's own folders and
  // files stay inside: none of them is resolved through the environment.
  std::set<std::string> importsLeavingTree() const {
    std::set<std::string> treeParts;  // the folders and files of the tree's modules: an import of one stays inside
    for (size_t i = 0; i < texts_.size(); ++i) {
      std::string_view m = modules_[i];
      for (size_t b = 0; b <= m.size();) {
        size_t e = m.find('.', b);
        if (e == std::string_view::npos) e = m.size();
        treeParts.emplace(m.substr(b, e - b));
        b = e + 1;
      }
    }
    std::set<std::string> out;
    for (size_t i = 0; i < texts_.size(); ++i) {
      for (const ImportedName& imported : imports_[i]) {
        const std::string& m = imported.module;
        std::string head = m.substr(0, m.find('.'));
        if (m.empty() || m[0] == '.' || head == "torch" || treeParts.contains(head) || isStandardLibraryModule(head)) continue;
        // A docstring's line that begins "from the ..." is no import.
        if (!std::all_of(m.begin(), m.end(), [](char c) { return c == '.' || isIdentifierByte(c); })) continue;
        std::string bound = imported.bound();
        if (called_[i].mayHold(hashName(bound)) || texts_[i].find(bound + ".") != std::string_view::npos) out.insert(m);
      }
    }
    return out;
  }

  // Of `leaving`, the modules to read: none unless the tree calls one of their names in a loop or
  // many times, directly or through its own functions, methods and classes (only then can an
  // installed wrapper change a finding: NM401 reports creations in loops and files with many), and
  // then all of them. A call the text shows in a loop decides at once; otherwise this inference
  // decides, on the tree alone and before the interpreter is asked: each name imported from
  // outside (and each `alias.name(` called through an imported module) stands in for a wrapper.
  std::set<std::string> modulesNeeded(const std::set<std::string>& leaving, int groupSitesThreshold) const {
    // First by the text: a module whose names are called where a loop shows is needed at once,
    // and the inference, which parses around every call it seeks, is left only the others.
    std::set<std::string> needed;
    for (size_t i = 0; i < texts_.size(); ++i)
      for (const ImportedName& imported : imports_[i]) {
        if (!leaving.contains(imported.module) || needed.contains(imported.module)) continue;
        forEachCallThrough(texts_[i], imported, [&](const std::string&, size_t at) {
          if (!needed.contains(imported.module) && looksInLoop(texts_[i], at)) needed.insert(imported.module);
        });
      }
    // Once one module is needed the interpreter starts, and reading the other modules the tree
    // calls through costs a few file reads, where telling which of them matter would cost a parse
    // around each of their calls (half a second of CPU on torch's 2,500 files): they are read.
    if (!needed.empty()) return leaving;
    Inference whatIf(texts_, modules_, threads_, roots_);
    whatIf.called_ = called_;
    whatIf.classHeaders_ = classHeaders_;
    whatIf.imports_ = imports_;
    whatIf.aliases_ = aliases_;
    whatIf.standIns_ = true;
    whatIf.addStandIns(leaving);
    whatIf.infer();
    return whatIf.standInsNeeded(groupSitesThreshold);
  }

  // Resolves the imports the tree calls through that leave the tree: installed modules through
  // `environment` (only those of `needed`, so that a tree that needs none never asks), the
  // catalogue's rows for what is not installed.
  void joinEnvironment(const ModuleReader& environment, const std::vector<KnownWrapper>& known, const std::set<std::string>& needed) {
    // module -> (depth of the import that names it, the names imported from it; empty: the module)
    std::map<std::string, std::pair<int, std::set<std::string>>> wanted;
    size_t tree = texts_.size();
    for (size_t i = 0; i < tree; ++i) {
      for (const ImportedName& imported : imports_[i]) {
        const std::string& m = imported.module;
        if (!needed.contains(m)) continue;
        std::string bound = imported.bound();
        if (!called_[i].mayHold(hashName(bound)) && texts_[i].find(bound + ".") == std::string_view::npos) continue;
        auto& entry = wanted.emplace(m, std::make_pair(0, std::set<std::string>())).first->second;
        if (!imported.name.empty()) {
          entry.second.insert(imported.name);
          wanted.emplace(m + "." + imported.name, std::make_pair(0, std::set<std::string>()));  // a submodule imported by name
        }
      }
    }
    std::set<std::string> found;
    constexpr size_t kMostModules = 128;
    for (size_t asked = 0; !wanted.empty() && asked < kMostModules; ++asked) {
      auto it = wanted.begin();
      std::string module = it->first;
      auto [depth, names] = it->second;
      wanted.erase(it);
      if (read_.contains(module)) continue;
      read_.insert(module);
      std::optional<std::string> text = environment ? environment(module) : std::nullopt;
      if (!text) continue;
      // Only a module that names a creator is read for wrappers; a package's __init__ that
      // re-exports the names the tree imports is followed one step to where they are defined.
      bool names_creator = std::any_of(roots_.names.begin(), roots_.names.end(),
                                       [&](const std::string& c) { return text->find(c) != std::string::npos; });
      if (depth == 0 && !names.empty()) {
        for (const ImportedName& imported : importsOf(*text)) {
          if (!imported.module.starts_with(".") || !names.contains(imported.bound())) continue;
          std::string rest = imported.module.substr(1);
          for (const std::string& base : {module, module.substr(0, module.rfind('.'))}) {
            std::string target = rest.empty() ? base : base + "." + rest;
            if (!read_.contains(target)) wanted[target].first = depth + 1;
          }
        }
      }
      if (!names_creator) continue;
      found.insert(module);
      owned_.push_back(std::move(*text));
      addSource(owned_.back(), module);
    }
    environmentModules_.assign(found.begin(), found.end());
    // Rows of the catalogue for modules the tree imports that are not installed here.
    std::set<std::string> imported;
    for (size_t i = 0; i < tree; ++i)
      for (const ImportedName& name : imports_[i]) imported.insert(name.module), imported.insert(name.module + "." + name.name);
    for (const KnownWrapper& row : known) {
      if (found.contains(row.module) || !imported.contains(row.module)) continue;
      std::string chain = row.module + "." + row.function + " -> " + row.creates;
      if (size_t dot = row.function.find('.'); dot != std::string::npos) {
        // A method: called on the class's objects, which the tree makes by its name.
        std::string cls = row.function.substr(0, dot), method = row.function.substr(dot + 1);
        classes_[cls].push_back({row.module, cls, {{method, chain}}});
        methodNames_.insert(method);
        searching_[method].push_back(row.module + "#class=" + cls);
        searching_[cls].push_back(row.module);
        continue;
      }
      std::string key = row.module + ":" + row.function;
      if (!wrappers_.insert(key).second) continue;
      index_.add(key);
      via_[key] = chain;
      throughModel_.insert(key);
      searching_[row.function].push_back(row.module);
    }
  }

  // Has infer() follow objects further, for NM502's table, whose wrappers are benchmarks' and
  // replayers' backends: each round reads the bindings of the objects wrapper methods are called on
  // and the tables that hold such methods (readReceiverBindings, readMethodTables), which call no
  // name sought, and a class of the tree reaches the wrapper methods it inherits from the tree's
  // classes. The group table does without: its wrappers are functions and methods called directly.
  void followObjectRoutes() { followsObjectRoutes_ = true; }

  void infer() {
    if (!standIns_)
      for (const std::string& root : roots_.names) searching_[root].push_back("*");
    readings_.resize(texts_.size());
    for (int round = 0; round < kMaxRounds && !searching_.empty(); ++round) {
      rootsOnly_ = round == 0 && !standIns_;
      readSought();
      rootsOnly_ = false;
      if (followsObjectRoutes_) readMethodTables(), readReceiverBindings();
      searching_ = closeOver();
    }
  }

  // Each name the tree imports from a module of `leaving`, and each `bound.a.b(` it calls through
  // such an import (a function of the module, of a submodule or a class, a module-level object's
  // method), stands in for a wrapper of that module. Names no wrapper can have (a creator's, a
  // generic name's: isTrackable) stand in for none, as the installed code would not give them one.
  void addStandIns(const std::set<std::string>& leaving) {
    auto add = [&](const std::string& dotted, const std::string& origin) {
      size_t dot = dotted.rfind('.');
      if (dot == std::string::npos) return;
      std::string module = dotted.substr(0, dot), name = dotted.substr(dot + 1);
      if (name.empty() || roots_.names.contains(name) || !isTrackable(name)) return;
      std::string key = module + ":" + name;
      origins_[key].insert(origin);
      if (!wrappers_.insert(key).second) return;
      index_.add(key);
      via_[key] = dotted;
      throughModel_.insert(key);
      searching_[name].push_back(module);
    };
    for (size_t i = 0; i < texts_.size(); ++i)
      for (const ImportedName& imported : imports_[i]) {
        if (!leaving.contains(imported.module)) continue;
        if (!imported.name.empty()) add(imported.module + "." + imported.name, imported.module);
        forEachCallThrough(texts_[i], imported, [&](const std::string& dotted, size_t) { add(dotted, imported.module); });
      }
  }

  // After the what-if's rounds: the modules of the stand-ins that the tree calls in a loop, or at
  // sites of a file that, with the file's calls of torch's creators, reach `groupSitesThreshold`
  // (NM401's count; 0: none), directly or through the functions, methods and classes that call
  // them; and those of stand-ins whose result the tree keeps (`g = Maker()`), whose methods it may
  // call anywhere.
  std::set<std::string> standInsNeeded(int groupSitesThreshold) const {
    // A wrapper reaches the stand-ins that any of its calls reach, to the fixed point.
    std::map<std::string, std::set<std::string>> origins = origins_;
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < readings_.size(); ++i)
        for (const FunctionCalls& f : readings_[i].functions) {
          std::string key = keyOf(f, i);
          if (!wrappers_.contains(key)) continue;
          for (const CallInFunction& c : f.calls)
            for (const std::string& k : keysReached(c, f, i)) {
              auto it = origins.find(k);
              if (k == key || it == origins.end()) continue;
              for (const std::string& o : it->second) changed |= origins[key].insert(o).second;
            }
        }
    }
    std::unordered_set<std::string_view> creators(groupCreatorNames().begin(), groupCreatorNames().end());
    std::set<std::string> needed;
    const FunctionCalls moduleLevel;
    for (size_t i = 0; i < readings_.size(); ++i) {
      std::set<std::string> here;
      int sites = 0;
      auto visit = [&](const CallInFunction& c, const FunctionCalls& f, bool counts) {
        std::set<std::string> from;
        for (const std::string& k : keysReached(c, f, i))
          if (auto it = origins.find(k); it != origins.end()) from.insert(it->second.begin(), it->second.end());
        if (from.empty()) return;
        if (c.loopDepth > 0) needed.insert(from.begin(), from.end());
        else if (counts) ++sites, here.insert(from.begin(), from.end());
      };
      auto kept = [&](const std::vector<Construction>& made) {
        for (const Construction& m : made) {
          if (m.callee.find('.') != std::string::npos) continue;
          CallInFunction call;
          call.name = m.callee;
          call.qualifiedName = m.qualified;
          if (auto it = origins_.find(index_.reached(call, modules_[i])); it != origins_.end())
            needed.insert(it->second.begin(), it->second.end());
        }
      };
      const SourceReading& reading = readings_[i];
      for (const FunctionCalls& f : reading.functions) {
        bool inWrapper = wrappers_.contains(keyOf(f, i));  // its calls count where it is called
        for (const CallInFunction& c : f.calls) visit(c, f, !inWrapper);
        kept(f.constructions);
      }
      for (const CallInFunction& c : reading.module.calls) visit(c, moduleLevel, true);
      kept(reading.module.constructions);
      if (groupSitesThreshold > 0 && sites > 0 &&
          sites + (sites < groupSitesThreshold ? static_cast<int>(callsOf(texts_[i], creators).size()) : 0) >= groupSitesThreshold)
        needed.insert(here.begin(), here.end());
    }
    return needed;
  }

  // The tree's calls that reach a wrapper through an object or an installed package.
  std::vector<ProjectSite> sites() const {
    std::vector<ProjectSite> out;
    for (size_t i = 0; i < texts_.size(); ++i) {
      if (environment_[i]) continue;
      for (const FunctionCalls& f : readings_[i].functions) {
        for (const CallInFunction& c : f.calls) {
          std::string via = objectVia(c, f, i);
          if (via.empty()) {
            std::string key = index_.reached(c, modules_[i]);
            if (key.empty() || !throughModel_.contains(key) || switchedOff(c, key)) continue;
            via = viaOf(key);
          }
          out.push_back({i, c.row, c.column, c.name, std::move(via)});
        }
      }
    }
    return out;
  }

  // After infer(): each wrapper's first call in a loop among the sources `loopCounts` accepts
  // (unset: all), else its first call in a model's forward or backward there; for one that
  // wrappers call outside loops only, the first such call of theirs. A forward that issues a
  // transfer itself is keyed too, with its own transfer.
  std::map<std::string, LoopedCall> loopedWrappers(const std::function<bool(size_t)>& loopCounts) {
    if (!searching_.empty()) readSought();  // the calls of the wrappers the last round found
    readMethodTables();
    readReceiverBindings();
    std::map<std::string, LoopedCall> looped;
    auto note = [&](const std::string& key, LoopedCall at) {
      auto [it, added] = looped.try_emplace(key, at);
      // A loop is a plainer reason than a forward, then the sources' order.
      if (!added && std::tie(at.repeat, at.source, at.row) < std::tie(it->second.repeat, it->second.source, it->second.row))
        it->second = std::move(at);
    };
    std::map<std::string, std::set<std::string>> calledBy;  // wrapper -> the wrappers calling it outside loops
    const FunctionCalls moduleLevel;
    for (size_t i = 0; i < readings_.size(); ++i) {
      std::optional<bool> counts;  // asked at the source's first repeated call
      auto repeats = [&] {
        if (!counts) counts = !loopCounts || loopCounts(i);
        return *counts;
      };
      auto visit = [&](const CallInFunction& c, const FunctionCalls& f, const std::string& caller, bool step) {
        for (const std::string& k : keysReached(c, f, i)) {
          if (k == caller || !wrappers_.contains(k)) continue;
          if ((c.loopDepth > 0 || step) && repeats()) {
            note(k, {i, c.row, c.loopDepth > 0 ? LoopedCall::Repeat::InLoop : LoopedCall::Repeat::FromForward, callerName(f),
                     throughOf(c)});
          } else if (c.loopDepth == 0 && !step && !caller.empty()) {
            calledBy[k].insert(caller);
          }
        }
      };
      for (const FunctionCalls& f : readings_[i].functions) {
        std::string key = keyOf(f, i);
        bool step = isModelStep(f);
        for (const CallInFunction& c : f.calls) {
          visit(c, f, wrappers_.contains(key) ? key : "", step);
          // A model's own transfer: keyed by its class too, as the module's key is every class's
          // method of that name (a class without a base may define `forward` beside the model).
          if (step && c.loopDepth == 0 && roots_.names.contains(c.name) && roots_.isRoot(c.name, c.qualifiedName) && repeats())
            note(modelStepKey(modules_[i], f.owner, f.function), {i, c.row, LoopedCall::Repeat::IsForward, callerName(f), ""});
        }
      }
      for (const CallInFunction& c : readings_[i].module.calls) visit(c, moduleLevel, "", false);
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& [callee, callers] : calledBy) {
        if (looped.contains(callee)) continue;
        for (const std::string& caller : callers)
          if (auto it = looped.find(caller); it != looped.end()) {
            looped.emplace(callee, it->second);
            changed = true;
            break;
          }
      }
    }
    return looped;
  }

  // A model's forward or backward, which torch runs once per step: a method of that name of a
  // class that has a base (nn.Module's subclasses, autograd.Function's). Which base is not checked:
  // it is often the project's own class, or an installed one, whose definition is not read here,
  // and a class that derives from something and defines `forward` is a module in PyTorch code.
  static bool isModelStep(const FunctionCalls& f) {
    if (f.scope != FunctionScope::Method || (f.function != "forward" && f.function != "backward")) return false;
    return std::any_of(f.ownerBases.begin(), f.ownerBases.end(), [](const std::string& b) { return b != "object"; });
  }

  static std::string callerName(const FunctionCalls& f) {
    if (f.function.empty()) return "";
    return f.owner.empty() ? f.function : f.owner + "." + f.function;
  }

  // What a call goes through to reach a method: its object (`self.backend` of
  // `self.backend.send(...)`) or its table (`self.funcs[...]`); empty for a plain call or self's.
  static std::string throughOf(const CallInFunction& c) {
    if (!c.table.empty()) return c.table + "[...]";
    if (c.onAttribute && !c.onSelf && c.receiver.starts_with("self.")) return c.receiver;
    return "";
  }

  // Before loopedWrappers: the statements that bind `self.attr` where the tree calls a wrapper
  // method on it (`self.backend.send(...)`) and no binding read so far gives its class, and then
  // those that bind the locals such a binding names (`self.backend = backend`): found by their
  // text, as they call nothing sought.
  void readReceiverBindings() {
    if (methodNames_.empty()) return;
    for (int step = 0; step < 2; ++step) {
      std::vector<std::set<std::string>> targets(readings_.size());  // per source: the names whose bindings to read
      for (size_t i = 0; i < readings_.size(); ++i)
        for (const FunctionCalls& f : readings_[i].functions) {
          for (const CallInFunction& c : f.calls) {
            // An attribute of self, or of a named object of the module (a class kept as a registry,
            // `Backend.executor`), whose binding the statements read so far do not show.
            bool attribute = c.receiver.starts_with("self.") || c.receiver.starts_with("cls.") || isRegistryAttribute(c.receiver);
            if (step == 0 && c.onAttribute && !c.onSelf && attribute && methodNames_.contains(c.name) &&
                receiverClasses(c, f, i).empty())
              targets[i].insert(c.receiver);
            if (step == 0 && !c.table.empty() && c.table.starts_with("self.") && c.table.find('.', 5) != std::string::npos)
              targets[i].insert(c.table.substr(0, c.table.rfind('.')));
          }
          if (step == 1)
            for (const Construction& b : f.constructions)
              if (b.alias && (b.target.starts_with("self.") || b.target.starts_with("cls.") || isRegistryAttribute(b.target)))
                targets[i].insert(b.callee);
        }
      for (size_t i = 0; i < readings_.size(); ++i) {
        if (targets[i].empty()) continue;
        std::vector<size_t> hits;
        for (const std::string& target : targets[i]) {
          std::vector<size_t> found = assignmentsTo(texts_[i], target);
          hits.insert(hits.end(), found.begin(), found.end());
        }
        std::sort(hits.begin(), hits.end());
        if (!hits.empty()) readAround(texts_[i], hits, readings_[i]);
      }
    }
  }

  // Before loopedWrappers: in the modules of wrapper methods, the statements that store one in a
  // table (`self.funcs["send"] = self.isend`), and, in every source that names such a table, the
  // calls of its entries (`self.backend.funcs[name](...)`): found by their text, as neither calls
  // a name sought.
  void readMethodTables() {
    std::map<size_t, std::vector<std::string>> stored;  // source -> wrapper methods of its module
    for (const std::string& key : wrappers_) {
      size_t self = key.find("#self:");
      if (self == std::string::npos) continue;
      std::string module = key.substr(0, self);
      for (size_t i = 0; i < texts_.size(); ++i)
        if (modules_[i] == module) stored[i].push_back(key.substr(self + 6));
    }
    std::set<std::string> tables;
    for (const auto& [i, methods] : stored) {
      std::vector<size_t> hits;
      for (const std::string& m : methods)
        for (size_t at : referencesTo(texts_[i], "self." + m)) hits.push_back(at);
      if (hits.empty()) continue;
      std::sort(hits.begin(), hits.end());
      readAround(texts_[i], hits, readings_[i]);
      for (const FunctionCalls& f : readings_[i].functions)
        for (const TableEntry& entry : f.tableEntries) tables.insert(entry.table.substr(entry.table.rfind('.') + 1));
    }
    for (const std::string& table : tables)
      for (size_t i = 0; i < texts_.size(); ++i) {
        std::vector<size_t> hits = entryCalls(texts_[i], table);
        if (hits.empty()) continue;
        if (!readings_[i].scopes) bindImports(i);
        readAround(texts_[i], hits, readings_[i]);
      }
  }

  std::set<std::string> wrappers() const { return wrappers_; }
  const std::map<std::string, std::set<std::string>>& switches() const { return switches_; }
  const std::vector<std::string>& environmentModules() const { return environmentModules_; }

 private:
  template <class Work>
  void parallel(size_t count, Work&& work) {
    std::atomic<size_t> next{0};
    auto run = [&] {
      for (size_t i = next++; i < count; i = next++) work(i);
    };
    std::vector<std::thread> workers;
    for (unsigned t = 1; t < std::min<size_t>(threads_, count); ++t) workers.emplace_back(run);
    run();
    for (std::thread& w : workers) w.join();
  }

  void survey(size_t i) {
    classHeaders_[i].clear();
    called_[i] = calledNames(texts_[i], classHeaders_[i]);
    imports_[i] = importsOf(texts_[i]);
    for (const ImportedName& imported : imports_[i])
      if (!imported.name.empty() && !imported.alias.empty()) aliases_[i][imported.alias] = imported.name;
  }

  size_t addSource(std::string_view text, const std::string& module) {
    texts_.push_back(text);
    modules_.push_back(module);
    environment_.push_back(true);
    called_.emplace_back();
    classHeaders_.emplace_back();
    imports_.emplace_back();
    aliases_.emplace_back();
    survey(texts_.size() - 1);
    return texts_.size() - 1;
  }

  // Parses, in every source that may call them, the statements around calls of the names sought.
  void readSought() {
    // A method or nested function is called only in its own module: its name is sought there
    // alone; torch's creators, modules' functions and methods called on objects everywhere.
    std::unordered_set<std::string_view> names;
    std::vector<uint32_t> everywhere;
    std::unordered_map<std::string_view, std::vector<uint32_t>> inModule;
    for (const auto& [name, scopes] : searching_) {
      names.insert(name);
      for (const std::string& scope : scopes) {
        size_t hash = scope.find('#');
        bool anywhere = hash == std::string::npos || hash == 0 || std::string_view(scope).substr(hash + 1).starts_with("class=");
        if (anywhere) everywhere.push_back(hashName(name));
        else inModule[std::string_view(scope).substr(0, hash)].push_back(hashName(name));
      }
    }
    parallel(texts_.size(), [&](size_t i) {
      std::unordered_set<std::string_view> local;  // the names sought here under an alias too
      bool aliased = false;
      for (const auto& [alias, name] : aliases_[i]) {
        if (!searching_.contains(name)) continue;
        if (!aliased) local = names, aliased = true;
        local.insert(alias);
      }
      auto inHere = inModule.find(modules_[i]);
      bool mayCall = callsAny(called_[i], everywhere) || (inHere != inModule.end() && callsAny(called_[i], inHere->second));
      if (!mayCall && !aliased) return;
      // The roots are torch's only in a source that holds the word their module needs.
      if (rootsOnly_ && !roots_.mention.empty() && texts_[i].find(roots_.mention) == std::string_view::npos) return;
      std::vector<size_t> hits = callsOf(texts_[i], aliased ? local : names);
      if (!hits.empty()) hits = reachingHits(texts_[i], std::move(hits), searching_, modules_[i], aliases_[i]);
      if (hits.empty()) return;
      if (!readings_[i].scopes) bindImports(i);
      readAround(texts_[i], hits, readings_[i]);
    });
    indexModuleBinders();
  }

  // The sources whose module-level statements read so far bind each name to a call's result, in
  // order: receiverClasses asks for every call on an object, and most sources bind none.
  void indexModuleBinders() {
    moduleBinders_.clear();
    for (size_t j = 0; j < readings_.size(); ++j)
      for (const Construction& c : readings_[j].module.constructions) {
        std::vector<size_t>& binders = moduleBinders_[c.target];
        if (binders.empty() || binders.back() != j) binders.push_back(j);
      }
  }

  // The aliases the source's imports make at any depth (a function's body imports too, which the
  // statements read around a call may not hold) bind before its first parse, so that a call of
  // `mcore_create_group` is known as the create_group it imports.
  void bindImports(size_t i) {
    for (const ImportedName& imported : imports_[i])
      if (!imported.name.empty() && !imported.alias.empty()) readings_[i].names.bindFromImport(imported.module, imported.name, imported.alias);
  }

  // How a wrapper is named in a chain: the tree's by its name (a method as Class.name), an
  // installed package's by its dotted module too.
  std::string display(const FunctionCalls& f, size_t source) const {
    std::string name = f.owner.empty() ? f.function : f.owner + "." + f.function;
    return environment_[source] ? modules_[source] + "." + name : name;
  }

  std::string viaOf(const std::string& key) const {
    auto it = via_.find(key);
    return it != via_.end() ? it->second : groupWrapperName(key);
  }

  // The classes a callee (`GroupMaker`, `mod.DeviceGroup`, a factory) called in `source` makes,
  // and their bases of the tree.
  // With `factories` false, only classes of that name (a receiver that is a class, not a call's result).
  std::vector<const ClassEntry*> classesMadeBy(const std::string& callee, const std::string& qualified, size_t source,
                                               int depth = 0, bool factories = true) const {
    std::vector<const ClassEntry*> out;
    std::string last = callee.substr(callee.rfind('.') + 1);
    std::string imported = qualified.find('.') != std::string::npos ? qualified.substr(0, qualified.rfind('.')) : "";
    if (imported.empty() && callee.find('.') == std::string::npos) imported = importedFrom(callee, source);
    auto inScope = [&](const std::string& module) {
      if (!imported.empty()) return moduleNamedBy(module, imported);
      return callee.find('.') == std::string::npos && (module.empty() || modules_[source].empty() || module == modules_[source]);
    };
    if (auto it = classes_.find(last); it != classes_.end())
      for (const ClassEntry& c : it->second)
        if (inScope(c.module)) out.push_back(&c);
    if (auto it = factories_.find(last); factories && it != factories_.end())
      for (const Factory& factory : it->second)
        if (factory.owner.empty() ? inScope(factory.module) : calledOnItsClass(callee, qualified, factory, source))
          for (const ClassEntry* c : classesMadeBy(factory.made, "", sourceOf(factory.module), depth + 1)) out.push_back(c);
    if (depth > 4 || classes_.empty() || !followsObjectRoutes_) return out;
    // Inherited methods: `class NcclBackend(DistBackend)`, where DistBackend has the wrapper; a
    // class with wrapper methods of its own inherits the others still.
    for (const auto& [j, bases] : classDefinitions(last)) {
      if (!inScope(modules_[j])) continue;
      for (const std::string& base : bases)
        for (const ClassEntry* c : classesMadeBy(base, "", j, depth + 1)) out.push_back(c);
    }
    return out;
  }

  // Whether `Owner.build(...)` (callee as written, qualified through the file's imports) calls a
  // class's factory method: on that class, defined in this module or imported from the factory's.
  bool calledOnItsClass(const std::string& callee, const std::string& qualified, const Factory& factory, size_t source) const {
    size_t dot = callee.rfind('.');
    if (dot == std::string::npos) return false;
    std::string owner = callee.substr(0, dot);
    if (owner.substr(owner.rfind('.') + 1) != factory.owner) return false;
    size_t classDot = qualified.rfind('.') == std::string::npos ? std::string::npos : qualified.rfind('.', qualified.rfind('.') - 1);
    if (classDot != std::string::npos) return moduleNamedBy(factory.module, qualified.substr(0, classDot));
    return owner.find('.') == std::string::npos && (factory.module == modules_[source] || importedFrom(owner, source).empty() ||
                                                     moduleNamedBy(factory.module, importedFrom(owner, source)));
  }

  // The module a name is imported from in `source`, at any depth (`from pkg.backend import
  // DistBackend` in a function's body, which the statements read around a call may not hold).
  std::string importedFrom(const std::string& name, size_t source) const {
    for (const ImportedName& imported : imports_[source])
      if (!imported.name.empty() && imported.bound() == name) return imported.module;
    return "";
  }

  // The tree's definitions of a class of this name: the source of each and its bases as written,
  // from the survey's class headers, indexed on the first question (most trees never ask one).
  const std::vector<std::pair<size_t, std::vector<std::string>>>& classDefinitions(const std::string& name) const {
    static const std::vector<std::pair<size_t, std::vector<std::string>>> kNone;
    if (!classesIndexed_) {
      classesIndexed_ = true;
      for (size_t j = 0; j < classHeaders_.size(); ++j)
        for (const ClassHeader& header : classHeaders_[j]) {
          for (const std::string& base : header.bases) subclasses_[base.substr(base.rfind('.') + 1)].emplace_back(j, header.name);
          classDefinitions_[header.name].emplace_back(j, header.bases);
        }
    }
    auto it = classDefinitions_.find(name);
    return it == classDefinitions_.end() ? kNone : it->second;
  }

  // The tree's classes deriving from a class of this name, through up to four generations: each
  // source and class name.
  std::vector<std::pair<size_t, std::string>> subclassesOf(const std::string& name) const {
    classDefinitions(name);  // indexes the tree's class headers once
    std::vector<std::pair<size_t, std::string>> out;
    std::vector<std::string> generation{name};
    for (int depth = 0; depth < 4 && !generation.empty(); ++depth) {
      std::vector<std::string> next;
      for (const std::string& base : generation) {
        auto it = subclasses_.find(base);
        if (it == subclasses_.end()) continue;
        for (const auto& entry : it->second) {
          if (entry.second == name || std::find(out.begin(), out.end(), entry) != out.end()) continue;
          out.push_back(entry);
          next.push_back(entry.second);
        }
      }
      generation = std::move(next);
    }
    return out;
  }

  size_t sourceOf(const std::string& module) const {
    for (size_t i = 0; i < modules_.size(); ++i)
      if (modules_[i] == module) return i;
    return 0;
  }

  // The classes the receiver of `call` (made in function `f` of `source`) may be an instance of:
  // made by a call (`Factory().m`), bound in the function, in the class's methods (`self.x`), at
  // module level, or imported from the module that binds it. A binding to a local
  // (`self.backend = backend`) takes the classes the local is bound to in its function.
  std::vector<const ClassEntry*> receiverClasses(const CallInFunction& call, const FunctionCalls& f, size_t source) const {
    const std::string& r = call.receiver;
    if (r.ends_with("()")) return classesMadeBy(r.substr(0, r.size() - 2), call.receiverQualified, source);
    const SourceReading& reading = readings_[source];
    // `self.x` and a classmethod's `cls.x`: bound in any method of the same class.
    if (r.starts_with("self.") || r.starts_with("cls.")) {
      std::vector<const ClassEntry*> out;
      for (const FunctionCalls& g : reading.functions)
        if (!f.owner.empty() && g.owner == f.owner)
          for (const ClassEntry* e : boundIn(g, r, source, 0)) out.push_back(e);
      return out;
    }
    if (std::vector<const ClassEntry*> out = boundIn(f, r, source, 0); !out.empty()) return out;
    if (std::vector<const ClassEntry*> out = madeFor(reading.module.constructions, r, source); !out.empty()) return out;
    // An attribute of a class used as a registry (`Backend.executor`, a capitalised name), set in
    // any function of the module: `Backend.executor = Executor.build(args)`, or through a local. A
    // lower-case head is a parameter or local (`ctx.comm`, `state.engine`) of each function alone.
    if (isRegistryAttribute(r) && followsObjectRoutes_) {
      std::vector<const ClassEntry*> out;
      for (const FunctionCalls& g : reading.functions)
        if (&g != &f)
          for (const ClassEntry* e : boundIn(g, r, source, 0)) out.push_back(e);
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
      if (!out.empty()) return out;
    }
    const std::string& q = call.receiverQualified;
    // A static or class method called on its class (`Manager.make_group(...)`): the class defined
    // in this module or imported, and the classes it derives from.
    if (r.find('.') == std::string::npos)
      if (std::vector<const ClassEntry*> out = classesMadeBy(r, q, source, 0, false); !out.empty()) return out;
    if (r.find('.') != std::string::npos || q.find('.') == std::string::npos) return {};
    std::string imported = q.substr(0, q.rfind('.')), name = q.substr(q.rfind('.') + 1);
    std::vector<const ClassEntry*> out;
    // The module's name is compared only where the name is bound: most sources bind none.
    auto binders = moduleBinders_.find(name);
    if (binders == moduleBinders_.end()) return out;
    for (size_t j : binders->second) {
      const std::vector<Construction>& made = readings_[j].module.constructions;
      if (moduleNamedBy(modules_[j], imported))
        for (const ClassEntry* e : madeFor(made, name, j)) out.push_back(e);
    }
    return out;
  }

  // The classes the calls bound to `target` among `made` make (bindings to locals left out).
  std::vector<const ClassEntry*> madeFor(const std::vector<Construction>& made, const std::string& target, size_t source) const {
    std::vector<const ClassEntry*> out;
    for (const Construction& c : made)
      if (c.target == target && !c.alias)
        for (const ClassEntry* e : classesMadeBy(c.callee, c.qualified, source)) out.push_back(e);
    return out;
  }

  // The classes `target` is bound to in function `f`: a function read in parts (the statements
  // around the hits of different rounds) has an entry per part, and what another part of it binds
  // counts too; a binding to a local is followed to the local's own bindings.
  std::vector<const ClassEntry*> boundIn(const FunctionCalls& f, const std::string& target, size_t source, int depth) const {
    std::vector<const ClassEntry*> out;
    for (const FunctionCalls& g : readings_[source].functions) {
      if (&g != &f && (g.function != f.function || g.owner != f.owner || g.scope != f.scope)) continue;
      for (const ClassEntry* e : madeFor(g.constructions, target, source)) out.push_back(e);
      if (depth < 4)
        for (const Construction& c : g.constructions)
          if (c.alias && c.target == target && c.callee != target)
            for (const ClassEntry* e : boundIn(g, c.callee, source, depth + 1)) out.push_back(e);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  // The key `f` has in the table when it is a wrapper: a class's for its __init__.
  std::string keyOf(const FunctionCalls& f, size_t source) const {
    bool constructor = f.scope == FunctionScope::Method && f.function == "__init__" && !f.owner.empty();
    return constructor ? modules_[source] + ":" + f.owner : groupWrapperKey(modules_[source], f);
  }

  // The wrappers' keys a call reaches: by its name, as a method of its receiver's classes, or as
  // one of the methods a table of its object holds.
  std::vector<std::string> keysReached(const CallInFunction& call, const FunctionCalls& f, size_t source) const {
    if (!call.table.empty()) return tableKeys(call, f, source);
    if (std::string key = index_.reached(call, modules_[source]); !key.empty()) return {key};
    std::vector<std::string> out;
    if (!call.onAttribute || call.onSelf || call.receiver.empty() || !methodNames_.contains(call.name)) return out;
    for (const ClassEntry* c : receiverClasses(call, f, source))
      if (c->methods.contains(call.name)) out.push_back(c->module + "#self:" + call.name);
    return out;
  }

  // Whether `call` passes False or None for a keyword that turns wrapper `key`'s creation off.
  bool switchedOff(const CallInFunction& call, const std::string& key) const {
    if (call.offKeywords.empty()) return false;
    auto it = switches_.find(key);
    if (it == switches_.end()) return false;
    return std::any_of(call.offKeywords.begin(), call.offKeywords.end(), [&](const std::string& k) { return it->second.contains(k); });
  }

  // The names every creating call of `f` stands under (`if init_backend:`, a parameter of `f` not
  // rebound before it); empty where one stands under none; none where `f` creates nothing.
  std::optional<std::set<std::string>> switchesOf(const FunctionCalls& f, size_t source) const {
    std::optional<std::set<std::string>> common;
    for (const CallInFunction& c : f.calls) {
      if (common && common->empty()) break;
      bool throughModel = false;
      if (creationVia(c, f, source, throughModel).empty()) continue;
      std::set<std::string> here(c.guards.begin(), c.guards.end());
      if (!common) common = std::move(here);
      else std::erase_if(*common, [&](const std::string& g) { return !here.contains(g); });
    }
    return common;
  }

  // Each switch read again from every function of its key as the table now knows them: a creation
  // found since (through a wrapper a later pass found), or another class's method of the same name
  // (methods share their module's key) that creates outside the flag's arm, narrows it, and a
  // switch left with no name is dropped. Switches only narrow, so the passes end.
  bool refreshSwitches() {
    std::map<std::string, std::set<std::string>> narrowed = switches_;
    for (size_t i = 0; i < readings_.size(); ++i)
      for (const FunctionCalls& f : readings_[i].functions) {
        auto it = narrowed.find(keyOf(f, i));
        if (it == narrowed.end() || it->second.empty()) continue;
        if (std::optional<std::set<std::string>> here = switchesOf(f, i))
          std::erase_if(it->second, [&](const std::string& g) { return !here->contains(g); });
      }
    std::erase_if(narrowed, [](const auto& entry) { return entry.second.empty(); });
    bool changed = narrowed != switches_;
    switches_ = std::move(narrowed);
    return changed;
  }

  // `self.funcs[name](...)` and `self.backend.funcs[name](...)`: the methods stored in that table
  // by the object's class (the caller's own, or the receiver's), each a key when it is a wrapper.
  std::vector<std::string> tableKeys(const CallInFunction& call, const FunctionCalls& f, size_t source) const {
    std::vector<std::string> out;
    size_t dot = call.table.rfind('.');
    if (dot == std::string::npos || !call.table.starts_with("self.")) return out;
    std::string object = call.table.substr(0, dot), table = "self" + call.table.substr(dot);
    std::vector<std::pair<size_t, std::string>> owners;  // (source, class)
    if (object == "self") {
      if (!f.owner.empty()) owners.emplace_back(source, f.owner);
    } else {
      CallInFunction on;
      on.receiver = object;
      for (const ClassEntry* c : receiverClasses(on, f, source)) owners.emplace_back(sourceOf(c->module), c->name);
    }
    for (const auto& [j, owner] : owners)
      for (const FunctionCalls& g : readings_[j].functions) {
        if (g.owner != owner) continue;
        for (const TableEntry& entry : g.tableEntries) {
          std::string key = modules_[j] + "#self:" + entry.method;
          if (entry.table == table && wrappers_.contains(key) && std::find(out.begin(), out.end(), key) == out.end()) out.push_back(key);
        }
      }
    return out;
  }

  // The chain of a method call on an object whose class has that method among its wrappers.
  std::string objectVia(const CallInFunction& call, const FunctionCalls& f, size_t source) const {
    if (!call.onAttribute || call.onSelf || call.receiver.empty() || classes_.empty()) return "";
    // Only a name that some class has among its wrapper methods can reach one: nearly every call on
    // an object is told apart here, before its receiver is looked for across the tree's sources.
    if (!methodNames_.contains(call.name)) return "";
    if (call.backend && !selectsEagerNccl(*call.backend)) return "";
    for (const ClassEntry* c : receiverClasses(call, f, source)) {
      auto m = c->methods.find(call.name);
      if (m == c->methods.end() || switchedOff(call, c->module + "#self:" + call.name)) continue;
      // Called on its class (`Manager.make_group`), the call is already the chain's first link.
      if (call.receiver == c->name) return m->second;
      return call.receiver + "." + call.name + " -> " + m->second;
    }
    return "";
  }

  // What a call reaches that creates groups, as a chain; empty if nothing.
  std::string creationVia(const CallInFunction& call, const FunctionCalls& f, size_t source, bool& throughModel) const {
    if (call.backend && !selectsEagerNccl(*call.backend)) return "";
    throughModel = false;
    if (!standIns_ && roots_.names.contains(call.name) && roots_.isRoot(call.name, call.qualifiedName))
      return "torch.distributed." + call.name;
    if (std::string key = index_.reached(call, modules_[source]); !key.empty()) {
      if (switchedOff(call, key)) return "";
      throughModel = throughModel_.contains(key);
      return viaOf(key);
    }
    if (!call.table.empty()) {
      std::vector<std::string> keys = tableKeys(call, f, source);
      std::erase_if(keys, [&](const std::string& key) { return switchedOff(call, key); });
      throughModel = !keys.empty();
      return keys.empty() ? "" : call.table + "[...] -> " + viaOf(keys.front());
    }
    std::string via = objectVia(call, f, source);
    throughModel = !via.empty();
    return via;
  }

  // A function named as a root whose unresolved calls count as the root's (a project's own
  // `new_group`, mirroring torch.distributed's) is that root, no wrapper. A root counted only as
  // torch's (`dist.send`) leaves a method of that name (`Backend.send`) free to wrap it.
  bool namesRoot(const std::string& function) const { return roots_.names.contains(function) && roots_.isRoot(function, ""); }

  void addWrapper(const std::string& key, std::string via, bool throughModel, const std::string& name, const std::string& scope,
                  Sought& added) {
    wrappers_.insert(key);
    index_.add(key);
    via_[key] = std::move(via);
    if (throughModel) throughModel_.insert(key);
    added[name].push_back(scope);
  }

  // Adds every trackable function of the readings that calls a creator or a wrapper, to the fixed
  // point, with the classes whose methods or construction create groups and the functions that
  // make their instances; returns what the next round seeks.
  Sought closeOver() {
    const std::set<std::string>& creators = roots_.names;
    Sought added;
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < readings_.size(); ++i) {
        const std::string& module = modules_[i];
        for (const FunctionCalls& f : readings_[i].functions) {
          bool constructor = f.scope == FunctionScope::Method && f.function == "__init__" && !f.owner.empty();
          if (f.scope != FunctionScope::Nested && !constructor && followsObjectRoutes_) changed |= noteFactory(f, i, added);
          else if (f.scope == FunctionScope::Module) changed |= noteFactory(f, i, added);
          if (!constructor && (namesRoot(f.function) || !isTrackable(f.function))) continue;
          std::string key = constructor ? module + ":" + f.owner : groupWrapperKey(module, f);
          // Methods share their module's key (`mod#self:step`): a subclass's override of a wrapper
          // method is read still, so that its class gets the method too.
          bool known = wrappers_.contains(key);
          if (known && !(followsObjectRoutes_ && needsMethodOf(f, module))) continue;
          for (const CallInFunction& c : f.calls) {
            bool throughModel = false;
            std::string via = creationVia(c, f, i, throughModel);
            if (via.empty()) continue;
            throughModel |= environment_[i];
            std::string chain = display(f, i) + " -> " + via;
            if (!known && !c.guards.empty())
              if (std::optional<std::set<std::string>> off = switchesOf(f, i); off && !off->empty()) switches_[key] = std::move(*off);
            if (constructor) {
              // Constructing the class creates a group: its name is called like a function's.
              addWrapper(key, (environment_[i] ? module + "." : "") + f.owner + "() -> " + chain, true, f.owner, module, added);
            } else {
              if (!known) addWrapper(key, chain, throughModel, f.function, key.substr(0, key.rfind(':')), added);
              if (f.scope == FunctionScope::Method && !f.owner.empty()) noteMethod(f, i, chain, added);
            }
            changed = true;
            break;
          }
        }
      }
      if (!switches_.empty()) changed |= refreshSwitches();
    }
    return added;
  }

  // Whether `f` is a method of a class whose entry does not hold it yet (module keys are shared by
  // the methods of one name of all the module's classes).
  bool needsMethodOf(const FunctionCalls& f, const std::string& module) const {
    if (f.scope != FunctionScope::Method || f.owner.empty() || f.function == "__init__") return false;
    auto it = classes_.find(f.owner);
    if (it == classes_.end()) return true;
    for (const ClassEntry& c : it->second)
      if (c.module == module) return !c.methods.contains(f.function);
    return true;
  }

  void noteMethod(const FunctionCalls& f, size_t source, const std::string& chain, Sought& added) {
    const std::string& module = modules_[source];
    std::vector<ClassEntry>& entries = classes_[f.owner];
    auto it = std::find_if(entries.begin(), entries.end(), [&](const ClassEntry& c) { return c.module == module; });
    if (it == entries.end()) {
      entries.push_back({module, f.owner, {}});
      it = entries.end() - 1;
      added[f.owner].push_back(module);  // where its instances are made
    }
    it->methods.emplace(f.function, chain);
    methodNames_.insert(f.function);
    added[f.function].push_back(module + "#class=" + f.owner);
    // The tree's subclasses inherit the method: it is called on their objects too, where they are made.
    if (!followsObjectRoutes_) return;
    for (const auto& [j, subclass] : subclassesOf(f.owner)) {
      added[f.function].push_back(modules_[j] + "#class=" + subclass);
      added[subclass].push_back(modules_[j]);
    }
  }

  // A module's function, or a class's method called on the class (`Executor.build(args)`, a static
  // factory), that makes instances of classes with wrapper methods (`DeviceGroup()` returning its
  // module's singleton; one executor class or another by the arguments): its calls make those
  // classes' instances.
  bool noteFactory(const FunctionCalls& f, size_t source, Sought& added) {
    if (f.scope == FunctionScope::Nested || (f.scope == FunctionScope::Method && f.owner.empty())) return false;
    bool changed = false;
    for (const CallInFunction& c : f.calls) {
      if (c.onAttribute || !classes_.contains(c.name) || c.name == f.function) continue;
      std::vector<Factory>& made = factories_[f.function];
      Factory entry{modules_[source], c.name, f.scope == FunctionScope::Method ? f.owner : ""};
      if (std::find(made.begin(), made.end(), entry) != made.end()) continue;
      made.push_back(entry);
      added[f.function].push_back(modules_[source]);
      changed = true;
    }
    return changed;
  }

  const TableRoots& roots_;
  std::vector<std::string_view> texts_;
  std::vector<std::string> modules_;
  std::vector<bool> environment_;  // per source: an installed module's
  unsigned threads_;
  std::deque<std::string> owned_;  // installed modules' texts
  std::vector<CalledNames> called_;
  std::vector<std::vector<ClassHeader>> classHeaders_;  // per source, from the survey
  std::vector<std::vector<ImportedName>> imports_;
  std::vector<std::map<std::string, std::string, std::less<>>> aliases_;  // alias -> the name it imports
  std::vector<SourceReading> readings_;
  std::unordered_map<std::string, std::vector<size_t>> moduleBinders_;  // indexModuleBinders
  std::set<std::string> read_;  // installed modules asked for
  std::vector<std::string> environmentModules_;
  std::set<std::string> wrappers_;
  // A wrapper's keywords that turn its creation off (switchesOf): `init_backend` where every call
  // of it that creates stands under `if init_backend:`.
  std::map<std::string, std::set<std::string>> switches_;
  GroupWrapperIndex index_;
  std::map<std::string, std::string> via_;  // wrapper key -> its chain
  std::set<std::string> throughModel_;      // keys whose chain passes an object or an installed package
  std::map<std::string, std::vector<ClassEntry>> classes_;  // by class name
  std::map<std::string, std::vector<Factory>> factories_;  // by the function's name
  Sought searching_;
  std::unordered_set<std::string> methodNames_;  // the wrapper methods of classes_, by name
  // classDefinitions: class name -> (source, bases as written) of each definition, once read.
  mutable std::unordered_map<std::string, std::vector<std::pair<size_t, std::vector<std::string>>>> classDefinitions_;
  mutable bool classesIndexed_ = false;
  mutable std::unordered_map<std::string, std::vector<std::pair<size_t, std::string>>> subclasses_;  // base's last name -> (source, class)
  // The what-if of modulesNeeded: names imported from outside the tree stand in for wrappers, and
  // torch's creators are not sought.
  bool standIns_ = false;
  bool rootsOnly_ = false;  // the first round, which seeks the roots alone
  bool followsObjectRoutes_ = false;  // followObjectRoutes
  std::map<std::string, std::set<std::string>> origins_;  // a stand-in's key -> the module of its import
};

}  // namespace

const TableRoots& groupCreatorRoots() {
  static const TableRoots roots{groupCreatorNames(),
                                [](const std::string& name, const std::string& qualified) {
                                  return !qualified.starts_with("torch.") || isDistributed(qualified, name);
                                },
                                ""};
  return roots;
}

// Every way of naming torch.distributed (`import torch.distributed as dist`, `from torch import
// distributed`, `torch.distributed.send(`) holds the word.
const TableRoots& pointToPointRoots() {
  static const TableRoots roots{{"send", "recv", "isend", "irecv", "batch_isend_irecv"},
                                [](const std::string& name, const std::string& qualified) { return isDistributed(qualified, name); },
                                "distributed"};
  return roots;
}

std::shared_ptr<const TreeSurvey> surveyTree(const std::vector<std::string_view>& texts, unsigned threads) {
  Inference inference(texts, std::vector<std::string>(texts.size()), threads);
  inference.readTree();
  return std::make_shared<const TreeSurvey>(inference.surveyed());
}

std::map<std::string, LoopedCall> pointToPointInLoops(const std::vector<std::string_view>& texts,
                                                      const std::vector<std::string>& modules, unsigned threads,
                                                      const std::function<bool(size_t)>& loopCounts, const TreeSurvey* survey) {
  Inference inference(texts, modules, threads, pointToPointRoots());
  inference.readTree(survey);
  inference.followObjectRoutes();
  inference.infer();
  return inference.loopedWrappers(loopCounts);
}

std::string describeLoopedCall(const LoopedCall& at, const std::string& where) {
  std::string through = at.through.empty() ? "" : ", through " + at.through;
  switch (at.repeat) {
    case LoopedCall::Repeat::IsForward: return "a model's " + at.caller + "(), which runs once per step";
    case LoopedCall::Repeat::FromForward:
      return "which " + at.caller + " calls at " + where + through + ", once per step of the model";
    case LoopedCall::Repeat::InLoop: break;
  }
  if (at.caller.empty()) return "which " + where + " calls in a loop";
  return "which " + at.caller + " calls in a loop at " + where + through;
}

std::set<std::string> functionsCalling(std::string_view source, const std::set<std::string>& creators) {
  std::set<std::string> found;
  GroupWrapperIndex none;
  for (const FunctionCalls& f : pythonFunctionCalls(source, {})) {
    if (!isTrackable(f.function) || creators.contains(f.function)) continue;
    for (const CallInFunction& call : f.calls) {
      if (createsGroups(call, "", creators, none)) found.insert(f.function);
    }
  }
  return found;
}

std::set<std::string> inferGroupWrappers(const std::vector<std::string_view>& texts, unsigned threads) {
  return inferGroupWrappers(texts, std::vector<std::string>(texts.size()), threads);
}

std::set<std::string> inferGroupWrappers(const std::vector<std::string_view>& texts, const std::vector<std::string>& modules,
                                         unsigned threads) {
  return buildGroupWrapperTable(texts, modules, threads, {}, {}).keys;
}

GroupWrapperTable buildGroupWrapperTable(const std::vector<std::string_view>& texts, const std::vector<std::string>& modules,
                                         unsigned threads, const ModuleReader& environment,
                                         const std::vector<KnownWrapper>& known) {
  return buildGroupWrapperTable(texts, modules, threads, environment, known, 1);
}

GroupWrapperTable buildGroupWrapperTable(const std::vector<std::string_view>& texts, const std::vector<std::string>& modules,
                                         unsigned threads, const ModuleReader& environment,
                                         const std::vector<KnownWrapper>& known, int groupSitesThreshold) {
  return buildGroupWrapperTable(texts, modules, threads, environment, known, groupSitesThreshold, nullptr);
}

GroupWrapperTable buildGroupWrapperTable(const std::vector<std::string_view>& texts, const std::vector<std::string>& modules,
                                         unsigned threads, const ModuleReader& environment,
                                         const std::vector<KnownWrapper>& known, int groupSitesThreshold,
                                         const TreeSurvey* survey) {
  Inference inference(texts, modules, threads);
  inference.readTree(survey);
  // Installed code is read only where it can change a finding: most trees never ask.
  std::set<std::string> needed;
  if (environment) needed = inference.modulesNeeded(inference.importsLeavingTree(), groupSitesThreshold);
  if (environment || !known.empty()) inference.joinEnvironment(environment, known, needed);
  inference.infer();
  GroupWrapperTable table;
  table.keys = inference.wrappers();
  table.switches = inference.switches();
  table.sites = inference.sites();
  table.environmentModules = inference.environmentModules();
  return table;
}

}  // namespace nccl_migrate::lint
