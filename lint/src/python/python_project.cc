// The functions of a Python file and what each calls (see python_project.h), by one walk of the
// parse tree with a cursor: no recursion, so the file's nesting cannot exhaust a thread's stack.
// And the index that says which calls reach the project's group wrappers.
#include "python/python_project.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <set>
#include <string_view>
#include <unordered_set>
#include <utility>

#include <tree_sitter/api.h>

#include "python/python_names.h"
#include "python/python_parse.h"
#include "python/python_text.h"

extern "C" const TSLanguage* tree_sitter_python();

namespace nccl_migrate::lint {
namespace {


TSFieldId fieldId(const char* name) {
  return ts_language_field_id_for_name(tree_sitter_python(), name, static_cast<uint32_t>(std::strlen(name)));
}

TSSymbol symbol(const char* name) {
  return ts_language_symbol_for_name(tree_sitter_python(), name, static_cast<uint32_t>(std::strlen(name)), true);
}

// Looked up once: the walk compares every node's symbol with these.
struct Grammar {
  TSSymbol functionDefinition = symbol("function_definition");
  TSSymbol classDefinition = symbol("class_definition");
  TSSymbol call = symbol("call");
  TSSymbol importStatement = symbol("import_statement");
  TSSymbol importFromStatement = symbol("import_from_statement");
  TSSymbol attribute = symbol("attribute");
  TSSymbol identifier = symbol("identifier");
  TSSymbol keywordArgument = symbol("keyword_argument");
  TSSymbol string = symbol("string");
  TSSymbol stringContent = symbol("string_content");
  TSSymbol aliasedImport = symbol("aliased_import");
  TSSymbol dottedName = symbol("dotted_name");
  TSSymbol assignment = symbol("assignment");
  TSSymbol forStatement = symbol("for_statement");
  TSSymbol whileStatement = symbol("while_statement");
  TSSymbol listComprehension = symbol("list_comprehension");
  TSSymbol setComprehension = symbol("set_comprehension");
  TSSymbol dictionaryComprehension = symbol("dictionary_comprehension");
  TSSymbol generatorExpression = symbol("generator_expression");
  TSSymbol conditionalExpression = symbol("conditional_expression");
  TSSymbol parenthesizedExpression = symbol("parenthesized_expression");
  TSSymbol subscript = symbol("subscript");
  TSSymbol dictionary = symbol("dictionary");
  TSSymbol pair = symbol("pair");
  TSSymbol ifStatement = symbol("if_statement");
  TSFieldId condition = fieldId("condition");
  TSFieldId consequence = fieldId("consequence");
  TSFieldId left = fieldId("left");
  TSFieldId parameters = fieldId("parameters");
  TSFieldId right = fieldId("right");
  TSFieldId name = fieldId("name");
  TSFieldId function = fieldId("function");
  TSFieldId arguments = fieldId("arguments");
  TSFieldId attributeField = fieldId("attribute");
  TSFieldId object = fieldId("object");
  TSFieldId value = fieldId("value");
  TSFieldId alias = fieldId("alias");
  TSFieldId moduleName = fieldId("module_name");
  TSFieldId superclasses = fieldId("superclasses");
  TSFieldId key = fieldId("key");
};

const Grammar& grammar() {
  static const Grammar g;
  return g;
}

class FunctionCallWalker {
 public:
  FunctionCallWalker(std::string_view text, PythonNames& names, ModuleFacts* module)
      : text_(text), g_(grammar()), names_(names), module_(module) {}

  std::vector<FunctionCalls> walk(TSNode root) {
    TSTreeCursor cursor = ts_tree_cursor_new(root);
    struct Open {
      uint32_t depth;
      size_t index;  // in out_
      size_t loops;  // loops_ when it began: the loops outside it do not repeat its calls
      // Its parameters, and where its body starts: an `if flag:` tests the caller's value only
      // while `flag` is a parameter the body has not rebound before it, which is read in the text
      // (the regions read may leave out the statement that rebinds it).
      std::set<std::string> parameters;
      uint32_t bodyStart = 0;
    };
    std::vector<Open> open;  // the enclosing defs
    struct Scope {
      uint32_t depth;
      bool isClass;
      std::string name;
      std::vector<std::string> bases;  // a class's
    };
    std::vector<Scope> scopes;  // the enclosing defs and classes
    uint32_t depth = 0;
    for (;;) {
      TSNode node = ts_tree_cursor_current_node(&cursor);
      TSSymbol s = ts_node_symbol(node);
      bool descend = true;
      if (s == g_.functionDefinition) {
        FunctionScope scope = scopes.empty() ? FunctionScope::Module : scopes.back().isClass ? FunctionScope::Method : FunctionScope::Nested;
        // A method read without its class's header (an earlier round read that) still takes self.
        if (scope == FunctionScope::Module && takesSelf(node)) scope = FunctionScope::Method;
        TSNode parameters = ts_node_child_by_field_id(node, g_.parameters);
        uint32_t bodyStart = ts_node_is_null(parameters) ? ts_node_start_byte(node) : ts_node_end_byte(parameters);
        open.push_back({depth, out_.size(), loops_.size(), parameterNames(node), bodyStart});
        std::string name = textOf(ts_node_child_by_field_id(node, g_.name));
        bool inClass = !scopes.empty() && scopes.back().isClass;
        out_.push_back({name, scope, {}, inClass ? scopes.back().name : "", {}, {}, inClass ? scopes.back().bases : std::vector<std::string>{}});
        scopes.push_back({depth, false, std::move(name), {}});
      } else if (s == g_.classDefinition) {
        scopes.push_back({depth, true, textOf(ts_node_child_by_field_id(node, g_.name)), basesOf(node)});
      } else if (isLoop(s)) {
        loops_.push_back(depth);
      } else if (s == g_.ifStatement) {
        if (!open.empty()) onIf(node, depth, open.back());
      } else if (s == g_.call && !open.empty()) {
        onCall(node, out_[open.back().index].calls, static_cast<int>(loops_.size() - open.back().loops), open.back().index);
      } else if (s == g_.call && module_) {
        onCall(node, module_->calls, static_cast<int>(loops_.size()));
      } else if (s == g_.assignment) {
        if (!open.empty()) {
          onAssignment(node, out_[open.back().index].constructions);
          onTableEntries(node, out_[open.back().index].tableEntries);
        } else if (scopes.empty() && module_) {
          onAssignment(node, module_->constructions);
        }
      } else if (s == g_.importStatement) {
        onImport(node);
        descend = false;
      } else if (s == g_.importFromStatement) {
        onFromImport(node);
        descend = false;
      }
      if (descend && ts_tree_cursor_goto_first_child(&cursor)) {
        ++depth;
        continue;
      }
      // Up until a next sibling; a def is done once the walk is past it.
      while (!ts_tree_cursor_goto_next_sibling(&cursor)) {
        if (!ts_tree_cursor_goto_parent(&cursor)) {
          ts_tree_cursor_delete(&cursor);
          return std::move(out_);
        }
        --depth;
      }
      while (!open.empty() && open.back().depth >= depth) open.pop_back();
      while (!scopes.empty() && scopes.back().depth >= depth) scopes.pop_back();
      while (!loops_.empty() && loops_.back() >= depth) loops_.pop_back();
      while (!guards_.empty() && guards_.back().depth >= depth) guards_.pop_back();
    }
  }

 private:
  std::string textOf(TSNode node) const {
    if (ts_node_is_null(node)) return "";
    uint32_t begin = ts_node_start_byte(node), end = ts_node_end_byte(node);
    return std::string(text_.substr(begin, end - begin));
  }

  // `a.b.c` of identifiers and attributes; empty for anything else.
  std::string dottedOf(TSNode node) const {
    std::string suffix;
    for (; !ts_node_is_null(node) && ts_node_symbol(node) == g_.attribute; node = ts_node_child_by_field_id(node, g_.object)) {
      suffix = "." + textOf(ts_node_child_by_field_id(node, g_.attributeField)) + suffix;
    }
    if (ts_node_is_null(node) || ts_node_symbol(node) != g_.identifier) return "";
    return textOf(node) + suffix;
  }

  bool takesSelf(TSNode function) const {
    TSNode parameters = ts_node_child_by_field_id(function, g_.parameters);
    if (ts_node_is_null(parameters) || ts_node_named_child_count(parameters) == 0) return false;
    TSNode first = ts_node_named_child(parameters, 0);
    if (ts_node_symbol(first) != g_.identifier) return false;
    std::string name = textOf(first);
    return name == "self" || name == "cls";
  }

  bool isLoop(TSSymbol s) const {
    return s == g_.forStatement || s == g_.whileStatement || s == g_.listComprehension || s == g_.setComprehension ||
           s == g_.dictionaryComprehension || s == g_.generatorExpression;
  }

  // A class's bases as written: `nn.Module` of `class Net(nn.Module, metaclass=M)`.
  std::vector<std::string> basesOf(TSNode classDefinition) const {
    std::vector<std::string> bases;
    TSNode list = ts_node_child_by_field_id(classDefinition, g_.superclasses);
    uint32_t n = ts_node_is_null(list) ? 0 : ts_node_named_child_count(list);
    for (uint32_t i = 0; i < n; ++i)
      if (std::string base = dottedOf(ts_node_named_child(list, i)); !base.empty()) bases.push_back(std::move(base));
    return bases;
  }

  // `x = C(...)`, `self.x = C(...)`, `x = (A(...) if c else B(...))`, `self.x = x`: what the
  // receiver `x` is made by.
  void onAssignment(TSNode node, std::vector<Construction>& out) const {
    TSNode right = ts_node_child_by_field_id(node, g_.right);
    std::string target = dottedOf(ts_node_child_by_field_id(node, g_.left));
    if (ts_node_is_null(right) || target.empty()) return;
    if (ts_node_symbol(right) == g_.identifier) {
      out.push_back({std::move(target), textOf(right), "", true});
      return;
    }
    addConstructions(target, right, out, 0);
  }

  void addConstructions(const std::string& target, TSNode value, std::vector<Construction>& out, int depth) const {
    TSSymbol s = ts_node_symbol(value);
    if (depth > 8) return;  // `a if x else (b if y else ...)` nested past any real code
    if (s == g_.parenthesizedExpression && ts_node_named_child_count(value) == 1) {
      addConstructions(target, ts_node_named_child(value, 0), out, depth + 1);
    } else if (s == g_.conditionalExpression && ts_node_named_child_count(value) == 3) {
      addConstructions(target, ts_node_named_child(value, 0), out, depth + 1);  // the value if true
      addConstructions(target, ts_node_named_child(value, 2), out, depth + 1);  // the value if false
    } else if (s == g_.call) {
      std::string callee = dottedOf(ts_node_child_by_field_id(value, g_.function));
      if (!callee.empty()) out.push_back({target, callee, names_.qualify(callee)});
    }
  }

  // `self.funcs["send"] = self.isend` and `self.funcs = {"send": self.isend, ...}`: the methods of
  // the function's own object that a table holds.
  void onTableEntries(TSNode node, std::vector<TableEntry>& out) const {
    TSNode left = ts_node_child_by_field_id(node, g_.left), right = ts_node_child_by_field_id(node, g_.right);
    if (ts_node_is_null(left) || ts_node_is_null(right)) return;
    auto method = [&](TSNode value) {
      std::string dotted = dottedOf(value);
      return dotted.starts_with("self.") && dotted.find('.', 5) == std::string::npos ? dotted.substr(5) : std::string();
    };
    if (ts_node_symbol(left) == g_.subscript) {
      std::string table = dottedOf(ts_node_child_by_field_id(left, g_.value));
      if (std::string m = method(right); !table.empty() && !m.empty()) out.push_back({table, m});
      return;
    }
    if (ts_node_symbol(right) != g_.dictionary) return;
    std::string table = dottedOf(left);
    if (table.empty()) return;
    uint32_t n = ts_node_named_child_count(right);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode entry = ts_node_named_child(right, i);
      if (ts_node_symbol(entry) != g_.pair) continue;
      if (std::string m = method(ts_node_child_by_field_id(entry, g_.value)); !m.empty()) out.push_back({table, m});
    }
  }

  // `function`: the index in out_ of the definition the call stands in (SIZE_MAX at module level).
  void onCall(TSNode node, std::vector<CallInFunction>& calls, int loopDepth, size_t function = SIZE_MAX) const {
    TSNode callee = ts_node_child_by_field_id(node, g_.function);
    if (ts_node_is_null(callee)) return;
    CallInFunction call;
    TSSymbol s = ts_node_symbol(callee);
    if (s == g_.identifier) {
      call.name = textOf(callee);
    } else if (s == g_.attribute) {
      call.name = textOf(ts_node_child_by_field_id(callee, g_.attributeField));
      call.onAttribute = true;
      TSNode object = ts_node_child_by_field_id(callee, g_.object);
      std::string receiver = ts_node_symbol(object) == g_.identifier ? textOf(object) : "";
      call.onSelf = receiver == "self" || receiver == "cls";
      call.receiver = dottedOf(object);
      if (call.receiver.empty() && ts_node_symbol(object) == g_.call) {
        // `Factory().method(...)`: the receiver is what the factory returns.
        std::string made = dottedOf(ts_node_child_by_field_id(object, g_.function));
        if (!made.empty()) call.receiver = made + "()";
      }
      if (!call.receiver.empty()) {
        std::string head = call.receiver.substr(0, call.receiver.find_first_of(".("));
        call.receiverQualified = names_.qualify(call.receiver.ends_with("()") ? call.receiver.substr(0, call.receiver.size() - 2) : head);
      }
    } else if (s == g_.subscript) {
      // `self.funcs[name](...)`: one of the table's entries.
      call.table = dottedOf(ts_node_child_by_field_id(callee, g_.value));
      if (call.table.empty()) return;
    } else {
      return;
    }
    call.loopDepth = loopDepth;
    TSPoint at = ts_node_start_point(node);
    call.row = at.row;
    call.column = at.column;
    if (std::string dotted = dottedOf(callee); !dotted.empty()) call.qualifiedName = names_.qualify(dotted);
    TSNode arguments = ts_node_child_by_field_id(node, g_.arguments);
    call.backend = backendKeyword(arguments);
    call.offKeywords = keywordsPassedOff(arguments, text_);
    for (const Guard& guard : guards_)
      if (guard.function == function && ts_node_start_byte(node) >= guard.begin && ts_node_start_byte(node) < guard.end)
        call.guards.push_back(guard.name);
    calls.push_back(std::move(call));
  }

  // `if flag:` in function `f`, with `flag` one of its parameters not rebound before: the calls of
  // the first block stand under the truth of the value its caller passed.
  template <class Open>
  void onIf(TSNode node, uint32_t depth, const Open& f) {
    TSNode condition = ts_node_child_by_field_id(node, g_.condition);
    TSNode block = ts_node_child_by_field_id(node, g_.consequence);
    if (ts_node_is_null(condition) || ts_node_is_null(block) || ts_node_symbol(condition) != g_.identifier) return;
    std::string name = textOf(condition);
    uint32_t at = ts_node_start_byte(node);
    if (!f.parameters.contains(name) || (at > f.bodyStart && rebinds(text_.substr(f.bodyStart, at - f.bodyStart), name))) return;
    guards_.push_back({depth, std::move(name), ts_node_start_byte(block), ts_node_end_byte(block), f.index});
  }

  // Whether `text` binds `name` anew: `name = ...` (not `==`), an augmented `name += ...`,
  // `name := ...`, or `for name in`. A name after a dot is an attribute, not it.
  static bool rebinds(std::string_view text, const std::string& name) {
    auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (size_t at = text.find(name); at != std::string_view::npos; at = text.find(name, at + 1)) {
      if ((at > 0 && (word(text[at - 1]) || text[at - 1] == '.')) || (at + name.size() < text.size() && word(text[at + name.size()])))
        continue;
      size_t next = text.find_first_not_of(" \t", at + name.size());
      if (next == std::string_view::npos) return false;
      std::string_view rest = text.substr(next, 3);
      if ((rest.starts_with("=") && !rest.starts_with("==")) || rest.starts_with(":=")) return true;
      if (rest.size() >= 2 && rest[1] == '=' && std::string_view("+-*/%|&^@").find(rest[0]) != std::string_view::npos) return true;
      size_t before = text.find_last_not_of(" \t", at == 0 ? 0 : at - 1);
      if (at > 0 && before != std::string_view::npos && before >= 2 && text.substr(before - 2, 3) == "for") return true;
    }
    return false;
  }

  // The names of a definition's parameters (`flag`, `flag=True`, `flag: bool = True`).
  std::set<std::string> parameterNames(TSNode function) const {
    std::set<std::string> names;
    TSNode parameters = ts_node_child_by_field_id(function, g_.parameters);
    uint32_t n = ts_node_is_null(parameters) ? 0 : ts_node_named_child_count(parameters);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode p = ts_node_named_child(parameters, i);
      if (ts_node_symbol(p) == g_.identifier) names.insert(textOf(p));
      else if (TSNode named = ts_node_child_by_field_id(p, g_.name); !ts_node_is_null(named)) names.insert(textOf(named));
      else if (ts_node_named_child_count(p) > 0 && ts_node_symbol(ts_node_named_child(p, 0)) == g_.identifier)
        names.insert(textOf(ts_node_named_child(p, 0)));  // `flag: bool`
    }
    return names;
  }

  // The value of `backend="..."` when it is a plain string literal.
  std::optional<std::string> backendKeyword(TSNode arguments) const {
    uint32_t n = ts_node_named_child_count(arguments);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode argument = ts_node_named_child(arguments, i);
      if (ts_node_symbol(argument) != g_.keywordArgument || textOf(ts_node_child_by_field_id(argument, g_.name)) != "backend") continue;
      TSNode value = ts_node_child_by_field_id(argument, g_.value);
      if (ts_node_is_null(value) || ts_node_symbol(value) != g_.string) return std::nullopt;
      std::string literal;
      uint32_t parts = ts_node_named_child_count(value);
      for (uint32_t k = 0; k < parts; ++k) {
        TSNode part = ts_node_named_child(value, k);
        if (ts_node_symbol(part) == g_.stringContent) literal += textOf(part);
      }
      return literal;
    }
    return std::nullopt;
  }

  void onImport(TSNode node) {
    uint32_t n = ts_node_named_child_count(node);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode child = ts_node_named_child(node, i);
      if (ts_node_symbol(child) == g_.aliasedImport) {
        names_.bindImport(textOf(ts_node_child_by_field_id(child, g_.name)), textOf(ts_node_child_by_field_id(child, g_.alias)));
      } else {
        names_.bindImport(textOf(child), "");
      }
    }
  }

  void onFromImport(TSNode node) {
    TSNode module = ts_node_child_by_field_id(node, g_.moduleName);
    if (ts_node_is_null(module)) return;
    std::string moduleName = textOf(module);  // ".groups" for a relative one: the index strips the dots
    uint32_t n = ts_node_named_child_count(node);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode child = ts_node_named_child(node, i);
      if (ts_node_eq(child, module)) continue;
      if (ts_node_symbol(child) == g_.aliasedImport) {
        names_.bindFromImport(moduleName, textOf(ts_node_child_by_field_id(child, g_.name)), textOf(ts_node_child_by_field_id(child, g_.alias)));
      } else if (ts_node_symbol(child) == g_.dottedName) {
        names_.bindFromImport(moduleName, textOf(child), "");
      }
    }
  }

  std::string_view text_;
  const Grammar& g_;
  PythonNames& names_;
  ModuleFacts* module_;
  std::vector<uint32_t> loops_;  // depths of the enclosing loops
  struct Guard {
    uint32_t depth;
    std::string name;
    uint32_t begin, end;  // the bytes of the arm's block
    size_t function;      // the definition it stands in (index in out_)
  };
  std::vector<Guard> guards_;  // the enclosing `if name:` arms (onIf)
  std::vector<FunctionCalls> out_;
};

}  // namespace

const std::set<std::string>& groupCreatorNames() {
  // _new_process_group_helper: the private helper every creator calls, called directly by stacks that
  // build a standalone group outside the default world (a weight-sync group with an inference engine).
  static const std::set<std::string> names = {"new_group", "split_group", "new_subgroups", "new_subgroups_by_enumeration",
                                              "_new_process_group_helper"};
  return names;
}

std::string pythonModuleOf(const std::string& path) {
  std::string module = path;
  for (const char* suffix : {".py", ".pyi", ".ipynb"}) {
    if (module.ends_with(suffix)) {
      module.resize(module.size() - std::strlen(suffix));
      break;
    }
  }
  if (module.ends_with("/__init__")) module.resize(module.size() - std::strlen("/__init__"));
  while (module.starts_with("/") || module.starts_with("./")) module.erase(0, module[0] == '/' ? 1 : 2);
  for (char& c : module)
    if (c == '/' || c == '\\') c = '.';
  return module;
}

std::string modelStepKey(const std::string& module, const std::string& owner, const std::string& method) {
  return module + "#self:" + owner + "." + method;
}

std::string groupWrapperKey(const std::string& module, const FunctionCalls& function) {
  switch (function.scope) {
    case FunctionScope::Method: return module + "#self:" + function.function;
    case FunctionScope::Nested: return module + "#local:" + function.function;
    case FunctionScope::Module: break;
  }
  return module + ":" + function.function;
}

std::string groupWrapperName(const std::string& key) { return key.substr(key.rfind(':') + 1); }

GroupWrapperIndex::GroupWrapperIndex(const std::set<std::string>& keys) {
  for (const std::string& key : keys) add(key);
}

// A bare name (no module) is a function of a module not known.
void GroupWrapperIndex::add(const std::string& key) {
  size_t colon = key.rfind(':');
  if (colon == std::string::npos) scopes_[key].push_back("");
  else scopes_[key.substr(colon + 1)].push_back(key.substr(0, colon));
}

namespace {

// `s` ends with the dotted components `tail`: "a.b.c" with "b.c", not with "xb.c". No allocation:
// this is asked for every source of a tree per call on an object.
bool endsWithComponents(std::string_view s, std::string_view tail) {
  return s.size() > tail.size() && s.ends_with(tail) && s[s.size() - tail.size() - 1] == '.';
}

// `module` (a file's, from its path) is what `imported` names: the same dotted name or its last
// components, or the package above it (a name its __init__.py re-exports). An unknown module
// matches any.
bool isModule(std::string_view module, std::string_view imported) {
  imported.remove_prefix(std::min(imported.find_first_not_of('.'), imported.size()));  // relative: the package's own when nothing is left
  if (module.empty() || imported.empty() || module == imported) return true;
  if (endsWithComponents(module, imported)) return true;
  // A package installed under another name than its folder's (`param_bench` checked out as
  // `param/`): the import's components after its first are the module's last ones. Three at least,
  // so that another package's common pair (`utils.dist`) is not taken for the tree's.
  if (size_t head = imported.find('.'); head != std::string_view::npos) {
    std::string_view rest = imported.substr(head + 1);
    if (std::count(rest.begin(), rest.end(), '.') >= 2 && (module == rest || endsWithComponents(module, rest))) return true;
  }
  size_t dot = module.rfind('.');
  if (dot == std::string_view::npos) return false;
  std::string_view package = module.substr(0, dot);
  return package == imported || endsWithComponents(package, imported);
}

bool sameModule(const std::string& a, const std::string& b) { return a.empty() || b.empty() || a == b; }

}  // namespace

bool moduleNamedBy(const std::string& module, const std::string& imported) { return isModule(module, imported); }

std::string GroupWrapperIndex::reached(const CallInFunction& call, const std::string& caller) const {
  const std::string& q = call.qualifiedName;
  // The name the callee was defined under: an alias (`from pkg.ps import create_group as cg`)
  // is qualified to it.
  std::string name = call.name;
  if (size_t dot = q.rfind('.'); dot != std::string::npos && !call.onSelf) name = q.substr(dot + 1);
  auto it = scopes_.find(name);
  if (it == scopes_.end()) return "";
  // The module part of `mod.name` as imported; empty when the file's imports do not name it.
  std::string imported;
  if (q.size() > name.size() && q.ends_with("." + name)) imported = q.substr(0, q.size() - name.size() - 1);
  bool bare = !call.onAttribute && q.empty();  // defined in the caller's module, or unknown
  for (const std::string& scope : it->second) {
    size_t hash = scope.find('#');
    std::string module = scope.substr(0, hash);
    std::string_view kind = hash == std::string::npos ? std::string_view() : std::string_view(scope).substr(hash + 1);
    bool hit = false;
    if (kind == "self") hit = call.onSelf && sameModule(module, caller);
    else if (kind == "local") hit = bare && sameModule(module, caller);
    else if (bare) hit = sameModule(module, caller);
    else hit = !imported.empty() && isModule(module, imported);
    if (hit) return scope + ":" + name;
  }
  return "";
}

std::vector<FunctionCalls> pythonFunctionCalls(std::string_view text, const std::vector<ParseRegion>& regions) {
  PythonNames names;
  return pythonFunctionCalls(text, regions, names);
}

std::vector<FunctionCalls> pythonFunctionCalls(std::string_view text, const std::vector<ParseRegion>& regions,
                                               PythonNames& names) {
  PythonTree tree = parsePythonRegions(text, regions);
  if (!tree) return {};
  return FunctionCallWalker(text, names, nullptr).walk(ts_tree_root_node(tree.get()));
}

std::vector<FunctionCalls> pythonFunctionCalls(std::string_view text, const std::vector<ParseRegion>& regions,
                                               PythonNames& names, ModuleFacts& module) {
  PythonTree tree = parsePythonRegions(text, regions);
  if (!tree) return {};
  return FunctionCallWalker(text, names, &module).walk(ts_tree_root_node(tree.get()));
}

namespace {

// memmem: glibc's skips ahead by the needle's length, where a find of `\n` would stop at every line.
size_t findIn(std::string_view text, std::string_view needle, size_t from) {
  // Also keeps an empty text's data(), which may be null, away from memmem.
  if (from > text.size() || text.size() - from < needle.size() || needle.empty()) return std::string_view::npos;
  const void* at = ::memmem(text.data() + from, text.size() - from, needle.data(), needle.size());
  return at ? static_cast<size_t>(static_cast<const char*>(at) - text.data()) : std::string_view::npos;
}

}  // namespace

bool mayDefineModuleFunction(std::string_view text, const std::string& name) {
  const std::string definition = "def " + name;
  for (size_t at = findIn(text, definition, 0); at != std::string_view::npos; at = findIn(text, definition, at + 1)) {
    size_t next = text.find_first_not_of(" \t", at + definition.size());
    if (next >= text.size() || text[next] != '(') continue;
    if (at == 0 || text[at - 1] == '\n') return true;
    if (at >= 6 && text.compare(at - 6, 6, "async ") == 0 && (at == 6 || text[at - 7] == '\n')) return true;
  }
  return false;
}

std::map<std::string, std::vector<TracedValue>> moduleFunctionReturns(const std::string& path, const std::string& text,
                                                                      const std::set<std::string>& names,
                                                                      const NameEquivalences& equivalences) {
  // The rows of each module-level definition of a name sought; the last one binds it, as in Python.
  // Only those definitions and the module's own statements (its imports and assignments, which the
  // returns are read through) are parsed; the other definitions bind their names where they stand.
  // A file that defines `get_rank` is often the largest of its package (torch's distributed_c10d).
  std::map<std::string, std::pair<uint32_t, uint32_t>> rows;
  std::vector<ParseRegion> blocks = pythonTopLevelBlocks(text);
  for (const ParseRegion& block : blocks)
    if (block.definition && names.contains(block.name)) rows[block.name] = {block.beginRow, block.endRow};
  // The module's functions a parsed definition calls are parsed too, to the fixed point: a return
  // is traced through the file's own functions (`return _rank()`).
  std::set<std::string> parsed(names.begin(), names.end());
  for (bool grew = true; grew;) {
    grew = false;
    for (const ParseRegion& block : blocks) {
      if (!block.definition || !parsed.contains(block.name)) continue;
      std::string_view body = std::string_view(text).substr(block.begin, block.end - block.begin);
      for (const ParseRegion& other : blocks) {
        if (!other.definition || other.name.empty() || parsed.contains(other.name)) continue;
        if (findIn(body, other.name + "(", 0) != std::string_view::npos) grew |= parsed.insert(other.name).second;
      }
    }
  }
  std::vector<ParseRegion> regions, leftOut;
  for (const ParseRegion& block : blocks) (block.definition && !parsed.contains(block.name) ? leftOut : regions).push_back(block);
  std::map<std::string, std::vector<TracedValue>> returns;
  if (rows.empty()) return returns;
  if (text.size() < kPythonWorthSplitting) regions.clear(), leftOut.clear();
  SourceModel model = parsePython(path, text, equivalences, regions, leftOut);
  for (const Binding& r : model.returns) {
    auto it = rows.find(r.name);
    if (it == rows.end() || r.functionId < 0) continue;
    auto row = static_cast<uint32_t>(r.where.line - 1);
    if (row >= it->second.first && row <= it->second.second) returns[r.name].push_back(traceBinding(model, r));
  }
  return returns;
}

bool isGroupWrapperFunctionName(const GroupWrapperIndex& inferred, const std::vector<std::string>& configured,
                                const std::string& name) {
  if (inferred.names(name)) return true;
  return std::any_of(configured.begin(), configured.end(),
                     [&](const std::string& w) { return w == name || w.ends_with("." + name); });
}

// bindPlainImports (python_project.h): a statement is read only where it is written the plain way
// (`import a.b as c, d`, `from .m import (x as y, z,)`, `from m import *`), with blanks and comments
// only where Python puts no name; anything else declines the whole source, which is then parsed.
namespace {

// What one name of an import binds, as the walker passes it to PythonNames.
struct ImportBinding {
  bool fromImport = false;
  std::string module;  // `import`: the dotted name; `from`: the module as written (".m" relative)
  std::string name;    // `from` only
  std::string alias;
};

// Python's keywords, and the words tree-sitter-python reads as statements of their own (`print`,
// `exec`): none of them is a plain import's name.
bool isReserved(std::string_view word) {
  static const std::unordered_set<std::string_view> kReserved = {
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
      "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
      "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield", "print", "exec"};
  return kReserved.contains(word);
}

// One import statement at the start of a region, and what follows it in the region.
class PlainStatement {
 public:
  explicit PlainStatement(std::string_view region) : s_(region) {}

  // The statement's bindings, appended to `out`; false when it is not written plainly or the
  // region holds more than blank and comment lines after it.
  bool read(std::vector<ImportBinding>& out) {
    if (keyword("import")) return blanks() > 0 && importList(out) && endOfStatement() && onlyComments();
    if (!keyword("from") || blanks() == 0) return false;
    std::string module = moduleName();
    if (module.empty() || blanks() == 0 || !keyword("import")) return false;
    size_t gap = blanks();
    bool future = module == "__future__";  // the grammar's future_import_statement: nothing bound
    std::vector<ImportBinding> names;
    if (at_ < s_.size() && s_[at_] == '*') {
      ++at_;  // binds nothing the walker follows
    } else if (at_ < s_.size() && s_[at_] == '(') {
      ++at_;
      inBrackets_ = true;
      blanks();
      if (!fromList(module, names, true) || at_ >= s_.size() || s_[at_] != ')') return false;
      ++at_;
      inBrackets_ = false;
    } else if (gap == 0 || !fromList(module, names, false)) {
      return false;
    }
    if (!endOfStatement() || !onlyComments()) return false;
    if (!future) out.insert(out.end(), names.begin(), names.end());
    return true;
  }

 private:
  // Skips blanks (and, inside brackets, newlines and comments); how many bytes it skipped.
  size_t blanks() {
    size_t from = at_;
    while (at_ < s_.size()) {
      char c = s_[at_];
      if (c == ' ' || c == '\t' || (inBrackets_ && (c == '\n' || c == '\r'))) {
        ++at_;
      } else if (inBrackets_ && c == '#') {
        while (at_ < s_.size() && s_[at_] != '\n') ++at_;
      } else {
        break;
      }
    }
    return at_ - from;
  }

  // The ASCII name at the cursor, consumed; empty (nothing consumed) when there is none, or when
  // a byte of a longer name (a non-ASCII one) follows.
  std::string_view name() {
    size_t end = at_;
    while (end < s_.size() && isIdentifierByte(s_[end])) ++end;
    if (end == at_ || (s_[at_] >= '0' && s_[at_] <= '9')) return {};
    if (end < s_.size() && static_cast<unsigned char>(s_[end]) >= 0x80) return {};
    std::string_view word = s_.substr(at_, end - at_);
    at_ = end;
    return word;
  }

  // Whether the keyword stands at the cursor as a whole word; consumed when it does.
  bool keyword(std::string_view word) {
    size_t end = at_ + word.size();
    if (s_.substr(at_, word.size()) != word || (end < s_.size() && (isIdentifierByte(s_[end]) || static_cast<unsigned char>(s_[end]) >= 0x80)))
      return false;
    at_ = end;
    return true;
  }

  // A name that is no keyword: one an import can bind.
  std::string ordinaryName() {
    size_t from = at_;
    std::string_view word = name();
    if (word.empty() || isReserved(word)) {
      at_ = from;
      return "";
    }
    return std::string(word);
  }

  // `a.b.c`, without blanks around its dots; empty when it is not one.
  std::string dottedName() {
    std::string dotted = ordinaryName();
    while (!dotted.empty() && at_ < s_.size() && s_[at_] == '.') {
      ++at_;
      std::string part = ordinaryName();
      if (part.empty()) return "";
      dotted += "." + part;
    }
    return dotted;
  }

  // `m.n`, `.m` or `..`: as written, the walker's module name.
  std::string moduleName() {
    std::string dots;
    while (at_ < s_.size() && s_[at_] == '.') dots += s_[at_++];
    if (at_ < s_.size() && isIdentifierByte(s_[at_])) {
      std::string dotted = dottedName();
      return dotted.empty() ? "" : dots + dotted;
    }
    return dots;
  }

  // ` as alias` after a name, when there is one; false when `as` stands without a plain alias.
  bool alias(std::string& out) {
    size_t from = at_;
    if (blanks() == 0 || !keyword("as")) {
      at_ = from;
      return true;
    }
    if (blanks() == 0) return false;
    out = ordinaryName();
    return !out.empty();
  }

  bool importList(std::vector<ImportBinding>& out) {
    while (true) {
      ImportBinding binding;
      binding.module = dottedName();
      if (binding.module.empty() || !alias(binding.alias)) return false;
      out.push_back(std::move(binding));
      blanks();
      if (at_ >= s_.size() || s_[at_] != ',') return true;
      ++at_;
      blanks();
    }
  }

  // `x as y, z` (in brackets a trailing comma too).
  bool fromList(const std::string& module, std::vector<ImportBinding>& out, bool bracketed) {
    while (true) {
      ImportBinding binding{true, module, ordinaryName(), ""};
      if (binding.name.empty() || !alias(binding.alias)) return false;
      out.push_back(std::move(binding));
      blanks();
      if (at_ >= s_.size() || s_[at_] != ',') return true;
      ++at_;
      blanks();
      if (bracketed && at_ < s_.size() && s_[at_] == ')') return true;
    }
  }

  // Blanks, a comment, then the line's end (consumed).
  bool endOfStatement() {
    blanks();
    if (at_ < s_.size() && s_[at_] == '#')
      while (at_ < s_.size() && s_[at_] != '\n') ++at_;
    if (at_ < s_.size() && s_[at_] == '\r') ++at_;
    if (at_ == s_.size()) return true;
    if (s_[at_] != '\n') return false;
    ++at_;
    return true;
  }

  // The rest of the region: blank lines and comment lines only.
  bool onlyComments() const {
    for (size_t line = at_; line < s_.size();) {
      size_t lead = firstNotAny(s_, " \t\r", line);
      if (lead == std::string_view::npos) return true;
      if (s_[lead] != '\n' && s_[lead] != '#') return false;
      size_t newline = s_.find('\n', lead);
      if (newline == std::string_view::npos) return true;
      line = newline + 1;
    }
    return true;
  }

  std::string_view s_;
  size_t at_ = 0;
  bool inBrackets_ = false;
};

}  // namespace

bool bindPlainImports(std::string_view text, const std::vector<ParseRegion>& imports, PythonNames& names) {
  std::vector<ImportBinding> bindings;
  for (const ParseRegion& region : imports) {
    if (region.begin > region.end || region.end > text.size()) return false;
    if (!PlainStatement(text.substr(region.begin, region.end - region.begin)).read(bindings)) return false;
  }
  for (const ImportBinding& b : bindings) {
    if (b.fromImport) names.bindFromImport(b.module, b.name, b.alias);
    else names.bindImport(b.module, b.alias);
  }
  return true;
}

}  // namespace nccl_migrate::lint
