// Which parameters a Python tree's callers choose (python_parameter_callers.h): one scan of the
// texts for the definitions with a string default, then one for the calls of their names. Text, not a
// parse: it runs over every Python file of the tree before the lint pass.
#include "python/python_parameter_callers.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>

#include "python/python_text.h"

namespace nccl_migrate::lint {
namespace {

constexpr size_t kMaxList = 16 * 1024;  // a parameter or argument list longer than this is left unread

bool identifierChar(char c) { return isIdentifierByte(c); }

std::string_view trimmed(std::string_view s) {
  while (true) {
    size_t from = s.find_first_not_of(" \t\r\n\\");
    if (from == std::string_view::npos) return {};
    s.remove_prefix(from);
    if (s.front() != '#') break;
    size_t newline = s.find('\n');  // a comment line inside a list, before the item
    if (newline == std::string_view::npos) return {};
    s.remove_prefix(newline + 1);
  }
  return s.substr(0, s.find_last_not_of(" \t\r\n\\") + 1);
}

// Past the end of the string literal whose opening quote is at `at`: its closing quote, or the end
// of its line when a one-line string never closes there.
size_t stringEnd(std::string_view text, size_t at) {
  char quote = text[at];
  bool triple = at + 2 < text.size() && text[at + 1] == quote && text[at + 2] == quote;
  for (size_t i = at + (triple ? 3 : 1); i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\') {
      ++i;
    } else if (c == quote && (!triple || (i + 2 < text.size() && text[i + 1] == quote && text[i + 2] == quote))) {
      return i + (triple ? 3 : 1);
    } else if (c == '\n' && !triple) {
      return i;
    }
  }
  return text.size();
}

// The items of the bracketed list whose `(` is at `open`, trimmed (nothing when it does not close
// within kMaxList bytes): strings, comments and nested brackets are stepped over. `end`, when
// given, gets where the list ends (past its `)`).
std::vector<std::string_view> listItems(std::string_view text, size_t open, size_t* end = nullptr) {
  std::vector<std::string_view> items;
  int depth = 0;
  size_t start = open + 1;
  auto add = [&](size_t stop) {
    if (std::string_view item = trimmed(text.substr(start, stop - start)); !item.empty()) items.push_back(item);
  };
  for (size_t i = open, limit = std::min(text.size(), open + kMaxList); i < limit; ++i) {
    char c = text[i];
    if (c == '"' || c == '\'') {
      i = stringEnd(text, i) - 1;
    } else if (c == '#') {
      i = text.find('\n', i);
      if (i == std::string_view::npos) return {};
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if (c == ')' || c == ']' || c == '}') {
      if (--depth > 0) continue;
      add(i);
      if (end) *end = i + 1;
      return items;
    } else if (c == ',' && depth == 1) {
      add(i);
      start = i + 1;
    }
  }
  return {};
}

// The value of a plain string literal that is the whole of `s` (`"gloo"`, `r'x'`); none for anything
// else, an f-string or bytes included.
std::optional<std::string> plainString(std::string_view s) {
  size_t quote = s.find_first_of("\"'");
  if (quote == std::string_view::npos || quote > 2) return std::nullopt;
  for (char c : s.substr(0, quote))
    if (c != 'r' && c != 'R' && c != 'u' && c != 'U') return std::nullopt;
  if (stringEnd(s, quote) != s.size()) return std::nullopt;
  size_t fence = s.size() - quote >= 6 && s[quote + 1] == s[quote] && s[quote + 2] == s[quote] ? 3 : 1;
  return std::string(s.substr(quote + fence, s.size() - quote - 2 * fence));
}

// Where `name = value` has its `=`, outside brackets and strings (an annotation may hold brackets); npos if none.
size_t assignmentAt(std::string_view item) {
  int depth = 0;
  for (size_t i = 0; i < item.size(); ++i) {
    char c = item[i];
    if (c == '"' || c == '\'') i = stringEnd(item, i) - 1;
    else if (c == '(' || c == '[' || c == '{') ++depth;
    else if (c == ')' || c == ']' || c == '}') --depth;
    else if (c == '=' && depth == 0) {
      bool comparison = (i + 1 < item.size() && item[i + 1] == '=') || (i > 0 && std::strchr("=!<>", item[i - 1]));
      if (!comparison) return i;
      ++i;
    }
  }
  return std::string_view::npos;
}

std::string_view leadingIdentifier(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && identifierChar(s[n])) ++n;
  return s.substr(0, n);
}

struct Parameter {
  std::string name;
  int position = -1;                  // among the positional parameters; -1 for a keyword-only one
  std::optional<std::string> byDefault;  // its string default
};

struct Definition {
  std::string module;  // the defining text's, as the run names it (empty: unknown)
  std::string name;
  std::vector<Parameter> parameters;  // those with a string default
  bool method = false;                // its first parameter is self or cls
};

// A definition's parameters from its list's items: `*` and `*args` end the positional ones.
Definition definitionOf(std::string_view name, const std::vector<std::string_view>& items) {
  Definition d{"", std::string(name), {}, false};
  int position = 0;
  for (std::string_view item : items) {
    if (item.starts_with("*")) {
      position = -1;
      continue;
    }
    if (item == "/") continue;
    std::string_view parameter = leadingIdentifier(item);
    if (parameter.empty()) continue;
    if (position == 0) d.method = parameter == "self" || parameter == "cls";
    size_t eq = assignmentAt(item);
    std::optional<std::string> byDefault = eq == std::string_view::npos ? std::nullopt : plainString(trimmed(item.substr(eq + 1)));
    if (byDefault) d.parameters.push_back({std::string(parameter), position, std::move(byDefault)});
    if (position >= 0) ++position;
  }
  return d;
}

// A function's definitions with a string default, by the names a call may reach them through: the
// function's own, and for an `__init__` its class's (a constructor call). The flag says that a call
// through that name passes `self` itself: a constructor.
struct Callable {
  std::shared_ptr<const Definition> definition;
  bool constructor = false;
  size_t text = 0;  // which text defines it
};

// Where a text's functions start, in order: for the function a call stands in.
struct DefinitionLine {
  size_t offset = 0;  // where its line starts
  size_t body = 0;    // where its parameter list ends
  size_t indent = 0;
  std::shared_ptr<const Definition> definition;  // its name, and its parameters with a string default
};

// Adds the definitions of `text` with a string default to `callables`; returns where every
// definition of the text starts.
std::vector<DefinitionLine> addDefinitions(std::string_view text, size_t index, const std::string& module,
                                           std::unordered_map<std::string, std::vector<Callable>>& callables) {
  struct Class {
    size_t indent;
    std::string name;
  };
  std::vector<Class> classes;
  std::vector<DefinitionLine> lines;
  for (size_t line = 0; line < text.size();) {
    size_t end = text.find('\n', line);
    if (end == std::string_view::npos) end = text.size();
    std::string_view row = text.substr(line, end - line);
    size_t indent = firstNonBlank(row);
    size_t offset = line;
    line = end + 1;
    if (indent == std::string_view::npos || row[indent] == '#') continue;
    while (!classes.empty() && classes.back().indent >= indent) classes.pop_back();
    std::string_view statement = row.substr(indent);
    if (statement.starts_with("class ")) {
      classes.push_back({indent, std::string(leadingIdentifier(trimmed(statement.substr(6))))});
      continue;
    }
    if (statement.starts_with("async ")) statement = trimmed(statement.substr(6));
    if (!statement.starts_with("def ")) continue;
    std::string_view rest = trimmed(statement.substr(4));
    std::string_view name = leadingIdentifier(rest);
    size_t open = rest.find_first_not_of(" \t", name.size());
    if (name.empty() || open == std::string_view::npos || rest[open] != '(') continue;
    size_t at = static_cast<size_t>(rest.data() - text.data()) + open;
    size_t body = at;
    // A class's __init__ is reached by calling the class, and known by the class's name: every class
    // has one, and `super().__init__(...)` or `Base.__init__(self, ...)` of another class is no call
    // of this one (a subclass passing its own value there is not followed).
    bool constructor = name == "__init__" && !classes.empty() && classes.back().indent < indent;
    if (constructor) name = classes.back().name;
    Definition read = definitionOf(name, listItems(text, at, &body));
    read.module = module;
    auto definition = std::make_shared<Definition>(std::move(read));
    lines.push_back({offset, body, indent, definition});
    if (definition->parameters.empty()) continue;
    if (constructor && !definition->method) continue;
    callables[definition->name].push_back({definition, constructor, index});
  }
  return lines;
}

// The definition whose body `at` stands in: the last to start before it at a smaller indentation
// than its line's (by lines, not a parse); none at module level.
const DefinitionLine* enclosingDefinition(const std::vector<DefinitionLine>& lines, std::string_view text, size_t at) {
  size_t line = text.rfind('\n', at);
  line = line == std::string_view::npos ? 0 : line + 1;
  size_t indent = firstNonBlank(text, line) - line;
  if (indent == 0) return nullptr;  // a statement at the module's top: no definition holds it
  auto after = std::upper_bound(lines.begin(), lines.end(), at, [](size_t a, const DefinitionLine& d) { return a < d.offset; });
  for (auto it = std::make_reverse_iterator(after); it != lines.rend(); ++it)
    if (it->indent < indent) return &*it;
  return nullptr;
}

// Whether the text before `name` (at `at`) makes it a definition's name, not a call's.
bool definedHere(std::string_view text, size_t at) {
  std::string_view before = text.substr(0, at);
  size_t end = before.find_last_not_of(" \t");
  if (end == std::string_view::npos) return false;
  before = before.substr(0, end + 1);
  for (std::string_view keyword : {"def", "class"}) {
    if (!before.ends_with(keyword)) continue;
    size_t start = before.size() - keyword.size();
    if (start == 0 || !identifierChar(before[start - 1])) return true;
  }
  return false;
}

// What a call passes for a parameter: its default itself, another value, or the value a parameter
// of the calling function holds (`backend=backend` forwarding the caller's own, by its key).
struct Passed {
  enum class Kind { Default, Other, Forwarded } kind = Kind::Other;
  std::string from;  // Forwarded: callerParameterKey of the calling function's parameter
};

// Where a call stands, to read a name it passes: the text, the call's offset, and the definition it
// stands in (none at module level).
// The `name = value` statements of one function (or a module's top, `from` 0), by where they stand,
// read up to `scanned` and extended as later calls ask: a module may hold thousands of calls passing
// one name, and each reads only what the ones before it did not.
struct AssignmentsSeen {
  size_t scanned = 0;
  std::vector<std::pair<size_t, std::string_view>> found;  // offset, assigned value
};
using Assignments = std::map<std::pair<size_t, std::string>, AssignmentsSeen>;

struct CallSite {
  std::string_view text;
  size_t at = 0;
  const DefinitionLine* in = nullptr;
  Assignments* assignments = nullptr;  // this text's, filled as names are asked for
};

// The last `name = value` statement in the site's function (or module, for a call outside any)
// before the call; empty when there is none.
std::string_view lastAssignment(const CallSite& site, std::string_view name) {
  size_t from = site.in ? site.in->body : 0;  // its parameters are no assignments
  auto [it, fresh] = site.assignments->try_emplace({from, std::string(name)});
  AssignmentsSeen& seen = it->second;
  if (fresh) seen.scanned = from;
  for (size_t at = site.text.find(name, seen.scanned); at != std::string_view::npos && at < site.at;
       at = site.text.find(name, at + 1)) {
    size_t line = site.text.rfind('\n', at);
    line = line == std::string_view::npos ? 0 : line + 1;
    if (firstNonBlank(site.text, line) != at) continue;  // not where a statement starts
    std::string_view rest = site.text.substr(at + name.size(), std::min<size_t>(site.text.size() - at - name.size(), 4096));
    rest = rest.substr(0, rest.find('\n'));
    size_t eq = assignmentAt(rest);
    if (eq == std::string_view::npos || (!trimmed(rest.substr(0, eq)).empty() && !trimmed(rest.substr(0, eq)).starts_with(":"))) continue;
    seen.found.emplace_back(at, trimmed(rest.substr(eq + 1)));
  }
  seen.scanned = std::max(seen.scanned, site.at);
  // The last before the call (calls of one function come in order, so every one found is).
  auto after = std::lower_bound(seen.found.begin(), seen.found.end(), std::make_pair(site.at, std::string_view()));
  return after == seen.found.begin() ? std::string_view() : std::prev(after)->second;
}

// What the argument text `value` passes for a parameter whose default is `byDefault`: a string
// literal is the default or another value; a name is read where the call stands: its last
// assignment there, else the calling function's parameter of that name, whose own callers then
// decide (when its default is the same string); anything else is another value.
Passed passedValue(std::string_view value, const std::optional<std::string>& byDefault, const CallSite& site) {
  if (std::optional<std::string> literal = plainString(value)) return {*literal == byDefault ? Passed::Kind::Default : Passed::Kind::Other, ""};
  if (value.empty() || leadingIdentifier(value).size() != value.size() || std::isdigit(static_cast<unsigned char>(value[0]))) return {};
  if (std::string_view assigned = lastAssignment(site, value); !assigned.empty()) {
    std::optional<std::string> literal = plainString(assigned);
    return {literal && *literal == byDefault ? Passed::Kind::Default : Passed::Kind::Other, ""};
  }
  if (!site.in) return {};
  for (const Parameter& p : site.in->definition->parameters)
    if (p.name == value && p.byDefault == byDefault) return {Passed::Kind::Forwarded, callerParameterKey(site.in->definition->module, site.in->definition->name, p.name)};
  return {};
}

// Whether `text` imports `module` or a name from it: an import statement's line (`from pkg.utils
// import f`, `import pkg.utils as u`, `from pkg import utils`) that writes the module's last name as
// a word. A word elsewhere (`torch.utils.data` in code, a comment) is no import of the tree's module.
bool namesModule(std::string_view text, const std::string& module) {
  if (module.empty()) return true;
  std::string_view last = std::string_view(module).substr(module.rfind('.') + 1);
  for (size_t at = text.find(last); at != std::string_view::npos; at = text.find(last, at + 1)) {
    bool startsWord = at == 0 || !isIdentifierByte(text[at - 1]);
    size_t end = at + last.size();
    bool endsWord = end == text.size() || !isIdentifierByte(text[end]);
    if (!startsWord || !endsWord) continue;
    size_t line = text.rfind('\n', at);
    line = line == std::string_view::npos ? 0 : line + 1;
    size_t first = firstNonBlank(text, line);
    if (first == std::string_view::npos || first > at) continue;
    std::string_view statement = text.substr(first, at - first);
    if (!statement.starts_with("from ") && !statement.starts_with("import ")) continue;
    // `import torch.utils` names torch's utils, not the tree's: the dotted path must end in the
    // module's own parent, or the module must stand alone (`from pkg import utils`, `import utils`).
    size_t parentEnd = module.rfind('.');
    std::string_view before = text.substr(first, at - first);
    if (before.ends_with(".")) {
      if (parentEnd == std::string::npos) continue;
      std::string_view parent = std::string_view(module).substr(0, parentEnd);
      std::string_view written = before.substr(0, before.size() - 1);
      size_t parentLast = parent.rfind('.');
      std::string_view parentName = parentLast == std::string_view::npos ? parent : parent.substr(parentLast + 1);
      if (!written.ends_with(parentName)) continue;
    }
    return true;
  }
  return false;
}

// Whether a call of `callable`'s name in text `caller` can reach it: in its own text; on an object
// for a method (whose receiver is not read); else where the caller names the defining module's
// last name, as an import of it must (`from pkg.harness import setup`, `import pkg.harness as h`).
// A name alone would join every `setup` of the tree (setuptools' in setup.py). Texts of unknown
// modules (a test's two snippets) reach by name.
// `named` keeps, for the caller's text, whether it names each defining text's module (a text is
// searched once per module, not once per call).
bool reaches(const Callable& callable, size_t caller, bool onObject, const std::vector<std::string_view>& texts,
             const std::vector<std::string>& modules, std::unordered_map<size_t, bool>& named) {
  if (callable.text == caller || modules.size() != texts.size()) return true;
  if (onObject && callable.definition->method && !callable.constructor) return true;
  if (auto known = named.find(callable.text); known != named.end()) return known->second;
  return named[callable.text] = namesModule(texts[caller], modules[callable.text]);
}

// The parameters of `callable` that a call with `items` for arguments passes a value, added to
// `passed` (another value) or `forwarded` (a calling function's parameter, by both keys).
void addPassed(const Callable& callable, bool onObject, const std::vector<std::string_view>& items, const CallSite& site,
               std::set<std::string>& passed, std::vector<std::pair<std::string, std::string>>& forwarded) {
  const Definition& d = *callable.definition;
  // Arguments by position start at `self` for a plain call of a function; a method called on its
  // object, or a class called for its `__init__`, has `self` passed already.
  int first = callable.constructor || (onObject && d.method) ? 1 : 0;
  for (const Parameter& p : d.parameters) {
    std::string key = callerParameterKey(d.module, d.name, p.name);
    if (passed.contains(key)) continue;
    int position = first;
    std::optional<std::string_view> value;  // the argument written for it
    bool unpacked = false;                  // `*args` or `**kwargs` may hold it
    for (std::string_view item : items) {
      if (item.starts_with("**")) {
        unpacked = true;
      } else if (item.starts_with("*")) {
        unpacked |= p.position >= position;
      } else if (size_t eq = assignmentAt(item); eq != std::string_view::npos && leadingIdentifier(item).size() == trimmed(item.substr(0, eq)).size()) {
        if (trimmed(item.substr(0, eq)) == p.name) value = trimmed(item.substr(eq + 1));
      } else {
        if (p.position == position) value = item;
        ++position;
      }
    }
    Passed what = unpacked ? Passed{} : value ? passedValue(*value, p.byDefault, site) : Passed{Passed::Kind::Default, ""};
    if (what.kind == Passed::Kind::Other) passed.insert(std::move(key));
    else if (what.kind == Passed::Kind::Forwarded) forwarded.emplace_back(std::move(key), std::move(what.from));
  }
}

}  // namespace

std::string callerParameterKey(std::string_view module, std::string_view function, std::string_view parameter) {
  if (!module.empty()) return std::string(module) + "." + std::string(function) + ":" + std::string(parameter);
  return std::string(function) + ":" + std::string(parameter);
}

std::set<std::string> parametersCallersPass(const std::vector<std::string_view>& texts, unsigned jobs) {
  return parametersCallersPass(texts, {}, jobs);
}

std::set<std::string> parametersCallersPass(const std::vector<std::string_view>& texts, const std::vector<std::string>& modules,
                                            unsigned jobs) {
  // Each pass reads the texts on `jobs` threads, each into its own part, merged after.
  auto inParallel = [&](auto&& work) {
    std::atomic<size_t> next{0};
    std::vector<std::thread> threads;
    auto run = [&](unsigned part) {
      for (size_t t = next++; t < texts.size(); t = next++) work(part, t);
    };
    unsigned parts = std::max(1u, static_cast<unsigned>(std::min<size_t>(jobs, texts.size())));
    for (unsigned j = 1; j < parts; ++j) threads.emplace_back(run, j);
    run(0);
    for (std::thread& thread : threads) thread.join();
    return parts;
  };
  unsigned parts = std::max(1u, jobs);
  std::vector<std::unordered_map<std::string, std::vector<Callable>>> found(parts);
  std::vector<std::vector<DefinitionLine>> definitions(texts.size());
  inParallel([&](unsigned part, size_t t) {
    definitions[t] = addDefinitions(texts[t], t, modules.size() == texts.size() ? modules[t] : std::string(), found[part]);
  });
  std::unordered_map<std::string, std::vector<Callable>> callables = std::move(found.front());
  for (size_t part = 1; part < found.size(); ++part)
    for (auto& [name, more] : found[part]) callables[name].insert(callables[name].end(), more.begin(), more.end());
  std::set<std::string> passed;
  if (callables.empty()) return passed;
  std::vector<std::set<std::string>> passedIn(parts);
  // (parameter, the caller's parameter whose value it gets)
  std::vector<std::vector<std::pair<std::string, std::string>>> forwardedIn(parts);
  inParallel([&](unsigned part, size_t t) {
    std::string_view text = texts[t];
    std::string name;
    Assignments assignments;
    std::unordered_map<size_t, bool> named;  // defining text -> whether this text names its module
    for (size_t open = text.find('('); open != std::string_view::npos; open = text.find('(', open + 1)) {
      size_t start = open;
      while (start > 0 && identifierChar(text[start - 1])) --start;
      if (start == open) continue;
      name.assign(text.substr(start, open - start));
      auto it = callables.find(name);
      if (it == callables.end() || definedHere(text, start)) continue;
      std::vector<std::string_view> items = listItems(text, open);
      bool onObject = start > 0 && text[start - 1] == '.';
      CallSite site{text, start, enclosingDefinition(definitions[t], text, start), &assignments};
      for (const Callable& callable : it->second)
        if (reaches(callable, t, onObject, texts, modules, named)) addPassed(callable, onObject, items, site, passedIn[part], forwardedIn[part]);
    }
  });
  std::vector<std::pair<std::string, std::string>> forwarded;
  for (size_t part = 0; part < parts; ++part) {
    passed.merge(passedIn[part]);
    forwarded.insert(forwarded.end(), forwardedIn[part].begin(), forwardedIn[part].end());
  }
  // A parameter forwarded from a caller's parameter gets another value where that one does.
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [parameter, from] : forwarded)
      if (passed.contains(from) && passed.insert(parameter).second) grew = true;
  }
  return passed;
}

}  // namespace nccl_migrate::lint
