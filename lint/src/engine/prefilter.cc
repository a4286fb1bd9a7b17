// The prefilter's automaton: every trigger word of a run, with `#` expanded to the ten digits,
// compiled once into a dense Aho-Corasick automaton over the bytes that occur in them, then run
// once over each file; token boundaries are checked only where a word matched. Each byte's step
// waits on the one before, so a file is run as four stretches side by side.
#include "prefilter.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include <cctype>
#include <cstring>
#include <deque>
#include <iterator>
#include <limits>

namespace nccl_migrate::lint {
namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr uint32_t kHasOutput = 1u << 31;

// Python identifiers may hold non-ASCII letters, so every byte of a multi-byte character counts.
bool isIdentifierByte(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

// "cuda:#" -> "cuda:0" ... "cuda:9".
std::vector<std::string> expandDigits(const std::string& word) {
  size_t hash = word.find('#');
  if (hash == std::string::npos) return {word};
  std::vector<std::string> out;
  for (char d = '0'; d <= '9'; ++d) {
    for (std::string& rest : expandDigits(word.substr(hash + 1))) out.push_back(word.substr(0, hash) + d + rest);
  }
  return out;
}

std::string lastName(const std::string& dotted) { return dotted.substr(dotted.rfind('.') + 1); }
std::string firstName(const std::string& dotted) { return dotted.substr(0, dotted.find('.')); }

}  // namespace

Prefilter::Prefilter(std::vector<RuleTriggers> rules, const std::map<std::string, std::string>& equivalentModules) {
  for (RuleTriggers& r : rules) {
    std::vector<CompiledTrigger> compiled;
    std::vector<uint32_t> regionWords;
    for (const Trigger& t : r.triggers) {
      compiled.push_back({wordIds(t.anyOf), wordIds(t.andAnyOf), moduleWordIds(t.module, equivalentModules)});
      regionWords.insert(regionWords.end(), compiled.back().anyOf.begin(), compiled.back().anyOf.end());
      regionWords.insert(regionWords.end(), compiled.back().andAnyOf.begin(), compiled.back().andAnyOf.end());
    }
    std::vector<uint32_t> context = wordIds(r.rule->info().contextWords);
    regionWords.insert(regionWords.end(), context.begin(), context.end());
    rules_.push_back(r.rule);
    triggers_.push_back(std::move(compiled));
    regionWords_.push_back(std::move(regionWords));
  }
  moduleWord_.assign(words_.size(), 0);
  for (const std::vector<CompiledTrigger>& compiled : triggers_)
    for (const CompiledTrigger& t : compiled)
      for (uint32_t id : t.module) moduleWord_[id] = 1;
  build();
}

std::vector<uint32_t> Prefilter::wordIds(const std::vector<std::string>& spellings) {
  std::vector<uint32_t> ids;
  for (const std::string& s : spellings) ids.push_back(wordId(s));
  return ids;
}

// A module is mentioned by its last name anywhere, even inside another identifier
// (`_distributed_c10d`), or by the first name of a module declared equivalent to it or to a
// module inside it: a file can bind `deepspeed.comm` only by naming `deepspeed`, while `comm`
// is part of every `common` and `command`.
std::vector<uint32_t> Prefilter::moduleWordIds(const std::string& module,
                                               const std::map<std::string, std::string>& equivalents) {
  if (module.empty()) return {};
  std::vector<uint32_t> ids = {wordId("*" + lastName(module) + "*")};
  for (const auto& [from, to] : equivalents) {
    if (to == module || to.starts_with(module + ".")) ids.push_back(wordId("*" + firstName(from) + "*"));
  }
  return ids;
}

uint32_t Prefilter::wordId(const std::string& spelling) {
  if (auto it = words_.find(spelling); it != words_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(words_.size());
  words_.emplace(spelling, id);
  std::string text = spelling;
  bool openStart = text.starts_with("*"), openEnd = text.size() > 1 && text.ends_with("*");
  if (openStart) text.erase(0, 1);
  if (openEnd) text.pop_back();
  wordLength_.push_back(static_cast<uint32_t>(text.size()));  // "#" stands for one digit
  if (text.empty()) return id;
  // A digit placeholder at an edge matches any digit there, so the edge stays open.
  bool checkStart = !openStart && text.front() != '#' && isIdentifierByte(text.front());
  bool checkEnd = !openEnd && text.back() != '#' && isIdentifierByte(text.back());
  for (const std::string& variant : expandDigits(text)) addPattern(variant, id, checkStart, checkEnd);
  return id;
}

void Prefilter::addPattern(const std::string& text, uint32_t word, bool checkStart, bool checkEnd) {
  longestPattern_ = std::max(longestPattern_, text.size());
  patterns_.push_back({word, static_cast<uint32_t>(text.size()), checkStart, checkEnd});
  patternTexts_.push_back(text);
}

void Prefilter::build() {
  // A few long words (a JSON file's) are found faster one by one with memmem, which skips ahead
  // by the word's length where the automaton steps through every byte.
  constexpr size_t kFewPatterns = 4, kLongEnough = 6;
  fewPatterns_ = patternTexts_.size() <= kFewPatterns &&
                 std::all_of(patternTexts_.begin(), patternTexts_.end(), [](const std::string& t) { return t.size() >= kLongEnough; });
  for (const std::string& text : patternTexts_) {
    for (unsigned char c : text) {
      if (!byteClass_[c]) byteClass_[c] = static_cast<uint8_t>(classes_++);
    }
  }
  // The trie, with kNone where a state has no edge yet.
  next_.assign(classes_, kNone);
  output_.assign(1, {});
  for (uint32_t p = 0; p < patternTexts_.size(); ++p) {
    uint32_t state = 0;
    for (unsigned char c : patternTexts_[p]) {
      uint32_t& edge = next_[state * classes_ + byteClass_[c]];
      if (edge == kNone) {
        edge = static_cast<uint32_t>(output_.size());
        output_.emplace_back();
        next_.resize(next_.size() + classes_, kNone);
      }
      state = next_[state * classes_ + byteClass_[c]];
    }
    output_[state].push_back(p);
  }
  // Breadth first: each missing edge takes its failure state's edge; outputs inherit the
  // failure state's (a word that ends inside a longer one).
  std::vector<uint32_t> fail(output_.size(), 0);
  std::deque<uint32_t> queue;
  for (uint32_t c = 0; c < classes_; ++c) {
    uint32_t& edge = next_[c];
    if (edge == kNone) edge = 0;
    else queue.push_back(edge);
  }
  while (!queue.empty()) {
    uint32_t state = queue.front();
    queue.pop_front();
    for (uint32_t c = 0; c < classes_; ++c) {
      uint32_t& edge = next_[state * classes_ + c];
      uint32_t fallback = next_[fail[state] * classes_ + c];
      if (edge == kNone) {
        edge = fallback;
        continue;
      }
      fail[edge] = fallback;
      output_[edge].insert(output_[edge].end(), output_[fallback].begin(), output_[fallback].end());
      queue.push_back(edge);
    }
  }
  // Edges hold the target's row offset, flagged when words end there, so the scan neither
  // multiplies nor looks elsewhere for most bytes.
  for (uint32_t& edge : next_) edge = edge * classes_ | (output_[edge].empty() ? 0 : kHasOutput);
}

bool Prefilter::matches(const CompiledTrigger& trigger, const std::vector<uint8_t>& found) const {
  auto any = [&](const std::vector<uint32_t>& ids) {
    for (uint32_t id : ids)
      if (found[id]) return true;
    return false;
  };
  return any(trigger.anyOf) && (trigger.andAnyOf.empty() || any(trigger.andAnyOf)) &&
         (trigger.module.empty() || any(trigger.module));
}

// One stretch of a text: bytes [next, stop) are stepped through; words that end after
// `reportFrom` are its own (the bytes before it only bring the automaton into the right state).
struct Prefilter::Lane {
  size_t next = 0, stop = 0, reportFrom = 0;
  uint32_t offset = 0;
  std::vector<std::pair<size_t, uint32_t>> ends;
};

// The words that end at byte i in the state the lane reached, boundaries checked (rare: kept out of
// the loop's way).
[[gnu::noinline]] void Prefilter::report(Lane& lane, size_t i, const unsigned char* bytes, size_t size) const {
  if (i < lane.reportFrom) return;
  for (uint32_t p : output_[lane.offset / classes_]) {
    const Pattern& pattern = patterns_[p];
    if (boundariesHold(pattern, i + 1, bytes, size)) lane.ends.emplace_back(i + 1, pattern.word);
  }
}

// Whether the text of `pattern`, ending at `end`, stands as a token where the word requires one.
bool Prefilter::boundariesHold(const Pattern& pattern, size_t end, const unsigned char* bytes, size_t size) const {
  size_t start = end - pattern.length;
  if (pattern.checkStart && start > 0 && isIdentifierByte(bytes[start - 1])) return false;
  if (pattern.checkEnd && end < size && isIdentifierByte(bytes[end])) return false;
  return true;
}

// The same matches as the automaton's, every occurrence of each pattern (overlapping ones too)
// found with memmem; ends in text order (words that end at the same byte need no order).
PrefilterMatches Prefilter::scanEachPattern(std::string_view text) const {
  PrefilterMatches matches;
  matches.found.assign(words_.size(), 0);
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t p = 0; p < patterns_.size(); ++p) {
    const std::string& needle = patternTexts_[p];
    for (size_t from = 0; from + needle.size() <= text.size();) {
      const void* hit = ::memmem(text.data() + from, text.size() - from, needle.data(), needle.size());
      if (!hit) break;
      size_t start = static_cast<size_t>(static_cast<const char*>(hit) - text.data());
      if (boundariesHold(patterns_[p], start + needle.size(), bytes, text.size()))
        matches.ends.emplace_back(start + needle.size(), patterns_[p].word);
      from = start + 1;
    }
  }
  std::sort(matches.ends.begin(), matches.ends.end());  // by end, then word: words ending together in any order
  for (const auto& [end, word] : matches.ends) matches.found[word] = 1;
  return matches;
}

PrefilterMatches Prefilter::scan(std::string_view text) const {
  if (fewPatterns_) return scanEachPattern(text);
  constexpr size_t kLanes = 4;
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const uint32_t* next = next_.data();
  const uint8_t* byteClass = byteClass_;
  size_t size = text.size();
  size_t stretch = size / kLanes, warmUp = longestPattern_ ? longestPattern_ - 1 : 0;
  // A word that ends in a stretch starts at most warmUp bytes before it.
  std::array<Lane, kLanes> lanes;
  for (size_t k = 0; k < kLanes; ++k) {
    size_t from = k * stretch;
    lanes[k].reportFrom = from;
    lanes[k].next = from > warmUp ? from - warmUp : 0;
    lanes[k].stop = k + 1 == kLanes ? size : from + stretch;
  }
  size_t together = SIZE_MAX;
  for (const Lane& lane : lanes) together = std::min(together, lane.stop - lane.next);
  // The lanes' states in locals, so that the four chains of loads stay in registers.
  std::array<uint32_t, kLanes> offset{};
  for (size_t n = 0; n < together; ++n) {
    for (size_t k = 0; k < kLanes; ++k) {
      size_t i = lanes[k].next + n;
      uint32_t edge = next[offset[k] + byteClass[bytes[i]]];
      offset[k] = edge & ~kHasOutput;
      if (edge & kHasOutput) [[unlikely]] {
        lanes[k].offset = offset[k];
        report(lanes[k], i, bytes, size);
      }
    }
  }
  PrefilterMatches matches;
  matches.found.assign(words_.size(), 0);
  for (size_t k = 0; k < kLanes; ++k) {
    Lane& lane = lanes[k];
    lane.offset = offset[k];
    for (size_t i = lane.next + together; i < lane.stop; ++i) {
      uint32_t edge = next[lane.offset + byteClass[bytes[i]]];
      lane.offset = edge & ~kHasOutput;
      if (edge & kHasOutput) report(lane, i, bytes, size);
    }
    for (const auto& [end, word] : lane.ends) matches.found[word] = 1;
    matches.ends.insert(matches.ends.end(), lane.ends.begin(), lane.ends.end());
  }
  return matches;
}

std::vector<const Rule*> Prefilter::triggeredRules(const PrefilterMatches& matches) const {
  std::vector<const Rule*> triggered;
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (const CompiledTrigger& trigger : triggers_[r]) {
      if (!this->matches(trigger, matches.found)) continue;
      triggered.push_back(rules_[r]);
      break;
    }
  }
  return triggered;
}

void Prefilter::dropWithin(PrefilterMatches& matches, const std::vector<std::pair<size_t, size_t>>& spans) const {
  if (spans.empty()) return;
  // The lanes' ends come stretch by stretch, each in order; a span is found by binary search.
  auto inSpan = [&](size_t end) {
    auto it = std::upper_bound(spans.begin(), spans.end(), end,
                               [](size_t at, const std::pair<size_t, size_t>& span) { return at <= span.first; });
    return it != spans.begin() && end <= std::prev(it)->second;
  };
  std::erase_if(matches.ends, [&](const std::pair<size_t, uint32_t>& m) { return !moduleWord_[m.second] && inSpan(m.first); });
  for (size_t word = 0; word < matches.found.size(); ++word)
    if (!moduleWord_[word]) matches.found[word] = 0;
  for (const auto& [end, word] : matches.ends) matches.found[word] = 1;
}

bool Prefilter::triggerMatches(const PrefilterMatches& matches, const Rule* rule, size_t from, size_t to) const {
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (rules_[r] != rule) continue;
    for (size_t t = from; t < std::min(to, triggers_[r].size()); ++t)
      if (this->matches(triggers_[r][t], matches.found)) return true;
  }
  return false;
}

std::vector<std::pair<size_t, size_t>> Prefilter::triggerWordSpans(const PrefilterMatches& matches, const Rule* rule,
                                                                   size_t from) const {
  std::vector<uint8_t> wanted(words_.size(), 0);
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (rules_[r] != rule) continue;
    for (size_t t = from; t < triggers_[r].size(); ++t)
      for (uint32_t word : triggers_[r][t].anyOf) wanted[word] = 1;
  }
  std::vector<std::pair<size_t, size_t>> spans;
  for (const auto& [end, word] : matches.ends)
    if (wanted[word]) spans.emplace_back(end - wordLength_[word], end);
  return spans;
}

std::vector<size_t> Prefilter::wordEnds(const PrefilterMatches& matches, const std::vector<const Rule*>& rules) const {
  std::vector<uint8_t> wanted(words_.size(), 0);
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (std::find(rules.begin(), rules.end(), rules_[r]) == rules.end()) continue;
    for (uint32_t word : regionWords_[r]) wanted[word] = 1;
  }
  std::vector<size_t> ends;
  for (const auto& [end, word] : matches.ends) {
    if (wanted[word]) ends.push_back(end);
  }
  return ends;
}

}  // namespace nccl_migrate::lint
