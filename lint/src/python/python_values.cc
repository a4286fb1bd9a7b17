// Value tracing over a Python file's SourceModel: what an argument is made of, with names replaced
// by the values Python's scoping lets reach them (the function's own bindings, else the module's)
// and calls of the file's functions by what they return. Rules ask it for evidence ("the device
// comes from LOCAL_RANK") instead of reading names. At its end, what the tree's callers choose for a
// parameter's string default (python_values.h), which decides whether the default is such a value.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "nccl_migrate/lint/source_model.h"
#include "python_frontend.h"
#include "python_values.h"
#include "python_text.h"

namespace nccl_migrate::lint {
namespace {

constexpr int kMaxSteps = 4;    // names and calls followed, one after another
constexpr size_t kMaxNodes = 96;  // per traced value: a name used everywhere stays cheap

bool before(const Location& a, const Location& b) { return a.line < b.line || (a.line == b.line && a.column < b.column); }

// Whether two places stand in different arms of one `if`, so that no run passes both.
bool exclusive(const std::vector<Call::Arm>& a, const std::vector<Call::Arm>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i].statement != b[i].statement) return false;
    if (a[i].index != b[i].index) return true;
  }
  return false;
}

// Whether every run that reaches a place with `inner` arms has passed one with `outer` arms in
// the same function: `outer` stands in no arm that `inner` is not in too.
bool alwaysPassed(const std::vector<Call::Arm>& outer, const std::vector<Call::Arm>& inner) {
  if (outer.size() > inner.size()) return false;
  for (size_t i = 0; i < outer.size(); ++i) {
    if (outer[i].statement != inner[i].statement || outer[i].index != inner[i].index) return false;
  }
  return true;
}

// Where a value is read: its function and the arms around it.
struct Place {
  int functionId;
  const std::vector<Call::Arm>* branches;
  Location where;
};

Place placeOf(const Binding& b) { return {b.functionId, &b.branches, b.where}; }

class Tracer {
 public:
  explicit Tracer(const SourceModel& model) : model_(model) {}

  TracedValue run(int root, const Place& place) {
    copy(root, place, 0);
    return std::move(out_);
  }

 private:
  // Copies the node at `index` (in the model) and what it is made of into the result, following
  // names and calls; returns its index in the result.
  int copy(int index, const Place& place, int steps) {
    const ValueNode& node = model_.values[static_cast<size_t>(index)];
    if (out_.nodes.size() >= kMaxNodes) return append({ValueNode::Kind::Unknown, "...", "", {}, node.where});
    if (place.functionId != kOtherFileReturns && steps < kMaxSteps &&
        (node.kind == ValueNode::Kind::Name || node.kind == ValueNode::Kind::Attribute)) {
      std::vector<const Binding*> found = reaching(node.text, place);
      if (int followed = follow(node, found, steps); followed >= 0) return followed;
    }
    // Another file's values (kOtherFileReturns) were traced in that file: its names and calls
    // mean nothing here.
    bool here = place.functionId != kOtherFileReturns;
    if (here && steps < kMaxSteps) {
      if (int read = environmentRead(node, place, steps); read >= 0) return read;
    }
    if (here && steps < kMaxSteps && node.kind == ValueNode::Kind::Call) {
      std::vector<const Binding*> found = returnsOf(node.text);
      if (int followed = follow(node, found, steps); followed >= 0) return followed;
    }
    int at = append({node.kind, node.text, node.keyword, {}, node.where});
    for (int operand : node.operands) {
      int copied = copy(operand, place, steps);
      // A keyword names the argument, whatever value stands in for it.
      const std::string& keyword = model_.values[static_cast<size_t>(operand)].keyword;
      if (!keyword.empty()) out_.nodes[static_cast<size_t>(copied)].keyword = keyword;
      out_.nodes[static_cast<size_t>(at)].operands.push_back(copied);
    }
    return at;
  }

  // The values `found` bind, in place of `node`: the one, or OneOf them all; a binding with no
  // value read here stands as `node` itself. -1 when nothing was found or nothing has a value.
  int follow(const ValueNode& node, const std::vector<const Binding*>& found, int steps) {
    bool anyValue = false;
    for (const Binding* b : found) anyValue |= b->value >= 0;
    if (!anyValue) return -1;
    if (found.size() == 1) return copy(found.front()->value, placeOf(*found.front()), steps + 1);
    int at = append({ValueNode::Kind::OneOf, node.text, "", {}, node.where});
    for (const Binding* b : found) {
      int copied = b->value >= 0 ? copy(b->value, placeOf(*b), steps + 1)
                                 : append({node.kind, node.text, "", {}, b->where});
      out_.nodes[static_cast<size_t>(at)].operands.push_back(copied);
    }
    return at;
  }

  // An item of the environment by a known key, read through a name or dict that holds it
  // (kEnviron): `env["RANK"]` and `env.get("RANK", d)` as os.environ's; -1 for anything else.
  int environmentRead(const ValueNode& node, const Place& place, int steps) {
    using Kind = ValueNode::Kind;
    if (node.kind == Kind::Item && node.operands.size() == 2) {
      const ValueNode& key = model_.values[static_cast<size_t>(node.operands[1])];
      if (key.kind != Kind::Literal || !holdsEnvironment(model_.values[static_cast<size_t>(node.operands[0])], place, steps)) return -1;
      return append({Kind::Environment, key.text, "", {}, node.where});
    }
    if (node.kind != Kind::Call || !node.text.ends_with(".get") || node.operands.empty() || node.operands.size() > 2) return -1;
    const ValueNode& key = model_.values[static_cast<size_t>(node.operands[0])];
    std::string receiver = node.text.substr(0, node.text.size() - 4);
    if (key.kind != Kind::Literal || !key.keyword.empty() || !holdsEnvironment({Kind::Name, receiver, "", {}, node.where}, place, steps)) return -1;
    int at = append({Kind::Environment, key.text, "", {}, node.where});
    if (node.operands.size() == 2) {
      int fallback = copy(node.operands[1], place, steps + 1);
      out_.nodes[static_cast<size_t>(at)].operands.push_back(fallback);
    }
    return at;
  }

  // Whether a value is the environment (kEnviron) wherever it may come from here.
  bool holdsEnvironment(const ValueNode& n, const Place& place, int steps) const {
    using Kind = ValueNode::Kind;
    if (n.kind == Kind::Attribute && n.text == kEnviron) return true;
    if ((n.kind != Kind::Name && n.kind != Kind::Attribute) || steps >= kMaxSteps) return false;
    std::vector<const Binding*> found = reaching(n.text, place);
    for (const Binding* b : found)
      if (b->value < 0 || !holdsEnvironment(model_.values[static_cast<size_t>(b->value)], placeOf(*b), steps + 1)) return false;
    return !found.empty();
  }

  int append(ValueNode node) {
    out_.nodes.push_back(std::move(node));
    return static_cast<int>(out_.nodes.size()) - 1;
  }

  // The bindings of `name` that may hold where `place` reads it: in its function, those before it
  // not in another arm of an `if`, latest first, back to one that always runs on the way; in a
  // function that binds the name nowhere, the module's (the last that always runs and those
  // after it, since the function may run once the module has run).
  std::vector<const Binding*> reaching(const std::string& name, const Place& place) const {
    std::vector<const Binding*> out;
    bool boundInFunction = false;
    for (auto it = model_.bindings.rbegin(); it != model_.bindings.rend(); ++it) {
      const Binding& b = *it;
      if (b.name != name || b.functionId != place.functionId) continue;
      boundInFunction = true;
      if (!before(b.where, place.where) || exclusive(b.branches, *place.branches)) continue;
      out.push_back(&b);
      if (alwaysPassed(b.branches, *place.branches)) break;
    }
    if (boundInFunction || place.functionId < 0) return out;
    for (auto it = model_.bindings.rbegin(); it != model_.bindings.rend(); ++it) {
      if (it->name != name || it->functionId != -1) continue;
      out.push_back(&*it);
      if (it->branches.empty()) break;
    }
    return out;
  }

  // What a call of the file's function `name` returns, when the file defines one function of
  // that name (a method's name is left alone: which class's it is is not known here), or of
  // another file's function the frontend recorded under that name (kOtherFileReturns).
  std::vector<const Binding*> returnsOf(const std::string& name) const {
    std::vector<const Binding*> out;
    for (const Binding& r : model_.returns)
      if (r.functionId == kOtherFileReturns && r.name == name) return {&r};
    int id = -1;
    for (size_t i = 0; i < model_.functions.size(); ++i) {
      if (model_.functions[i] != name) continue;
      if (id >= 0) return out;
      id = static_cast<int>(i);
    }
    if (id < 0) return out;
    for (const Binding& r : model_.returns)
      if (r.functionId == id) out.push_back(&r);
    return out;
  }

  const SourceModel& model_;
  TracedValue out_;
};

}  // namespace

TracedValue traceValue(const SourceModel& model, const Call& call, const Argument& argument) {
  if (argument.value < 0 || static_cast<size_t>(argument.value) >= model.values.size()) return {};
  return Tracer(model).run(argument.value, {call.functionId, &call.branches, call.where});
}

TracedValue traceBinding(const SourceModel& model, const Binding& binding) {
  if (binding.value < 0 || static_cast<size_t>(binding.value) >= model.values.size()) return {};
  return Tracer(model).run(binding.value, placeOf(binding));
}

std::string parameterAt(const SourceModel& model, int functionId, size_t index) {
  for (const Binding& b : model.bindings) {
    if (b.name != kParameters || b.functionId != functionId || b.value < 0) continue;
    const ValueNode& list = model.values[static_cast<size_t>(b.value)];
    return index < list.operands.size() ? model.values[static_cast<size_t>(list.operands[index])].text : "";
  }
  return "";
}

const Binding* armCondition(const SourceModel& model, int functionId, const std::vector<Call::Arm>& branches,
                            size_t depth, int index) {
  if (depth >= branches.size()) return nullptr;
  for (const Binding& b : model.bindings) {
    if (b.name != kArmCondition || b.functionId != functionId || b.branches.size() != depth + 1) continue;
    if (b.branches[depth].statement != branches[depth].statement || b.branches[depth].index != index) continue;
    if (alwaysPassed(std::vector<Call::Arm>(b.branches.begin(), b.branches.end() - 1), branches)) return &b;
  }
  return nullptr;
}

}  // namespace nccl_migrate::lint

// Which parameters the tree's callers choose (python_values.h): one scan of the texts for the
// definitions with a string default, then one for the calls of their names.
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
  std::string name;
  std::vector<Parameter> parameters;  // those with a string default
  bool method = false;                // its first parameter is self or cls
};

// A definition's parameters from its list's items: `*` and `*args` end the positional ones.
Definition definitionOf(std::string_view name, const std::vector<std::string_view>& items) {
  Definition d{std::string(name), {}, false};
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
std::vector<DefinitionLine> addDefinitions(std::string_view text, std::unordered_map<std::string, std::vector<Callable>>& callables) {
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
    auto definition = std::make_shared<Definition>(definitionOf(name, listItems(text, at, &body)));
    lines.push_back({offset, body, indent, definition});
    if (definition->parameters.empty()) continue;
    callables[definition->name].push_back({definition, false});
    if (name == "__init__" && definition->method && !classes.empty() && classes.back().indent < indent)
      callables[classes.back().name].push_back({definition, true});
  }
  return lines;
}

// The definition whose body `at` stands in: the last to start before it at a smaller indentation
// than its line's (by lines, not a parse); none at module level.
const DefinitionLine* enclosingDefinition(const std::vector<DefinitionLine>& lines, std::string_view text, size_t at) {
  size_t line = text.rfind('\n', at);
  line = line == std::string_view::npos ? 0 : line + 1;
  size_t indent = firstNonBlank(text, line) - line;
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
struct CallSite {
  std::string_view text;
  size_t at = 0;
  const DefinitionLine* in = nullptr;
};

// The last `name = value` statement in the site's function (or module, for a call outside any)
// before the call; empty when there is none.
std::string_view lastAssignment(const CallSite& site, std::string_view name) {
  std::string_view last;
  size_t from = site.in ? site.in->body : 0;  // its parameters are no assignments
  for (size_t at = site.text.find(name, from); at != std::string_view::npos && at < site.at; at = site.text.find(name, at + 1)) {
    size_t line = site.text.rfind('\n', at);
    line = line == std::string_view::npos ? 0 : line + 1;
    if (site.text.find_first_not_of(" \t", line) != at) continue;  // not where a statement starts
    std::string_view rest = site.text.substr(at + name.size(), std::min<size_t>(site.at - at - name.size(), 4096));
    rest = rest.substr(0, rest.find('\n'));
    size_t eq = assignmentAt(rest);
    if (eq == std::string_view::npos || (!trimmed(rest.substr(0, eq)).empty() && !trimmed(rest.substr(0, eq)).starts_with(":"))) continue;
    last = trimmed(rest.substr(eq + 1));
  }
  return last;
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
    if (p.name == value && p.byDefault == byDefault) return {Passed::Kind::Forwarded, callerParameterKey(site.in->definition->name, p.name)};
  return {};
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
    std::string key = callerParameterKey(d.name, p.name);
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

std::string callerParameterKey(std::string_view function, std::string_view parameter) {
  return std::string(function) + ":" + std::string(parameter);
}

std::set<std::string> parametersCallersPass(const std::vector<std::string_view>& texts, unsigned jobs) {
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
  inParallel([&](unsigned part, size_t t) { definitions[t] = addDefinitions(texts[t], found[part]); });
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
    for (size_t open = text.find('('); open != std::string_view::npos; open = text.find('(', open + 1)) {
      size_t start = open;
      while (start > 0 && identifierChar(text[start - 1])) --start;
      if (start == open) continue;
      name.assign(text.substr(start, open - start));
      auto it = callables.find(name);
      if (it == callables.end() || definedHere(text, start)) continue;
      std::vector<std::string_view> items = listItems(text, open);
      bool onObject = start > 0 && text[start - 1] == '.';
      CallSite site{text, start, enclosingDefinition(definitions[t], text, start)};
      for (const Callable& callable : it->second) addPassed(callable, onObject, items, site, passedIn[part], forwardedIn[part]);
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
