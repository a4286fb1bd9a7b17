// Wrapper inference (see group_wrappers.h). One pass over each source notes the names it calls (the
// identifier before each '('). Each round then asks every source, without reading it again,
// whether it calls a name the round seeks (torch's creators first, then the wrappers the round
// before found; a method's name only in its own module); a source that does is scanned for those
// calls, and the statement around each, narrowed to the innermost statement of its function, class
// or compound statement, is parsed with the headers above it and the source's imports. No part of a
// source is parsed twice; the fixed point is taken over everything read so far.
#include "python/group_wrappers.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <unordered_set>
#include <utility>

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

CalledNames calledNames(std::string_view source) {
  CalledNames names;
  forEachOpenParen(source, [&](size_t open) {
    std::string_view name = calleeBefore(source, open).second;
    if (!name.empty()) names.add(hashName(name));
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
    before.remove_prefix(std::min(before.find_first_not_of(" \t"), before.size()));
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
};

// Parses the statements of `text` around `hits` not read yet, with the imports the first time.
void readAround(std::string_view text, const std::vector<size_t>& hits, SourceReading& reading) {
  if (!reading.scopes) reading.scopes.emplace(text);
  std::vector<ParseRegion> regions = reading.scopes->unreadAround(hits);
  if (regions.empty()) return;
  if (!reading.importsRead) {
    std::vector<ParseRegion> imports = leadingImports(text);
    regions.insert(regions.end(), imports.begin(), imports.end());
    regions = mergeRegions(std::move(regions));
    reading.importsRead = true;
  }
  std::vector<FunctionCalls> read = pythonFunctionCalls(text, regions, reading.names);
  std::move(read.begin(), read.end(), std::back_inserter(reading.functions));
}

// The names sought in a round, each with the part of its keys before the colon ("*" for torch's
// creators, which any source may call).
using Sought = std::map<std::string, std::vector<std::string>, std::less<>>;

// Whether the call at `hit` in a source of module `caller` may reach a wrapper of `scope`, by the
// text alone: a method only through self or cls in its own module, a nested function by its bare
// name in its own module, a module's function in its own module or in a source that names the
// module (as its import does). Keeps the parse to the statements that may matter.
bool mayReach(std::string_view text, size_t hit, const std::string& scope, const std::string& caller) {
  if (scope == "*") return true;
  size_t hash = scope.find('#');
  std::string module = scope.substr(0, hash);
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
  if (same) return true;
  std::string_view last = std::string_view(module).substr(module.rfind('.') + 1);
  return text.find(last) != std::string_view::npos;
}

// The hits of `sought` that may reach one of its wrappers.
std::vector<size_t> reachingHits(std::string_view text, std::vector<size_t> hits, const Sought& sought, const std::string& caller) {
  std::erase_if(hits, [&](size_t hit) {
    size_t end = hit;
    while (end < text.size() && isIdentifierByte(text[end])) ++end;
    auto it = sought.find(text.substr(hit, end - hit));
    if (it == sought.end()) return true;
    for (const std::string& scope : it->second)
      if (mayReach(text, hit, scope, caller)) return false;
    return true;
  });
  return hits;
}

// Adds to `wrappers` (keys) every trackable function of `readings` that calls a creator or a
// wrapper, to the fixed point; returns what the next round seeks.
Sought closeOver(const std::vector<SourceReading>& readings, const std::vector<std::string>& modules,
                                std::set<std::string>& wrappers) {
  const std::set<std::string>& creators = groupCreatorNames();
  GroupWrapperIndex index(wrappers);
  Sought added;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < readings.size(); ++i) {
      for (const FunctionCalls& f : readings[i].functions) {
        if (creators.contains(f.function) || !isTrackable(f.function)) continue;
        std::string key = groupWrapperKey(modules[i], f);
        if (wrappers.contains(key)) continue;
        bool calls = std::any_of(f.calls.begin(), f.calls.end(), [&](const CallInFunction& c) { return createsGroups(c, modules[i], creators, index); });
        if (!calls) continue;
        wrappers.insert(key);
        index.add(key);
        added[f.function].push_back(key.substr(0, key.rfind(':')));
        changed = true;
      }
    }
  }
  return added;
}

}  // namespace

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
  std::vector<SourceReading> readings(texts.size());
  std::vector<CalledNames> called(texts.size());
  std::set<std::string> wrappers;
  Sought searching;
  for (const std::string& creator : groupCreatorNames()) searching[creator] = {"*"};
  for (int round = 0; round < kMaxRounds && !searching.empty(); ++round) {
    // A method or nested function is called only in its own module: its name is sought there
    // alone; torch's creators and modules' functions everywhere.
    std::unordered_set<std::string_view> names;
    std::vector<uint32_t> everywhere;
    std::unordered_map<std::string_view, std::vector<uint32_t>> inModule;
    for (const auto& [name, scopes] : searching) {
      names.insert(name);
      for (const std::string& scope : scopes) {
        size_t hash = scope.find('#');
        if (hash == std::string::npos || hash == 0) everywhere.push_back(hashName(name));
        else inModule[std::string_view(scope).substr(0, hash)].push_back(hashName(name));
      }
    }
    std::atomic<size_t> next{0};
    auto scan = [&] {
      for (size_t i = next++; i < texts.size(); i = next++) {
        if (round == 0) called[i] = calledNames(texts[i]);
        auto local = inModule.find(modules[i]);
        if (!callsAny(called[i], everywhere) && (local == inModule.end() || !callsAny(called[i], local->second))) continue;
        std::vector<size_t> hits = callsOf(texts[i], names);
        if (!hits.empty()) hits = reachingHits(texts[i], std::move(hits), searching, modules[i]);
        if (hits.empty()) continue;
        readAround(texts[i], hits, readings[i]);
      }
    };
    // Every thread the run has, whatever the tree's size: the table is built before any file is
    // linted, so a thread idle here is idle for the whole run, and starting one costs far less
    // than the first round's pass over every source.
    std::vector<std::thread> workers;
    for (unsigned t = 1; t < std::min<size_t>(threads, texts.size()); ++t) workers.emplace_back(scan);
    scan();
    for (std::thread& w : workers) w.join();
    searching = closeOver(readings, modules, wrappers);
  }
  return wrappers;
}

}  // namespace nccl_migrate::lint
