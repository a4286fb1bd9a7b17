// The engine: discovery, the text prefilter, frontend dispatch, rules, per-file ignores,
// suppressions and fingerprints, run in parallel over files.
#include "nccl_migrate/lint/linter.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "engine/file_discovery.h"
#include "cpp/cpp_aliases.h"
#include "engine/file_result.h"
#include "python/group_wrappers.h"
#include "python/group_wrapper_catalogue.h"
#include "python/python_environment.h"
#include "engine/isolation.h"
#include "engine/prefilter.h"
#include "python/python_call_sites.h"
#include "python/python_docstrings.h"
#include "python/python_regions.h"
#include "python/python_scopes.h"
#include "python/python_text.h"
#include "engine/suppressions.h"
#include "cpp/cpp_module.h"
#include "cpp/cpp_frontend.h"
#include "python/python_frontend.h"
#include "settings/settings_frontends.h"
#include "python/python_project.h"
#include "python/python_parameter_callers.h"
#include "rules/registry.h"

namespace nccl_migrate::lint {
namespace fs = std::filesystem;
namespace {

constexpr size_t kLanguages = 5;

// A call the project model resolved that the file alone does not (group_wrappers.h): it creates
// groups through `via`.
struct ResolvedCall {
  int line = 0, column = 0;  // 1-based, as the frontend places the call
  std::string callee;        // its last name, which tells it from a call it holds at the same place
  std::string via;
};

// Facts about the whole run that single files cannot see.
struct ProjectTables {
  std::set<std::string> groupWrappers;       // inferred group-creating functions, as keys (python_project.h)
  std::map<std::string, std::set<std::string>> groupWrapperSwitches;  // GroupWrapperTable::switches
  std::set<std::string> legacyClassAliases;  // names the tree's headers give ProcessGroupNCCL
  std::set<std::string> treeModules;         // the tree's Python modules (pythonModuleOf)
  // By file (absolute, normal): calls through objects and installed packages' wrappers.
  std::map<std::string, std::vector<ResolvedCall>> resolvedCalls;
  std::vector<std::string> notes;  // why the environment was not read, at most one
  // Functions issuing point-to-point transfers that the tree calls in a loop (NameEquivalences).
  std::map<std::string, std::string> functionsCalledInLoops;
  // What the tree's module-level functions that device selections call return (NameEquivalences).
  std::map<std::string, std::vector<TracedValue>> functionReturns;
  // Parameters with a string default that the tree's calls pass another value (NameEquivalences).
  std::set<std::string> parametersCallersPass;
};

std::string absoluteKey(const fs::path& path) {
  std::error_code ec;
  return fs::absolute(path, ec).lexically_normal().generic_string();
}

// Names that stand for `word` in the code (the aliases the tree's headers give ProcessGroupNCCL)
// fire every trigger that `word` fires, and count as its words where regions are chosen.
void addStandInTriggers(std::vector<Trigger>& triggers, const std::string& word, const std::vector<std::string>& standIns) {
  if (standIns.empty()) return;
  std::vector<Trigger> added;
  for (const Trigger& t : triggers) {
    if (std::find(t.anyOf.begin(), t.anyOf.end(), word) == t.anyOf.end()) continue;
    added.push_back(Trigger{standIns, t.andAnyOf, ""});
  }
  triggers.insert(triggers.end(), added.begin(), added.end());
}

// The triggers a call of a group wrapper fires: its words (a method's `self.name` and `cls.name`, any
// other wrapper's name) together with a mention of the module it is defined in, which its callers
// import; a configured one's last name anywhere. A method or nested function is called only in its
// own file, which the creator call at the root of the wrapper triggers anyway: there its words
// only choose what is parsed, and files elsewhere that say `self.step` are not parsed for it.
std::vector<Trigger> groupWrapperTriggers(const LintConfig& config, const std::set<std::string>& inferred) {
  std::map<std::string, std::set<std::string>> byModule;  // module ("" for any file) -> words
  for (const std::string& key : inferred) {
    std::string name = groupWrapperName(key);
    std::string scope = key.substr(0, key.rfind(':'));
    std::string module = scope.substr(0, scope.find('#'));
    if (scope.ends_with("#self")) byModule[module].insert({"self." + name, "cls." + name});
    else byModule[module].insert(name);
  }
  for (const std::string& w : config.groupWrappers) byModule[""].insert(w.substr(w.rfind('.') + 1));
  std::vector<Trigger> triggers;
  for (const auto& [module, words] : byModule) triggers.push_back(Trigger{{words.begin(), words.end()}, {}, module});
  return triggers;
}

// Group wrappers stand for new_group: every trigger that names it is fired by theirs too. First,
// right after the rule's own, the catalogue's library calls that create a group per block of ranks
// (`library`, apex's create_syncbn_process_group): like new_subgroups, one such call is a finding,
// so they count as the rule's own triggers (RulePlan::libraryTriggers); the project's wrappers follow.
void addGroupWrapperTriggers(std::vector<Trigger>& triggers, const std::vector<Trigger>& library,
                             const std::vector<Trigger>& wrappers) {
  bool namesNewGroup = std::any_of(triggers.begin(), triggers.end(), [](const Trigger& t) {
    return std::find(t.anyOf.begin(), t.anyOf.end(), "new_group") != t.anyOf.end();
  });
  if (!namesNewGroup) return;
  triggers.insert(triggers.end(), library.begin(), library.end());
  triggers.insert(triggers.end(), wrappers.begin(), wrappers.end());
}

// The rules a run uses, per language, each behind the prefilter that decides which of them a
// file needs.
struct RulePlan {
  std::vector<Prefilter> prefilters;
  bool reportUnused = false;
  size_t libraryTriggers = 0;  // the catalogue's many-group calls among a group rule's triggers
  NameEquivalences names;
  std::map<std::string, std::vector<ResolvedCall>> resolvedCalls;

  // `languages`: those of the files to lint (a run of Python files builds no C++ automaton); empty:
  // every language.
  explicit RulePlan(const LintConfig& config, ProjectTables tables = {}, const std::set<Language>& languages = {}) {
    const Rule& unused = unusedSuppressionRule();
    reportUnused = ruleEnabled(config, unused.info().code, unused.info().slug, unused.info().enabledByDefault);
    names.modules = config.equivalentModules;
    names.groupWrappers = config.groupWrappers;
    std::vector<Trigger> wrappers = groupWrapperTriggers(config, tables.groupWrappers);
    std::vector<std::string> aliases(tables.legacyClassAliases.begin(), tables.legacyClassAliases.end());
    names.inferredGroupWrappers = std::move(tables.groupWrappers);
    names.groupWrapperSwitches = std::move(tables.groupWrapperSwitches);
    names.libraryFunctionsTreeDefines = libraryFunctionsTreeDefines(names.inferredGroupWrappers, tables.treeModules);
    std::vector<Trigger> library = manyGroupsCreatorTriggers(names.libraryFunctionsTreeDefines);
    libraryTriggers = library.size();
    indexWrapperReceivers(config);
    names.functionsCalledInLoops = std::move(tables.functionsCalledInLoops);
    names.functionReturns = std::move(tables.functionReturns);
    names.parametersCallersPass = std::move(tables.parametersCallersPass);
    resolvedCalls = std::move(tables.resolvedCalls);
    std::vector<const Rule*> enabled;
    for (const Rule* rule : allRules()) {
      const RuleInfo& info = rule->info();
      if (ruleEnabled(config, info.code, info.slug, info.enabledByDefault)) enabled.push_back(rule);
    }
    // An unused suppression names an enabled rule by code or slug, so those are NM001's words.
    Trigger suppressionWords;
    for (const Rule* rule : enabled) {
      suppressionWords.anyOf.push_back(rule->info().code);
      suppressionWords.anyOf.push_back(rule->info().slug);
    }
    std::array<std::vector<RuleTriggers>, kLanguages> perLanguage;
    for (const Rule* rule : enabled) {
      RuleTriggers r{rule, rule == &unused ? std::vector<Trigger>{suppressionWords} : rule->info().triggers};
      addGroupWrapperTriggers(r.triggers, library, wrappers);
      for (Language language : rule->info().languages) {
        if (!languages.empty() && !languages.contains(language)) continue;
        RuleTriggers forLanguage = r;
        if (language == Language::Cpp) addStandInTriggers(forLanguage.triggers, "ProcessGroupNCCL", aliases);
        perLanguage[static_cast<size_t>(language)].push_back(std::move(forLanguage));
      }
    }
    // JSON has no comments, so no suppressions: NM001 has nothing to report in a .json file, and
    // its words (every enabled rule's code and slug) would make the scan of a tree's JSON data, often
    // the largest part of its bytes, the slowest of all.
    std::vector<RuleTriggers> json;
    for (const RuleTriggers& r : perLanguage[static_cast<size_t>(Language::Config)])
      if (r.rule != &unused) json.push_back(r);
    for (std::vector<RuleTriggers>& rules : perLanguage) prefilters.emplace_back(std::move(rules), config.equivalentModules);
    jsonPrefilter.emplace(std::move(json), config.equivalentModules);
  }

  // Whether a function of this name is a group wrapper, as the frontend tells (Call::inGroupWrapper):
  // the name of an inferred wrapper of any module, or a configured wrapper's last name.
  bool isWrapperFunction(const std::string& name) const {
    return isGroupWrapperFunctionName(wrapperNames_, names.groupWrappers, name);
  }

  // Whether a call `receiver.name(` can reach a group wrapper of that name at all: only through
  // `self`, or a receiver named as the wrapper's module or its package is (GroupWrapperIndex), unless
  // the configuration makes other names stand for modules (python_call_sites.h).
  bool callMayReachWrapper(std::string_view receiver, std::string_view name) const {
    if (anyReceiver_ || receiver == "self" || receiver == "cls") return true;
    auto it = wrapperReceivers_.find(name);
    if (it == wrapperReceivers_.end()) return false;  // only methods and nested functions: through self, or bare
    return it->second.contains("") || it->second.contains(receiver);
  }

  const Prefilter& prefilter(Language language) const { return prefilters[static_cast<size_t>(language)]; }
  const Prefilter& prefilter(const fs::path& path, Language language) const {
    if (language == Language::Config && path.string().ends_with(".json")) return *jsonPrefilter;  // as scanConfig tells JSON
    return prefilter(language);
  }

 private:
  void indexWrapperReceivers(const LintConfig& config) {
    for (const auto& [from, to] : config.equivalentModules)
      if (to != "torch" && !to.starts_with("torch.")) anyReceiver_ = true;  // a name may stand for a wrapper's module
    for (const std::string& w : config.groupWrappers) wrapperReceivers_[w.substr(w.rfind('.') + 1)].insert("");
    wrapperNames_ = GroupWrapperIndex(names.inferredGroupWrappers);
    for (const std::string& key : names.inferredGroupWrappers) {
      std::string scope = key.substr(0, key.rfind(':'));
      if (scope.find('#') != std::string::npos) continue;  // a method or nested function
      std::set<std::string, std::less<>>& receivers = wrapperReceivers_[groupWrapperName(key)];
      if (scope.empty()) {
        receivers.insert("");  // a module not known: any receiver
        continue;
      }
      size_t dot = scope.rfind('.');
      receivers.insert(scope.substr(dot == std::string::npos ? 0 : dot + 1));
      if (dot == std::string::npos) continue;
      std::string package = scope.substr(0, dot);
      receivers.insert(package.substr(package.rfind('.') == std::string::npos ? 0 : package.rfind('.') + 1));
    }
  }

  std::optional<Prefilter> jsonPrefilter;
  // Group wrappers' names -> the last names of their modules and packages ("": any).
  std::map<std::string, std::set<std::string, std::less<>>, std::less<>> wrapperReceivers_;
  bool anyReceiver_ = false;
  GroupWrapperIndex wrapperNames_;  // the inferred wrappers, for isWrapperFunction
};

// Where each resolved call of a file starts in its text (from its 1-based line and column), read
// once per file; none for a position the text does not have.
class ResolvedCallOffsets {
 public:
  explicit ResolvedCallOffsets(const std::string& text) : size_(text.size()) {
    for (size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 1)) lineStarts_.push_back(at + 1);
  }
  std::optional<size_t> of(const ResolvedCall& call) const {
    if (call.line < 1 || static_cast<size_t>(call.line) > lineStarts_.size() || call.column < 1) return std::nullopt;
    size_t start = lineStarts_[static_cast<size_t>(call.line - 1)] + static_cast<size_t>(call.column - 1);
    if (start >= size_) return std::nullopt;
    return start;
  }

 private:
  size_t size_;
  std::vector<size_t> lineStarts_ = {0};
};

// Where each call the project model resolved in the file stands, as a word end inside it: the
// statement (the function, the member) holding it is parsed as one holding a rule's word is.
void addResolvedCallEnds(const std::string& text, const std::vector<ResolvedCall>& resolved, std::vector<size_t>& ends) {
  ResolvedCallOffsets offsets(text);
  for (const ResolvedCall& call : resolved)
    if (std::optional<size_t> start = offsets.of(call)) ends.push_back(*start + 1);
  std::sort(ends.begin(), ends.end());
}

// The parts of a Python file the rules need (python_regions.h), from the words its scan found and
// the calls the project model resolved there. Empty: the whole file, as for small files, which
// parse faster than they split.
std::vector<ParseRegion> regionsToParse(const std::string& text, const Prefilter& prefilter, const PrefilterMatches& matches,
                                        const std::vector<const Rule*>& rules, const std::vector<ResolvedCall>* resolved,
                                        std::vector<ParseRegion>& leftOut) {
  if (text.size() < kPythonWorthSplitting) return {};
  std::vector<size_t> ends = prefilter.wordEnds(matches, rules);
  // The resolved calls are NM401's words: where it is left out (dropSilentGroupCreation), so are they.
  static const Rule* const groupCreation = findRule("NM401");
  if (std::find(rules.begin(), rules.end(), groupCreation) != rules.end()) {
    if (resolved) addResolvedCallEnds(text, *resolved, ends);
    // So are the names the file keeps torch's group creators under (`cls._orig(ranks)` calls one).
    std::optional<std::vector<size_t>> saved =
        savedCreatorMentions(text, prefilter.triggerWordSpans(matches, groupCreation, 0), groupCreatorNames());
    if (!saved) return {};
    if (!saved->empty()) {
      std::vector<size_t> merged;
      std::merge(ends.begin(), ends.end(), saved->begin(), saved->end(), std::back_inserter(merged));
      ends = std::move(merged);
    }
  }
  return pythonRegions(text, ends, leftOut);
}

SourceModel parse(const fs::path& path, const std::string& text, Language language, const RulePlan& plan,
                  const PrefilterMatches& matches, const std::vector<const Rule*>& rules,
                  const std::vector<ResolvedCall>* resolved) {
  std::string name = path.string();
  switch (language) {
    case Language::Python: {
      std::vector<ParseRegion> leftOut;
      std::vector<ParseRegion> regions = regionsToParse(text, plan.prefilter(language), matches, rules, resolved, leftOut);
      return parsePython(name, text, plan.names, regions, leftOut);
    }
    case Language::Cpp: return lexCpp(name, text);
    case Language::Shell: return scanShell(name, text);
    case Language::Dockerfile: return scanDockerfile(name, text);
    case Language::Config: return scanConfig(name, text);
  }
  return {};
}

std::string lineText(const std::string& text, int line) {
  size_t start = 0;
  for (int i = 1; i < line && start != std::string::npos; ++i) {
    start = text.find('\n', start);
    if (start != std::string::npos) ++start;
  }
  if (start == std::string::npos || start > text.size()) return "";
  size_t end = text.find('\n', start);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// FNV-1a: stable across builds and platforms, unlike std::hash.
std::string hashHex(const std::string& data) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// The path as the repository knows it (relative to the folder holding .git), so fingerprints do
// not depend on where the linter was started or how the path was spelled.
std::string repositoryPath(const std::string& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec).lexically_normal();
  for (fs::path dir = absolute.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
    if (fs::exists(dir / ".git", ec)) return absolute.lexically_relative(dir).generic_string();
  }
  return fs::path(path).lexically_normal().generic_string();
}

// Rule, path and the line's text without surrounding blanks, numbered among identical ones, so
// the fingerprint survives edits elsewhere in the file.
void fingerprint(std::vector<Finding>& findings, const std::string& text) {
  std::vector<std::string> seen;
  std::string path = findings.empty() ? "" : repositoryPath(findings.front().path);
  for (Finding& f : findings) {
    std::string line = lineText(text, f.where.line);
    size_t a = line.find_first_not_of(" \t\r"), b = line.find_last_not_of(" \t\r");
    line = a == std::string::npos ? "" : line.substr(a, b - a + 1);
    std::string base = hashHex(f.code + '\0' + path + '\0' + line);
    int n = static_cast<int>(std::count(seen.begin(), seen.end(), base));
    seen.push_back(base);
    f.fingerprint = base + ":" + std::to_string(n);
  }
}

bool lessFinding(const Finding& a, const Finding& b) {
  return std::tie(a.path, a.where.cell, a.where.line, a.where.column, a.code, a.message) <
         std::tie(b.path, b.where.cell, b.where.line, b.where.column, b.code, b.message);
}

bool ignoredForFile(const LintConfig& config, const std::string& path, const std::string& code) {
  for (const auto& [glob, codes] : config.perFileIgnores) {
    if (!globMatchesPath(glob, path)) continue;
    for (const std::string& c : codes) {
      const Rule* rule = findRule(code);
      if (c == "ALL" || code.starts_with(c) || (rule && rule->info().slug == c)) return true;
    }
  }
  return false;
}

bool ruleOn(const LintConfig& config, const char* code);

// The project model's calls in this file (a Python file's; none elsewhere).
const std::vector<ResolvedCall>* resolvedCallsIn(const fs::path& path, Language language, const RulePlan& plan) {
  if (language != Language::Python || plan.resolvedCalls.empty()) return nullptr;
  auto it = plan.resolvedCalls.find(absoluteKey(path));
  return it == plan.resolvedCalls.end() ? nullptr : &it->second;
}

// A call the project model resolved creates groups, whatever the file's own imports say of it;
// NM401 runs on the file even when none of its words is there.
void addResolvedCallRules(std::vector<const Rule*>& rules, const LintConfig& config) {
  const Rule* rule = findRule("NM401");
  if (rule && ruleOn(config, "NM401") && std::find(rules.begin(), rules.end(), rule) == rules.end()) rules.push_back(rule);
}

void markResolvedCalls(SourceModel& model, const std::vector<ResolvedCall>& resolved) {
  for (Call& call : model.calls) {
    for (const ResolvedCall& r : resolved) {
      if (call.where.line != r.line || call.where.column != r.column) continue;
      if (call.spelling != r.callee && !call.spelling.ends_with("." + r.callee)) continue;
      if (!call.qualifiedName.starts_with("torch.distributed.")) call.qualifiedName = "torch.distributed.new_group";
    }
  }
}

// NM401's findings at those calls name the chain that makes them group creations.
void nameChains(std::vector<Finding>& findings, const std::vector<ResolvedCall>& resolved) {
  for (Finding& f : findings) {
    if (f.code != "NM401") continue;
    for (const ResolvedCall& r : resolved)
      if (f.where.line == r.line && f.where.column == r.column) f.message += " (through " + r.via + ")";
  }
}

// Where the name of each call the project model resolved stands ([begin, end) of `callee` in
// `callee(` on the call's line, from where the call starts): spans as prefilter words are, so that
// the text tells whether they are calls in loops. Empty when one of them is not found so.
std::vector<std::pair<size_t, size_t>> resolvedCallNames(const std::string& text, const std::vector<ResolvedCall>& resolved) {
  ResolvedCallOffsets offsets(text);
  std::vector<std::pair<size_t, size_t>> names;
  for (const ResolvedCall& call : resolved) {
    std::optional<size_t> callStart = offsets.of(call);
    if (!callStart || call.callee.empty()) return {};
    size_t start = *callStart;
    size_t lineEnd = std::min(text.find('\n', start), text.size());
    size_t found = std::string::npos;
    for (size_t at = text.find(call.callee, start); at != std::string::npos && at + call.callee.size() <= lineEnd;
         at = text.find(call.callee, at + 1)) {
      size_t end = at + call.callee.size();
      size_t open = text.find_first_not_of(" \t", end);
      bool word = (at == 0 || !isIdentifierByte(text[at - 1])) && (end == text.size() || !isIdentifierByte(text[end]));
      if (word && open < lineEnd && text[open] == '(') {
        found = at;
        break;
      }
    }
    if (found == std::string::npos) return {};
    names.emplace_back(found, found + call.callee.size());
  }
  return names;
}

// NM401 reports nothing on a Python file whose group creations the text shows to be calls outside
// every loop, fewer than group-sites-threshold once the calls made inside group wrappers are left
// out (python_call_sites.h): a file that only group wrappers' names, or calls the project model
// resolved (`resolved`), bring it to, not torch's group creators. It is left out there, and the
// file is parsed for its other rules alone, or not at all. Tests that call a wrapper to set up
// their groups are most of the files NM401 was parsed for.
void dropSilentGroupCreation(std::vector<const Rule*>& rules, const std::string& text, const Prefilter& prefilter,
                             const PrefilterMatches& matches, const LintConfig& config, const RulePlan& plan,
                             const std::vector<ResolvedCall>* resolved) {
  static const Rule* const rule = findRule("NM401");
  auto it = std::find(rules.begin(), rules.end(), rule);
  if (it == rules.end()) return;
  size_t own = rule->info().triggers.size() + plan.libraryTriggers;  // the wrappers' triggers follow (RulePlan)
  if (prefilter.triggerMatches(matches, rule, 0, own)) return;
  int threshold = config.groupSitesThreshold;
  std::vector<std::pair<size_t, size_t>> spans = prefilter.triggerWordSpans(matches, rule, own);
  std::set<size_t> resolvedAt;  // a resolved call creates groups whatever its receiver
  if (resolved) {
    std::vector<std::pair<size_t, size_t>> calls = resolvedCallNames(text, *resolved);
    if (calls.size() != resolved->size()) return;
    for (const auto& call : calls) resolvedAt.insert(call.first);
    spans.insert(spans.end(), calls.begin(), calls.end());
    std::sort(spans.begin(), spans.end());
    spans.erase(std::unique(spans.begin(), spans.end()), spans.end());
  }
  auto mayCount = [&](std::string_view receiver, std::string_view name) {
    // `name` is a view into `text`; were it not, every call would count, which only costs a parse.
    if (name.data() < text.data() || name.data() >= text.data() + text.size()) return true;
    return resolvedAt.contains(static_cast<size_t>(name.data() - text.data())) || plan.callMayReachWrapper(receiver, name);
  };
  PythonCallSites sites(text);  // read once for the questions below
  if (!sites.onlyFewCallsOutsideLoops(spans, threshold > 0 ? static_cast<size_t>(threshold) : 0, mayCount)) {
    // Calls made in a function that is a wrapper itself (a test method that sets up its groups
    // through one) are no sites of the file (Call::inGroupWrapper): where the text shows every call
    // outside loops, only the others count towards the threshold.
    if (threshold <= 0) return;
    std::vector<size_t> starts;
    for (const auto& span : spans) starts.push_back(span.first);
    std::vector<std::string> functions = enclosingFunctions(text, starts);
    std::vector<std::pair<size_t, size_t>> outside;
    for (size_t k = 0; k < spans.size(); ++k)
      if (functions[k].empty() || !plan.isWrapperFunction(functions[k])) outside.push_back(spans[k]);
    if (outside.size() == spans.size() || !sites.onlyFewCallsOutsideLoops(spans, 0, mayCount)) return;
    // Fewer words than the threshold are fewer calls.
    if (outside.size() >= static_cast<size_t>(threshold) &&
        !sites.onlyFewCallsOutsideLoops(outside, static_cast<size_t>(threshold), mayCount))
      return;
  }
  rules.erase(it);
}

// One file's source: prefilter, frontend, the triggered rules, per-file ignores, suppressions.
FileResult lintCode(const fs::path& path, const std::string& text, Language language, const LintOptions& options,
                    const RulePlan& plan) {
  FileResult result;
  result.scanned = true;
  const Prefilter& prefilter = plan.prefilter(path, language);
  PrefilterMatches matches = prefilter.scan(text);
  std::vector<const Rule*> rules = prefilter.triggeredRules(matches);
  const std::vector<ResolvedCall>* resolved = resolvedCallsIn(path, language, plan);
  if (resolved) addResolvedCallRules(rules, options.config);
  if (rules.empty()) return result;
  if (language == Language::Python) {
    // A rule's words in a docstring say nothing of the code (python_docstrings.h).
    prefilter.dropWithin(matches, pythonDocstrings(text));
    rules = prefilter.triggeredRules(matches);
    if (resolved) addResolvedCallRules(rules, options.config);
    dropSilentGroupCreation(rules, text, prefilter, matches, options.config, plan, resolved);
    if (rules.empty()) return result;
  }
  result.parsed = true;
  SourceModel model;
  try {
    model = parse(path, text, language, plan, matches, rules, resolved);
    if (resolved) markResolvedCalls(model, *resolved);
  } catch (const CppFrontendMissing& e) {
    result.warnings.push_back(path.string() + ": skipped: " + e.what());
    return result;
  } catch (const std::exception& e) {
    result.warnings.push_back(path.string() + ": skipped: " + e.what() + "; fix the file or --exclude it");
    return result;
  }
  if (language == Language::Cpp && options.cppAst.enabled()) {
    std::string note = addCppAstFacts(model, text, options.cppAst);
    if (!note.empty()) result.warnings.push_back(note);
  }
  RuleContext context{options.config};
  for (const Rule* rule : rules) rule->check(model, context, result.findings);
  if (resolved) nameChains(result.findings, *resolved);
  // Two tiers (lexer and AST) may report the same thing: one finding per line and rule.
  std::sort(result.findings.begin(), result.findings.end(), lessFinding);
  result.findings.erase(std::unique(result.findings.begin(), result.findings.end(),
                                    [](const Finding& a, const Finding& b) {
                                      return a.where.line == b.where.line && a.code == b.code;
                                    }),
                        result.findings.end());
  std::erase_if(result.findings, [&](const Finding& f) { return ignoredForFile(options.config, f.path, f.code); });
  Suppressions suppressions(model);
  result.suppressed = suppressions.removeSuppressed(result.findings);
  if (plan.reportUnused) {
    std::vector<Finding> unused = suppressions.unused(options.config);
    result.findings.insert(result.findings.end(), unused.begin(), unused.end());
  }
  fingerprint(result.findings, text);
  return result;
}

// A notebook is linted as its joined code cells (what the prefilter must see too: in the JSON,
// quotes are escaped), then each finding names its cell. Fix edits would be offsets into the
// joined code, not into the notebook's JSON, so notebook findings carry none.
FileResult lintNotebook(const fs::path& path, const std::string& text, const LintOptions& options,
                        const RulePlan& plan) {
  NotebookCode notebook;
  try {
    notebook = notebookCode(text);
  } catch (const std::exception& e) {
    FileResult result;
    result.scanned = true;
    result.warnings.push_back(path.string() + ": skipped: " + e.what() + "; fix the file or --exclude it");
    return result;
  }
  FileResult result = lintCode(path, notebook.code, Language::Python, options, plan);
  for (Finding& f : result.findings) {
    f.where = notebook.locate(f.where);
    f.fix.reset();
  }
  std::sort(result.findings.begin(), result.findings.end(), lessFinding);
  return result;
}

FileResult lintText(const fs::path& path, const std::string& text, Language language, const LintOptions& options,
                    const RulePlan& plan) {
  if (path.extension() == ".ipynb") return lintNotebook(path, text, options, plan);
  return lintCode(path, text, language, options, plan);
}

// The length (2 to 4) of the well-formed UTF-8 sequence that starts at `p`, else 0: no overlong
// form, surrogate or value above U+10FFFF (Unicode's table 3-7).
size_t utf8SequenceLength(const unsigned char* p, const unsigned char* end) {
  unsigned char lead = p[0], low = 0x80, high = 0xBF;
  size_t length = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  }
  if (length == 0 || static_cast<size_t>(end - p) < length || p[1] < low || p[1] > high) return 0;
  for (size_t i = 2; i < length; ++i)
    if (p[i] < 0x80 || p[i] > 0xBF) return 0;
  return length;
}

// Replaces each invalid UTF-8 byte with U+FFFD, as Python's errors="replace" does, and returns how
// many there were. ASCII goes eight bytes at a time.
size_t replaceInvalidUtf8(std::string& text) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";
  const auto* begin = reinterpret_cast<const unsigned char*>(text.data());
  const auto* p = begin;
  const auto* end = p + text.size();
  std::string out;
  size_t copied = 0, replaced = 0;  // bytes of `text` already in `out`
  while (p < end) {
    if (end - p >= 8) {
      uint64_t word;
      std::memcpy(&word, p, sizeof word);
      if (!(word & 0x8080808080808080ull)) {
        p += 8;
        continue;
      }
    }
    if (*p < 0x80) {
      ++p;
      continue;
    }
    if (size_t length = utf8SequenceLength(p, end)) {
      p += length;
      continue;
    }
    size_t at = static_cast<size_t>(p - begin);
    out.append(text, copied, at - copied);
    out += kReplacement;
    ++replaced;
    p += 1;  // one replacement per invalid byte, so a line keeps its other characters
    copied = at + 1;
  }
  if (replaced == 0) return 0;
  out.append(text, copied, std::string::npos);
  text = std::move(out);
  return replaced;
}

// Reads a file into one string sized up front, or explains in a warning why it is skipped.
std::optional<std::string> readSource(const fs::path& path, const LintConfig& config, std::string& warning) {
  // open, fstat and read rather than an ifstream, whose set-up (buffer, locale) costs more than
  // reading a typical source file, and than a stat by name, which walks the path again.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat info {};
  if (fd >= 0 && (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode))) {
    ::close(fd);
    fd = -1;
  }
  if (fd < 0) {
    warning = path.string() + ": skipped: cannot be read; check that it exists and its permissions allow reading";
    return std::nullopt;
  }
  auto size = static_cast<uintmax_t>(info.st_size);
  if (size > config.maxFileBytes) {
    ::close(fd);
    warning = path.string() + ": skipped: " + std::to_string(size / 1024) + " KiB is over the " +
              std::to_string(config.maxFileBytes / 1024) + " KiB limit (max-file-size-kb in the configuration)";
    return std::nullopt;
  }
  std::string text(size, '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  if (text.find('\0') != std::string::npos) {
    warning = path.string() + ": skipped: binary file (contains NUL bytes); --exclude it if it is not source";
    return std::nullopt;
  }
  if (size_t replaced = replaceInvalidUtf8(text)) {
    warning = path.string() + ": " + std::to_string(replaced) + " byte(s) of invalid UTF-8 read as U+FFFD; findings are "
              "reported, fixes are not offered for this file; convert it to UTF-8";
  }
  return text;
}

std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// A file's text as read (or why it could not be), with the warning that goes with it.
struct SourceRead {
  std::optional<std::string> text;
  std::string warning;  // why the file is skipped, or (with text) how it was repaired
};

// `preread`: the text the run read before forking its workers (shared with them), else null.
FileResult lintFile(const fs::path& path, const LintOptions& options, const RulePlan& plan, const SourceRead* preread) {
  if (options.onFileStart) options.onFileStart(path);
  std::string warning = preread ? preread->warning : "";
  // The text read before the fork is linted where it lies: a copy per file was 20 MB of copying
  // (and of fresh pages) per run on Megatron-LM.
  std::optional<std::string> readHere;
  if (!preread) readHere = readSource(path, options.config, warning);
  const std::optional<std::string>& text = preread ? preread->text : readHere;
  // Files without a telling name are known by their shebang.
  std::optional<Language> language = languageByName(path, text ? firstLine(*text) : "");
  FileResult result;
  if (!language) {
    result.warnings.push_back(path.string() + ": skipped: not a Python, C/C++/CUDA, shell, Dockerfile or config file; "
                              "name it with its language's extension or give a shell script a shebang");
    return result;
  }
  if (!text) {
    result.warnings.push_back(warning);
    return result;
  }
  result = lintText(path, *text, *language, options, plan);
  if (!warning.empty()) {
    for (Finding& f : result.findings) f.fix.reset();  // offsets into the repaired text, not the file
    result.warnings.insert(result.warnings.begin(), warning);
  }
  return result;
}

bool ruleOn(const LintConfig& config, const char* code) {
  const Rule* rule = findRule(code);
  return rule && ruleEnabled(config, rule->info().code, rule->info().slug, rule->info().enabledByDefault);
}

// Whether a rule that reads Python runs: a parameter's string default is then read as a value only
// where the tree's calls leave it alone (NameEquivalences::parametersCallersPass).
bool anyPythonRuleOn(const LintConfig& config) {
  for (const Rule* rule : allRules()) {
    const RuleInfo& info = rule->info();
    bool python = std::find(info.languages.begin(), info.languages.end(), Language::Python) != info.languages.end();
    if (python && ruleEnabled(config, info.code, info.slug, info.enabledByDefault)) return true;
  }
  return false;
}

// The Python texts among the project tables' reads (headers are read for their aliases alone), and
// the module of each.
struct PythonTexts {
  std::vector<std::string_view> texts;
  std::vector<std::string> modules;
};
PythonTexts pythonTexts(const std::vector<fs::path>& files, const std::vector<size_t>& wanted,
                        const std::vector<std::string_view>& texts, const std::vector<std::string>& modules) {
  PythonTexts python;
  for (size_t k = 0; k < texts.size(); ++k)
    if (languageByName(files[wanted[k]]) == Language::Python && !texts[k].empty()) {
      python.texts.push_back(texts[k]);
      python.modules.push_back(modules[k]);
    }
  return python;
}

// A notebook's code cells, joined: the Python it defines functions in. A notebook that is no
// notebook JSON defines none here (its lint pass says why).
std::string notebookPython(const std::string& text) {
  try {
    return notebookCode(text).code;
  } catch (const std::exception&) {
    return "";
  }
}

// NM502's table (group_wrappers.h): the tree's functions that issue point-to-point transfers and
// are called in a loop, each with the loop's "path:line" as the run names the file. A loop in a
// file that holds one of NM502's context words ("gloo", nccl-lazy) does not count: the rule reads
// such a file as having chosen its P2P backend. Nor does one in a notebook, whose lines are cells'.
std::map<std::string, std::string> pointToPointLoopSites(const std::vector<fs::path>& files, const std::vector<size_t>& wanted,
                                                         const std::vector<std::string_view>& texts,
                                                         const std::vector<std::string>& modules, unsigned jobs,
                                                         const TreeSurvey& survey) {
  // A file that names nccl-lazy has chosen the backend of its point-to-point groups; one whose
  // init_process_group is written with gloo (and that never names NCCL), or that imports torch_npu
  // at its top (it runs on Ascend, HCCL's), runs on another backend: their loops do not count. This
  // is read from the text, as the table parses no caller whole; the transfer's own file is read
  // by NM502 itself (worldShownNotNccl). A "gloo" elsewhere (a command line's default, a
  // comparison with the run's backend) decides nothing.
  auto loopCounts = [&](size_t k) {
    std::string_view text = texts[k];
    auto names = [&](std::string_view word) { return text.find(word) != std::string_view::npos; };
    bool glooInit = false;
    for (std::string_view init : {"init_process_group(\"gloo\"", "init_process_group('gloo'",
                                  "init_process_group(backend=\"gloo\"", "init_process_group(backend='gloo'"})
      glooInit |= names(init);
    bool ascend = text.starts_with("import torch_npu") || names("\nimport torch_npu");
    return files[wanted[k]].extension() != ".ipynb" && !names("nccl-lazy") && !(glooInit && !names("nccl")) && !ascend;
  };
  std::map<std::string, std::string> sites;
  for (const auto& [key, at] : pointToPointInLoops(texts, modules, jobs, loopCounts, &survey))
    sites[key] = describeLoopedCall(at, files[wanted[at.source]].lexically_normal().generic_string() + ":" +
                                            std::to_string(at.row + 1));
  return sites;
}

// NM102's table (NameEquivalences::functionReturns): what the module-level functions of the tree
// return that the device selections of a file NM102 reads call bare (`set_device(get_rank())`),
// by key ("mypkg.utils:get_rank"), each return traced in its own file. Only files whose text holds
// the rule's trigger words are asked for names; a file that may define one is parsed once.
std::map<std::string, std::vector<TracedValue>> deviceSelectionReturns(const std::vector<fs::path>& files,
                                                                       const std::vector<size_t>& wanted,
                                                                       const std::vector<std::string_view>& texts,
                                                                       const std::vector<std::string>& modules,
                                                                       const LintConfig& config) {
  // The rare word first, through memmem, which skips ahead (a find of its first byte stops at every `i`).
  static constexpr std::string_view kInit = "init_process_group";
  std::set<std::string> called;
  for (std::string_view text : texts)
    if (text.size() >= kInit.size() &&  // an empty text's data() may be null, which memmem must not get
        ::memmem(text.data(), text.size(), kInit.data(), kInit.size()) && text.find("set_device") != std::string_view::npos)
      called.merge(namesCalledInDeviceSelections(text));
  // Python's builtin functions (`int(os.environ["RANK"])`): an import names no module's function of theirs.
  static const std::set<std::string> kBuiltins = {
      "abs", "all", "any", "ascii", "bin", "bool", "bytes", "callable", "chr", "dict", "divmod", "enumerate", "eval",
      "float", "format", "getattr", "hasattr", "hash", "hex", "id", "int", "isinstance", "len", "list", "map", "max",
      "min", "next", "oct", "ord", "pow", "range", "repr", "round", "set", "sorted", "str", "sum", "tuple", "type"};
  std::erase_if(called, [](const std::string& name) { return kBuiltins.contains(name); });
  std::map<std::string, std::vector<TracedValue>> table;
  if (called.empty()) return table;
  NameEquivalences equivalences;
  equivalences.modules = config.equivalentModules;
  std::map<size_t, std::set<std::string>> defining;  // by text: the names it may define
  for (const std::string& name : called) {
    for (size_t k = 0; k < texts.size(); ++k) {
      if (files[wanted[k]].extension() == ".ipynb" || modules[k].empty()) continue;  // no module to import from
      if (mayDefineModuleFunction(texts[k], name)) defining[k].insert(name);
    }
  }
  for (const auto& [k, names] : defining) {
    try {
      for (auto& [name, returns] : moduleFunctionReturns(files[wanted[k]].string(), std::string(texts[k]), names, equivalences))
        table[modules[k] + ":" + name] = std::move(returns);
    } catch (const std::exception&) {
      continue;  // the lint pass parses the file again and says why it cannot
    }
  }
  return table;
}

// The interpreter that resolves the imports leaving the tree (python_environment.h), for one run.
// Asked on first use, as PythonEnvironmentOnDemand is; or, in a run of many Python files (a
// project's, and projects nearly always call installed names in loops), started at once on a
// thread of its own, so that its start (0.03 s, 0.1 s through a pyenv shim) overlaps the reads and
// parses before the wrapper table asks. Its answer, and its note, count only if the table asks.
class RunInterpreter {
 public:
  static constexpr size_t kProjectFiles = 100;

  RunInterpreter(const std::string& interpreter, bool early) : onDemand_(interpreter), early_(early) {
    if (early) thread_ = std::thread([this, interpreter] { environment_ = PythonEnvironment::ask(interpreter, note_); });
  }
  ~RunInterpreter() { wait(); }

  std::optional<std::string> moduleSource(const std::string& dotted) {
    if (!early_) return onDemand_.moduleSource(dotted);
    wait();
    asked_ = true;
    if (environment_.searchPath().empty()) return std::nullopt;
    return environment_.moduleSource(dotted);
  }
  // Why no environment was read, once asked; empty otherwise.
  std::string note() const { return !early_ ? onDemand_.note() : asked_ ? note_ : ""; }
  // Workers are forked from a process without other threads: the early start's ends here.
  void wait() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  PythonEnvironmentOnDemand onDemand_;
  bool early_ = false, asked_ = false;
  std::thread thread_;
  PythonEnvironment environment_;
  std::string note_;
};

// `work` on a thread of its own from construction to join(), which rethrows what it threw; run at
// once, in the caller's thread, when `alone` (a run asked for one job).
class BackgroundTask {
 public:
  BackgroundTask(bool alone, std::function<void()> work) {
    if (alone) work();
    else thread_ = std::thread([this, work = std::move(work)] { run(work); });
  }
  ~BackgroundTask() {
    if (thread_.joinable()) thread_.join();
  }
  void join() {
    if (thread_.joinable()) thread_.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void run(const std::function<void()>& work) {
    try {
      work();
    } catch (...) {
      error_ = std::current_exception();
    }
  }
  std::exception_ptr error_;
  std::thread thread_;
};

// What the run's files tell about each other, gathered before any file is linted: the project's
// group-creating functions, in Python files and notebooks (when NM401 runs), its functions that
// issue point-to-point transfers and are called in loops (when NM502 runs), and the aliases its
// C++ headers give the legacy class (when NM201 or NM204 runs). One read of the Python files,
// notebooks and headers, on `jobs` threads that end before the workers are forked; of the Python,
// only the statements around calls of group creators and wrappers are parsed (group_wrappers.h).
// The Python texts it reads stay in `preread` for the workers, which then need not read them again.
ProjectTables projectTables(const std::vector<fs::path>& files, const LintConfig& config, unsigned jobs,
                            std::vector<std::optional<SourceRead>>& preread) {
  bool wrappers = ruleOn(config, "NM401");
  bool pointToPoint = ruleOn(config, "NM502");
  bool aliases = ruleOn(config, "NM201") || ruleOn(config, "NM204");
  bool deviceReturns = ruleOn(config, "NM102");
  bool callerValues = anyPythonRuleOn(config);
  std::vector<size_t> wanted;
  for (size_t i = 0; i < files.size(); ++i) {
    std::optional<Language> language = languageByName(files[i]);
    bool python = language == Language::Python;
    bool header = language == Language::Cpp && isCppHeader(files[i].filename().string());
    if (((wrappers || pointToPoint || deviceReturns || callerValues) && python) || (aliases && header)) wanted.push_back(i);
  }
  size_t pythonFiles = static_cast<size_t>(std::count_if(wanted.begin(), wanted.end(), [&](size_t i) {
    return languageByName(files[i]) == Language::Python;
  }));
  RunInterpreter environment(config.python, wrappers && config.environment && pythonFiles >= RunInterpreter::kProjectFiles);
  std::vector<std::string_view> texts(wanted.size());  // into `preread`, or `notebooks`
  std::vector<std::string> modules(wanted.size());     // each Python file's, for its imports to name
  std::vector<std::string> notebooks(wanted.size());
  std::vector<std::set<std::string>> found(wanted.size());
  std::error_code cwdError;
  const fs::path cwd = fs::current_path(cwdError);  // once: fs::absolute asks the kernel per call
  std::atomic<size_t> next{0};
  auto read = [&] {
    for (size_t k = next++; k < wanted.size(); k = next++) {
      const fs::path& path = files[wanted[k]];
      std::string warning;
      std::optional<std::string> text = readSource(path, config, warning);
      if (!text) continue;  // the lint pass reads it again and warns about it
      if (languageByName(path) == Language::Cpp) {
        found[k] = aliasesOf(*text, "ProcessGroupNCCL");
      } else {
        preread[wanted[k]] = SourceRead{std::move(text), std::move(warning)};
        const std::string& kept = *preread[wanted[k]]->text;
        if (path.extension() == ".ipynb") notebooks[k] = notebookPython(kept);
        texts[k] = path.extension() == ".ipynb" ? std::string_view(notebooks[k]) : std::string_view(kept);
        fs::path absolute = path.is_absolute() || cwdError ? path : cwd / path;
        modules[k] = pythonModuleOf(absolute.lexically_normal().generic_string());
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned j = 1; j < std::min<size_t>(jobs, wanted.size()); ++j) threads.emplace_back(read);
  read();
  for (std::thread& t : threads) t.join();
  ProjectTables tables;
  for (const std::set<std::string>& names : found) tables.legacyClassAliases.insert(names.begin(), names.end());
  if (callerValues) {
    PythonTexts python = pythonTexts(files, wanted, texts, modules);
    tables.parametersCallersPass = parametersCallersPass(python.texts, python.modules, jobs);
  }
  if (deviceReturns) tables.functionReturns = deviceSelectionReturns(files, wanted, texts, modules, config);
  if (!wrappers && !pointToPoint) return tables;
  // The tables share one survey of the sources (group_wrappers.h).
  std::shared_ptr<const TreeSurvey> survey = surveyTree(texts, jobs);
  // NM502's table and the group table read the same texts apart: the first is built beside the
  // second, whose rounds leave a core idle while their largest source is parsed.
  BackgroundTask loopSites(jobs < 2 || !pointToPoint || !wrappers, [&] {
    if (pointToPoint) tables.functionsCalledInLoops = pointToPointLoopSites(files, wanted, texts, modules, jobs, *survey);
  });
  if (!wrappers) return tables;
  // The environment lint runs in resolves the imports that leave the tree (python_environment.h):
  // installed modules are read only when the table needs one (group_wrappers.h).
  ModuleReader reader;
  if (config.environment) reader = [&](const std::string& dotted) { return environment.moduleSource(dotted); };
  GroupWrapperTable table =
      buildGroupWrapperTable(texts, modules, jobs, reader, groupWrapperCatalogue(), config.groupSitesThreshold, survey.get());
  loopSites.join();
  environment.wait();
  if (!environment.note().empty()) tables.notes.push_back(environment.note());
  tables.groupWrappers = std::move(table.keys);
  tables.groupWrapperSwitches = std::move(table.switches);
  tables.treeModules.insert(modules.begin(), modules.end());
  for (const ProjectSite& site : table.sites) {
    const fs::path& path = files[wanted[site.source]];
    if (path.extension() == ".ipynb") continue;  // a notebook's findings are placed by cell
    tables.resolvedCalls[absoluteKey(path)].push_back(
        {static_cast<int>(site.row) + 1, static_cast<int>(site.column) + 1, site.callee, site.via});
  }
  return tables;
}

// Loaded once here, before the workers are forked, rather than in each of them; only when the run
// has C/C++ files. Without it none of them could be linted: the run stops (CppFrontendMissing).
void loadCppFrontendForWorkers(const std::vector<fs::path>& files) {
  bool cpp = std::any_of(files.begin(), files.end(), [](const fs::path& f) { return languageByName(f) == Language::Cpp; });
  if (cpp) cppFrontendModule();
}

// The languages of `files` by their names; empty (every language) when a file is known only by its
// first line (a script's shebang), which is read later.
std::set<Language> languagesOf(const std::vector<fs::path>& files) {
  std::set<Language> languages;
  for (const fs::path& file : files) {
    std::optional<Language> language = languageByName(file);
    if (!language) return {};
    languages.insert(*language);
  }
  return languages;
}

LintReport merge(std::vector<FileResult>& results) {
  LintReport report;
  for (FileResult& r : results) {
    report.filesScanned += r.scanned;
    report.filesParsed += r.parsed;
    report.suppressed += r.suppressed;
    std::move(r.findings.begin(), r.findings.end(), std::back_inserter(report.findings));
    std::move(r.warnings.begin(), r.warnings.end(), std::back_inserter(report.warnings));
  }
  std::stable_sort(report.findings.begin(), report.findings.end(), lessFinding);
  return report;
}

}  // namespace

std::optional<Language> languageOf(const fs::path& path) { return languageByName(path); }

LintReport lintPaths(const std::vector<fs::path>& paths, const LintOptions& options) {
  validateSelectors(options.config);
  std::vector<fs::path> files = discoverFiles(paths, options.config);
  loadCppFrontendForWorkers(files);
  unsigned jobs = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::optional<SourceRead>> preread(files.size());
  ProjectTables tables = projectTables(files, options.config, jobs, preread);
  std::vector<std::string> notes = std::move(tables.notes);
  RulePlan plan(options.config, std::move(tables), languagesOf(files));
  std::vector<FileResult> results(files.size());
  size_t finished = 0;
  auto progress = [&] {
    if (options.progress) options.progress(++finished, files.size());
  };
  // Largest first, so that no worker is left with a big file while the others are done.
  std::vector<size_t> order(files.size());
  {
    std::vector<uintmax_t> sizes(files.size());
    for (size_t i = 0; i < files.size(); ++i) {
      std::error_code ec;
      // A file read already has its size at hand: a stat per file is a path walk in the kernel.
      sizes[i] = preread[i] && preread[i]->text ? preread[i]->text->size() : fs::file_size(files[i], ec);
      order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  }
  IsolatedWork work;
  work.count = files.size();
  work.workers = jobs;
  work.timeout = options.fileTimeout;
  work.run = [&](size_t k) {
    const std::optional<SourceRead>& read = preread[order[k]];
    return encodeFileResult(lintFile(files[order[k]], options, plan, read ? &*read : nullptr));
  };
  work.done = [&](size_t k, std::string bytes) {
    size_t i = order[k];
    if (std::optional<FileResult> result = decodeFileResult(bytes)) results[i] = std::move(*result);
    else results[i].warnings.push_back(files[i].string() + ": skipped: its result was lost on the way from the linter's worker; run again");
    progress();
  };
  work.failed = [&](size_t k, const std::string& why) {
    size_t i = order[k];
    results[i].warnings.push_back(files[i].string() + ": skipped: " + why +
                                  "; the other files are linted. --exclude it, and report the file if it is valid source");
    progress();
  };
  runIsolated(work);
  LintReport report = merge(results);
  report.warnings.insert(report.warnings.begin(), notes.begin(), notes.end());
  return report;
}

LintReport lintSource(const fs::path& path, const std::string& text, const LintOptions& options) {
  validateSelectors(options.config);
  std::optional<Language> language = languageOf(path);
  if (!language) throw std::invalid_argument(path.string() + ": not a Python, C/C++/CUDA, shell, Dockerfile or config file name");
  RulePlan plan(options.config);
  std::vector<FileResult> results;
  results.push_back(lintText(path, text, *language, options, plan));
  return merge(results);
}

}  // namespace nccl_migrate::lint
