// Python frontend: walks a tree-sitter-python syntax tree in source order, keeping an import
// and alias table and the string constants assigned so far, and records type checks, calls,
// comparisons, attribute reads, string literals, environment assignments and comments with their
// qualified names.
#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <tree_sitter/api.h>

#include "frontends.h"
#include "python_names.h"

extern "C" const TSLanguage* tree_sitter_python();

namespace nccl_migrate::lint {
namespace {

using TreePtr = std::unique_ptr<TSTree, decltype(&ts_tree_delete)>;
using ParserPtr = std::unique_ptr<TSParser, decltype(&ts_parser_delete)>;

// Field ids by name, looked up once: ts_node_child_by_field_name compares names on every call.
struct FieldIds {
  TSFieldId alias;
  TSFieldId arguments;
  TSFieldId attribute;
  TSFieldId function;
  TSFieldId key;
  TSFieldId left;
  TSFieldId moduleName;
  TSFieldId name;
  TSFieldId object;
  TSFieldId right;
  TSFieldId subscript;
  TSFieldId superclasses;
  TSFieldId value;
};

TSFieldId fieldId(const char* name) {
  return ts_language_field_id_for_name(tree_sitter_python(), name, static_cast<uint32_t>(std::strlen(name)));
}

const FieldIds kField = {
    .alias = fieldId("alias"),
    .arguments = fieldId("arguments"),
    .attribute = fieldId("attribute"),
    .function = fieldId("function"),
    .key = fieldId("key"),
    .left = fieldId("left"),
    .moduleName = fieldId("module_name"),
    .name = fieldId("name"),
    .object = fieldId("object"),
    .right = fieldId("right"),
    .subscript = fieldId("subscript"),
    .superclasses = fieldId("superclasses"),
    .value = fieldId("value"),
};

bool isLoop(std::string_view type) {
  return type == "for_statement" || type == "while_statement" || type == "list_comprehension" ||
         type == "set_comprehension" || type == "dictionary_comprehension" || type == "generator_expression";
}

class PythonWalker {
 public:
  PythonWalker(const std::string& text, SourceModel& model, const NameEquivalences& equivalences,
               const std::vector<ParseRegion>& leftOut)
      : text_(text), model_(model), equivalences_(equivalences), leftOut_(leftOut) {
    names_.setEquivalentModules(&equivalences.modules);
  }
  ~PythonWalker() {
    for (TSTreeCursor& cursor : cursors_) ts_tree_cursor_delete(&cursor);
  }
  PythonWalker(const PythonWalker&) = delete;
  PythonWalker& operator=(const PythonWalker&) = delete;

  // A function or class of the file: its name no longer means an imported one.
  void bindDefinition(const std::string& name) {
    if (!isConfiguredWrapper(name)) names_.bindLocalDefinition(name);
  }

  // Visits the tree in source order with an explicit stack instead of recursion: the nesting of
  // brackets, calls and operators is the file's to choose, and a thread's stack is not.
  void walk(TSNode root) {
    std::vector<Step> steps{{root, 0, false, false}};
    while (!steps.empty()) {
      Step step = steps.back();
      steps.pop_back();
      if (step.restoresState) {
        loopDepth_ = step.loopDepth;
        inDocumentation_ = step.inDocumentation;
        continue;
      }
      bindLeftOutBefore(ts_node_start_byte(step.node));
      visit(step.node, steps);
    }
  }

  // Definitions left out of the parse bind their names where they stand, as if walked.
  void bindLeftOutBefore(size_t offset) {
    for (; nextLeftOut_ < leftOut_.size() && leftOut_[nextLeftOut_].begin <= offset; ++nextLeftOut_) {
      if (!leftOut_[nextLeftOut_].name.empty()) bindDefinition(leftOut_[nextLeftOut_].name);
    }
  }

 private:
  // A node to visit, or the state to return to once a node's children are done.
  struct Step {
    TSNode node;
    int loopDepth;
    bool inDocumentation;
    bool restoresState;
  };

  void visit(TSNode node, std::vector<Step>& steps) {
    std::string_view type = ts_node_type(node);
    bool inDocumentation = inDocumentation_;  // for the node's children
    if (type == "import_statement") return onImport(node);
    if (type == "import_from_statement") return onFromImport(node);
    if (type == "comment") return onComment(node);
    if (type == "expression_statement" && isDocstring(node)) return;
    if (type == "class_definition") onClass(node);
    // A loop around a `def` does not run the function's body repeatedly, so depth restarts inside.
    if (type == "function_definition") return onFunction(node, steps);
    if (type == "assignment") onAssignment(node);
    if (type == "call") {
      onCall(node);
      // Strings a program prints or logs document a setting; they set nothing.
      if (isDocumentingCall(node)) inDocumentation = true;
    }
    if (type == "keyword_argument" && isHelpKeyword(textOf(field(node, kField.name)))) inDocumentation = true;
    if (type == "comparison_operator") onComparison(node);
    if (type == "attribute") onAttribute(node);
    if (type == "string" || type == "concatenated_string") {
      onString(node);
      // f-string interpolations hold code.
      return visitChildren(node, loopDepth_, steps, [](std::string_view t) { return t == "interpolation" || t == "string"; });
    }
    visitChildren(node, loopDepth_ + isLoop(type), steps, [](std::string_view) { return true; });
    inDocumentation_ = inDocumentation;
  }

  bool isDocumentingCall(TSNode call) const {
    std::string callee = snippetOf(field(call, kField.function));
    std::string last = callee.substr(callee.rfind('.') + 1);
    for (const char* name : {"print", "debug", "info", "warning", "warn", "error", "exception", "critical", "log", "write"})
      if (last == name) return true;
    return false;
  }

  static bool isHelpKeyword(const std::string& keyword) {
    return keyword == "help" || keyword == "description" || keyword == "epilog" || keyword == "usage";
  }

  // Schedules the named children that `wanted` admits, to be visited at `childLoopDepth`, and the
  // return to the current depth after them.
  template <class Wanted>
  void visitChildren(TSNode node, int childLoopDepth, std::vector<Step>& steps, Wanted&& wanted) {
    steps.push_back({node, loopDepth_, inDocumentation_, true});
    size_t first = steps.size();
    forEachNamedChild(node, [&](TSNode child) {
      if (wanted(typeOf(child))) steps.push_back({child, 0, false, false});
    });
    std::reverse(steps.begin() + static_cast<std::ptrdiff_t>(first), steps.end());
    loopDepth_ = childLoopDepth;
  }

 private:
  // Calls `visit` on each named child in order. ts_node_named_child is linear in the index, so a
  // cursor steps through the siblings instead: one cursor per nesting level, reused for the file.
  template <class Visit>
  void forEachNamedChild(TSNode node, Visit&& visit) const {
    if (ts_node_is_null(node)) return;
    size_t level = openCursors_++;
    struct Close {
      size_t& open;
      ~Close() { --open; }
    } close{openCursors_};
    if (level == cursors_.size()) cursors_.push_back(ts_tree_cursor_new(node));
    else ts_tree_cursor_reset(&cursors_[level], node);
    TSTreeCursor* cursor = &cursors_[level];  // a deque keeps it in place while deeper levels are added
    if (!ts_tree_cursor_goto_first_child(cursor)) return;
    do {
      TSNode child = ts_tree_cursor_current_node(cursor);
      if (ts_node_is_named(child)) visit(child);
    } while (ts_tree_cursor_goto_next_sibling(cursor));
  }

  // Source text kept for messages and heuristics: clipped, so that every level of a deeply nested
  // expression holding its whole subtree's text cannot make a file cost quadratic memory.
  std::string snippetOf(TSNode node) const {
    constexpr uint32_t kMaxSnippet = 240;
    if (ts_node_is_null(node)) return "";
    uint32_t begin = ts_node_start_byte(node), end = ts_node_end_byte(node);
    if (end - begin <= kMaxSnippet) return text_.substr(begin, end - begin);
    return text_.substr(begin, kMaxSnippet) + "...";
  }

  std::string textOf(TSNode node) const {
    if (ts_node_is_null(node)) return "";
    uint32_t begin = ts_node_start_byte(node), end = ts_node_end_byte(node);
    return text_.substr(begin, end - begin);
  }

  static Location locationOf(TSNode node) {
    TSPoint p = ts_node_start_point(node);
    return {static_cast<int>(p.row) + 1, static_cast<int>(p.column) + 1};
  }

  static TSNode field(TSNode node, TSFieldId id) { return ts_node_child_by_field_id(node, id); }

  static std::string_view typeOf(TSNode node) { return ts_node_is_null(node) ? "" : ts_node_type(node); }

  // A string expression statement is a docstring (or an inert string): never a finding.
  static bool isDocstring(TSNode node) {
    return ts_node_named_child_count(node) == 1 && typeOf(ts_node_named_child(node, 0)) == "string";
  }

  // Dotted spelling of an identifier or attribute chain ("dist.ProcessGroupNCCL"); empty for
  // anything else (a call, a subscript), which cannot name a module-level object.
  std::string dottedOf(TSNode node) const {
    std::vector<TSNode> attributes;  // outermost first
    for (; typeOf(node) == "attribute"; node = field(node, kField.object)) attributes.push_back(field(node, kField.attribute));
    std::string_view type = typeOf(node);
    if (type != "identifier" && type != "dotted_name") return "";
    std::string dotted = textOf(node);
    for (auto it = attributes.rbegin(); it != attributes.rend(); ++it) dotted += "." + textOf(*it);
    return dotted;
  }

  // The value of a string expression as far as it is known here: literals, f-string text parts,
  // `+` of known pieces and names bound to such strings earlier. Unknown parts are left out.
  // Pieces are taken in source order from an explicit stack: `"a" + "b" + ...` nests as deep as
  // it is long.
  std::optional<std::string> stringValueOf(TSNode node) const {
    std::string value;
    bool known = false;
    std::vector<TSNode> pending{node};
    while (!pending.empty()) {
      TSNode piece = pending.back();
      pending.pop_back();
      std::string_view type = typeOf(piece);
      if (type == "string") {
        forEachNamedChild(piece, [&](TSNode part) {
          if (typeOf(part) == "string_content") value += textOf(part);
        });
        known = true;
      } else if (type == "concatenated_string" || type == "binary_operator" ||
                 (type == "parenthesized_expression" && ts_node_named_child_count(piece) == 1)) {
        size_t first = pending.size();
        forEachNamedChild(piece, [&](TSNode child) { pending.push_back(child); });
        std::reverse(pending.begin() + static_cast<std::ptrdiff_t>(first), pending.end());
      } else if (type == "identifier") {
        if (auto it = constants_.find(textOf(piece)); it != constants_.end()) {
          value += it->second;
          known = true;
        }
      }
    }
    if (!known) return std::nullopt;
    return value;
  }

  void onImport(TSNode node) {
    forEachNamedChild(node, [&](TSNode child) {
      if (typeOf(child) == "aliased_import") {
        names_.bindImport(textOf(field(child, kField.name)), textOf(field(child, kField.alias)));
      } else {
        names_.bindImport(textOf(child), "");
      }
    });
  }

  void onFromImport(TSNode node) {
    TSNode module = field(node, kField.moduleName);
    if (typeOf(module) == "relative_import") return;  // project-local
    std::string moduleName = textOf(module);
    forEachNamedChild(node, [&](TSNode child) {
      if (ts_node_eq(child, module)) return;
      std::string_view type = typeOf(child);
      if (type == "aliased_import") {
        names_.bindFromImport(moduleName, textOf(field(child, kField.name)), textOf(field(child, kField.alias)));
      } else if (type == "dotted_name") {
        names_.bindFromImport(moduleName, textOf(child), "");
      }
    });
  }

  void onComment(TSNode node) {
    model_.comments.push_back({locationOf(node).line, textOf(node)});
  }

  void onClass(TSNode node) {
    TSNode bases = field(node, kField.superclasses);
    forEachNamedChild(bases, [&](TSNode base) { recordTypeCheck(TypeCheck::Kind::Subclass, base); });
    names_.bindLocalDefinition(textOf(field(node, kField.name)));
  }

  void onFunction(TSNode node, std::vector<Step>& steps) {
    bindDefinition(textOf(field(node, kField.name)));
    visitChildren(node, 0, steps, [](std::string_view) { return true; });
  }

  // `PG = dist.ProcessGroupNCCL` makes PG an alias; `CONF = "..."` a known string; any other
  // assignment shadows the name. `os.environ["X"] = v` sets an environment variable.
  void onAssignment(TSNode node) {
    TSNode left = field(node, kField.left);
    TSNode right = field(node, kField.right);
    if (typeOf(left) == "subscript") return onSubscriptAssignment(left, right);
    if (typeOf(left) != "identifier") return;
    std::string name = textOf(left);
    std::string dotted = ts_node_is_null(right) ? "" : dottedOf(right);
    names_.bindAssignment(name, dotted.empty() ? "" : names_.qualify(dotted));
    if (!ts_node_is_null(right)) assigned_[name] = snippetOf(right);
    if (auto value = ts_node_is_null(right) ? std::nullopt : stringValueOf(right)) constants_[name] = *value;
    else constants_.erase(name);
  }

  void onSubscriptAssignment(TSNode target, TSNode right) {
    if (!isEnviron(field(target, kField.value))) return;
    auto key = stringValueOf(field(target, kField.subscript));
    if (!key || ts_node_is_null(right)) return;
    model_.settings.push_back({*key, stringValueOf(right).value_or(""), locationOf(target), true});
  }

  bool isEnviron(TSNode node) const {
    std::string dotted = dottedOf(node);
    return !dotted.empty() && names_.qualify(dotted) == "os.environ";
  }

  // A call of a function the project-wide table found creating groups, by its last name.
  bool isInferredWrapper(const std::string& dotted) const {
    if (equivalences_.inferredGroupWrappers.empty() || dotted.empty()) return false;
    return equivalences_.inferredGroupWrappers.contains(dotted.substr(dotted.rfind('.') + 1));
  }

  bool isConfiguredWrapper(const std::string& spelling) const {
    for (const std::string& w : equivalences_.groupWrappers)
      if (w == spelling) return true;
    return false;
  }

  void onCall(TSNode node) {
    TSNode function = field(node, kField.function);
    std::string dotted = dottedOf(function);
    // A method of a computed object (`Net().cuda()`) has no qualified name, only its spelling.
    if (dotted.empty() && typeOf(function) != "attribute") return;
    Call call;
    call.spelling = dotted.empty() ? snippetOf(function) : dotted;
    call.qualifiedName = dotted.empty() ? "" : names_.qualify(dotted);
    if (isConfiguredWrapper(call.qualifiedName) || isConfiguredWrapper(dotted) || isInferredWrapper(dotted)) {
      call.qualifiedName = "torch.distributed.new_group";
    }
    call.where = locationOf(node);
    call.loopDepth = loopDepth_;
    collectArguments(field(node, kField.arguments), call);
    if (dotted == "isinstance" && names_.isBuiltin("isinstance")) onIsinstance(field(node, kField.arguments));
    onEnvironmentCall(function, field(node, kField.arguments), call);
    model_.calls.push_back(std::move(call));
  }

  void collectArguments(TSNode list, Call& call) const {
    if (typeOf(list) != "argument_list") return;
    forEachNamedChild(list, [&](TSNode arg) {
      if (typeOf(arg) == "comment") return;
      Argument a;
      TSNode value = arg;
      if (typeOf(arg) == "keyword_argument") {
        a.keyword = textOf(field(arg, kField.name));
        value = field(arg, kField.value);
      }
      a.text = snippetOf(value);
      a.stringValue = stringValueOf(value);
      if (typeOf(value) == "identifier") {
        if (auto it = assigned_.find(a.text); it != assigned_.end()) a.assignedText = it->second;
      }
      a.where = locationOf(value);
      std::string_view valueType = typeOf(value);
      if (valueType == "list" || valueType == "tuple") {
        a.isSequenceLiteral = true;
        forEachNamedChild(value, [&](TSNode element) { a.elements.push_back(snippetOf(element)); });
      }
      call.arguments.push_back(std::move(a));
    });
  }

  // os.environ.setdefault/update, os.putenv: environment assignments through calls.
  void onEnvironmentCall(TSNode function, TSNode arguments, const Call& call) {
    if (typeOf(function) != "attribute") return;
    std::string method = textOf(field(function, kField.attribute));
    bool onEnviron = isEnviron(field(function, kField.object));
    if ((onEnviron && method == "setdefault") || call.qualifiedName == "os.putenv") {
      const Argument* key = call.positional(0);
      const Argument* value = call.positional(1);
      if (key && key->stringValue && value) {
        model_.settings.push_back({*key->stringValue, value->stringValue.value_or(""), key->where, true});
      }
    } else if (onEnviron && method == "update") {
      for (const Argument& a : call.arguments) {
        if (!a.keyword.empty()) model_.settings.push_back({a.keyword, a.stringValue.value_or(""), a.where, true});
      }
      // os.environ.update({"KEY": value, ...})
      forEachNamedChild(arguments, [&](TSNode dict) {
        if (typeOf(dict) != "dictionary") return;
        forEachNamedChild(dict, [&](TSNode pair) {
          if (typeOf(pair) != "pair") return;
          auto key = stringValueOf(field(pair, kField.key));
          if (!key) return;
          model_.settings.push_back({*key, stringValueOf(field(pair, kField.value)).value_or(""), locationOf(pair), true});
        });
      });
    }
  }

  void onIsinstance(TSNode arguments) {
    if (ts_node_named_child_count(arguments) < 2) return;
    TSNode classes = ts_node_named_child(arguments, 1);
    if (typeOf(classes) != "tuple") return recordTypeCheck(TypeCheck::Kind::Isinstance, classes);
    forEachNamedChild(classes, [&](TSNode cls) { recordTypeCheck(TypeCheck::Kind::Isinstance, cls); });
  }

  void onComparison(TSNode node) {
    if (ts_node_named_child_count(node) != 2) return;
    TSNode lhs = ts_node_named_child(node, 0), rhs = ts_node_named_child(node, 1);
    if (isTypeCall(lhs)) recordTypeCheck(TypeCheck::Kind::TypeIdentity, rhs);
    else if (isTypeCall(rhs)) recordTypeCheck(TypeCheck::Kind::TypeIdentity, lhs);
    recordStringComparison(node, lhs, rhs);
  }

  // `subject OP "lit"` or `subject in ("a", "b")` where the subject is a call.
  void recordStringComparison(TSNode node, TSNode lhs, TSNode rhs) {
    if (typeOf(lhs) != "call") std::swap(lhs, rhs);
    if (typeOf(lhs) != "call") return;
    StringComparison cmp;
    if (auto value = stringValueOf(rhs); value && typeOf(rhs) != "identifier") {
      cmp.literals.push_back(*value);
    } else if (typeOf(rhs) == "tuple" || typeOf(rhs) == "list" || typeOf(rhs) == "set") {
      bool allKnown = true;
      forEachNamedChild(rhs, [&](TSNode element) {
        auto value = stringValueOf(element);
        if (value) cmp.literals.push_back(*value);
        allKnown &= value.has_value();
      });
      if (!allKnown) return;
    } else {
      return;
    }
    // The operator is the unnamed child between the operands ("not in" and "is not" are one token).
    uint32_t n = ts_node_child_count(node);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode child = ts_node_child(node, i);
      if (!ts_node_is_named(child)) cmp.op = ts_node_type(child);
    }
    TSNode callee = field(lhs, kField.function);
    std::string dotted = dottedOf(callee);
    cmp.subjectCallee = dotted.empty() ? "" : names_.qualify(dotted);
    if (cmp.subjectCallee.empty()) cmp.subjectCallee = dotted;
    if (cmp.subjectCallee.empty() && typeOf(callee) == "attribute") cmp.subjectCallee = "." + textOf(field(callee, kField.attribute));
    cmp.subjectCallHasArguments = ts_node_named_child_count(field(lhs, kField.arguments)) > 0;
    cmp.subjectText = snippetOf(lhs);
    cmp.where = locationOf(node);
    // The fix rewrites from the end of the subject to the end of the comparison; only the
    // subject-first order is rewritable.
    if (ts_node_start_byte(lhs) == ts_node_start_byte(node)) {
      cmp.literalSide = {ts_node_end_byte(lhs), ts_node_end_byte(node)};
    }
    model_.comparisons.push_back(std::move(cmp));
  }

  bool isTypeCall(TSNode node) const {
    if (typeOf(node) != "call") return false;
    return snippetOf(field(node, kField.function)) == "type" && names_.isBuiltin("type");
  }

  void onAttribute(TSNode node) {
    model_.attributes.push_back(
        {textOf(field(node, kField.attribute)), snippetOf(field(node, kField.object)), locationOf(field(node, kField.attribute))});
  }

  void onString(TSNode node) {
    if (auto value = stringValueOf(node)) model_.strings.push_back({*value, locationOf(node), inDocumentation_});
  }

  void recordTypeCheck(TypeCheck::Kind kind, TSNode classExpr) {
    std::string dotted = dottedOf(classExpr);
    if (dotted.empty()) return;
    model_.typeChecks.push_back({kind, names_.qualify(dotted), dotted, locationOf(classExpr)});
  }

  const std::string& text_;
  SourceModel& model_;
  const NameEquivalences& equivalences_;
  PythonNames names_;
  std::unordered_map<std::string, std::string> constants_;  // name -> string value known so far
  std::unordered_map<std::string, std::string> assigned_;   // name -> its last assigned value's text
  const std::vector<ParseRegion>& leftOut_;
  size_t nextLeftOut_ = 0;
  int loopDepth_ = 0;
  bool inDocumentation_ = false;  // inside a print/log call or a help= argument
  mutable std::deque<TSTreeCursor> cursors_;  // forEachNamedChild's, by nesting level
  mutable size_t openCursors_ = 0;
};

}  // namespace

SourceModel parsePython(const std::string& path, const std::string& text, const NameEquivalences& names,
                        const std::vector<ParseRegion>& regions, const std::vector<ParseRegion>& leftOut) {
  SourceModel model;
  model.path = path;
  model.language = Language::Python;
  // One parser per thread, kept for the run: creating one allocates its stacks and tables.
  thread_local ParserPtr parser = [] {
    ParserPtr p(ts_parser_new(), &ts_parser_delete);
    ts_parser_set_language(p.get(), tree_sitter_python());
    return p;
  }();
  std::vector<TSRange> ranges;
  for (const ParseRegion& r : regions) {
    ranges.push_back({{r.beginRow, 0}, {r.endRow, r.endColumn}, static_cast<uint32_t>(r.begin), static_cast<uint32_t>(r.end)});
  }
  // An empty list restores the whole document for the parser's next file.
  ts_parser_set_included_ranges(parser.get(), ranges.data(), static_cast<uint32_t>(ranges.size()));
  TreePtr tree(ts_parser_parse_string(parser.get(), nullptr, text.data(), static_cast<uint32_t>(text.size())),
               &ts_tree_delete);
  if (!tree) return model;
  TSNode root = ts_tree_root_node(tree.get());
  model.hadSyntaxErrors = ts_node_has_error(root);
  PythonWalker walker(text, model, names, leftOut);
  walker.walk(root);
  walker.bindLeftOutBefore(text.size() + 1);
  return model;
}

}  // namespace nccl_migrate::lint
