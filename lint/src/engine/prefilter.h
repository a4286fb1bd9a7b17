// The text prefilter: which of a run's rules could report in a file, decided by one scan of its
// text (an Aho-Corasick automaton over every trigger word), so files no rule can report in are
// never parsed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::lint {

// One rule and the triggers it is checked under (its metadata's, plus what the run adds).
struct RuleTriggers {
  const Rule* rule = nullptr;
  std::vector<Trigger> triggers;
};

// What one scan of a text found: which words occur, and where each occurrence ends.
struct PrefilterMatches {
  std::vector<uint8_t> found;                    // per word
  std::vector<std::pair<size_t, uint32_t>> ends;  // (one past the end, word), in text order
};

class Prefilter {
 public:
  // `equivalentModules` (configuration) name modules that stand for a trigger's module.
  Prefilter(std::vector<RuleTriggers> rules, const std::map<std::string, std::string>& equivalentModules);

  // Every word of the run in `text`, in one pass.
  PrefilterMatches scan(std::string_view text) const;

  // The rules, in the order given, with a trigger that matches.
  std::vector<const Rule*> triggeredRules(const PrefilterMatches& matches) const;
  std::vector<const Rule*> triggeredRules(std::string_view text) const { return triggeredRules(scan(text)); }

  // Drops the matches that end inside one of `spans` ([begin, end), sorted: strings no rule reads),
  // and with them the words found only there; a module's mention stays wherever it is (it tells
  // how the file may name the module, which a string can too, as in `importlib.import_module`).
  void dropWithin(PrefilterMatches& matches, const std::vector<std::pair<size_t, size_t>>& spans) const;

  // Whether one of `rule`'s triggers numbered [from, to) (in the order given) matches.
  bool triggerMatches(const PrefilterMatches& matches, const Rule* rule, size_t from, size_t to) const;

  // Where the words that `rule`'s triggers from the one numbered `from` on must find (their
  // `anyOf`) occur: [begin, end) spans, in text order.
  std::vector<std::pair<size_t, size_t>> triggerWordSpans(const PrefilterMatches& matches, const Rule* rule, size_t from) const;

  // Where (one past the end) the words of `rules` (their triggers' words, not their module
  // mentions, and their context words) occur, in order.
  std::vector<size_t> wordEnds(const PrefilterMatches& matches, const std::vector<const Rule*>& rules) const;

 private:
  struct CompiledTrigger {
    std::vector<uint32_t> anyOf, andAnyOf, module;  // word ids; empty andAnyOf/module: no condition
  };
  struct Pattern {
    uint32_t word = 0;
    uint32_t length = 0;
    bool checkStart = false;  // the byte before may not be an identifier character
    bool checkEnd = false;    // nor the byte after
  };

  uint32_t wordId(const std::string& spelling);
  std::vector<uint32_t> wordIds(const std::vector<std::string>& spellings);
  std::vector<uint32_t> moduleWordIds(const std::string& module, const std::map<std::string, std::string>& equivalents);
  void addPattern(const std::string& text, uint32_t word, bool checkStart, bool checkEnd);
  void build();
  bool matches(const CompiledTrigger& trigger, const std::vector<uint8_t>& found) const;
  struct Lane;
  void report(Lane& lane, size_t i, const unsigned char* bytes, size_t size) const;
  bool boundariesHold(const Pattern& pattern, size_t end, const unsigned char* bytes, size_t size) const;
  PrefilterMatches scanEachPattern(std::string_view text) const;

  std::vector<const Rule*> rules_;
  std::vector<std::vector<CompiledTrigger>> triggers_;  // per rule
  std::vector<std::vector<uint32_t>> regionWords_;      // per rule: words that keep a block
  std::vector<uint8_t> moduleWord_;                     // per word: a module's mention
  std::vector<uint32_t> wordLength_;                    // per word: the bytes it matches
  std::map<std::string, uint32_t> words_;               // spelling -> id
  std::vector<Pattern> patterns_;
  // The automaton: a trie over byte classes with failure transitions folded in.
  std::vector<std::string> patternTexts_;
  uint8_t byteClass_[256] = {};
  uint32_t classes_ = 1;
  std::vector<uint32_t> next_;                // state * classes_ + class -> state
  std::vector<std::vector<uint32_t>> output_;  // state -> patterns ending there
  size_t longestPattern_ = 0;
  bool fewPatterns_ = false;  // searched one by one (scanEachPattern) rather than by the automaton
};

}  // namespace nccl_migrate::lint
