// Python frontend: walks a tree-sitter-python syntax tree in source order, keeping an import
// and alias table and the string constants assigned so far, and records type checks, calls,
// comparisons, attribute reads, string literals, environment assignments and comments with their
// qualified names, and for each call the function and the arms of `if` statements it is in, and
// what each argument, binding and return value is made of, for value tracing (python_values.cc).
#include <algorithm>
#include <cctype>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <tree_sitter/api.h>

#include "python/python_frontend.h"
#include "python/group_wrapper_catalogue.h"
#include "python/python_names.h"
#include "python/python_parse.h"
#include "python/python_project.h"
#include "python/python_parameter_callers.h"

extern "C" const TSLanguage* tree_sitter_python();

namespace nccl_migrate::lint {
namespace {


// Field ids by name, looked up once: ts_node_child_by_field_name compares names on every call.
struct FieldIds {
  TSFieldId alias;
  TSFieldId alternative;
  TSFieldId argument;
  TSFieldId arguments;
  TSFieldId body;
  TSFieldId attribute;
  TSFieldId condition;
  TSFieldId consequence;
  TSFieldId expression;
  TSFieldId function;
  TSFieldId key;
  TSFieldId left;
  TSFieldId moduleName;
  TSFieldId name;
  TSFieldId object;
  TSFieldId operatorField;
  TSFieldId parameters;
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
    .alternative = fieldId("alternative"),
    .argument = fieldId("argument"),
    .arguments = fieldId("arguments"),
    .body = fieldId("body"),
    .attribute = fieldId("attribute"),
    .condition = fieldId("condition"),
    .consequence = fieldId("consequence"),
    .expression = fieldId("expression"),
    .function = fieldId("function"),
    .key = fieldId("key"),
    .left = fieldId("left"),
    .moduleName = fieldId("module_name"),
    .name = fieldId("name"),
    .object = fieldId("object"),
    .operatorField = fieldId("operator"),
    .parameters = fieldId("parameters"),
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
      : text_(text), model_(model), equivalences_(equivalences), wrappers_(wrapperIndex(equivalences.inferredGroupWrappers)),
        leftOut_(leftOut) {
    names_.setEquivalentModules(&equivalences.modules);
    // The module the project-wide table knows this file as (linter.cc names it the same way).
    if (!wrappers_.empty() || !equivalences.functionsCalledInLoops.empty() || !equivalences.parametersCallersPass.empty()) {
      std::error_code ec;
      module_ = pythonModuleOf(std::filesystem::absolute(model.path, ec).lexically_normal().generic_string());
    }
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
        function_ = step.function;
        arm_ = step.arm;
        formatStringDepth_ = step.formatStringDepth;
        classBody_ = step.classBody;
        continue;
      }
      if (step.arm != kSameArm) arm_ = step.arm;
      bindLeftOutBefore(ts_node_start_byte(step.node));
      visit(step.node, steps);
    }
    resolveSavedCalls();
  }

  // Definitions left out of the parse bind their names where they stand, as if walked.
  void bindLeftOutBefore(size_t offset) {
    for (; nextLeftOut_ < leftOut_.size() && leftOut_[nextLeftOut_].begin <= offset; ++nextLeftOut_) {
      if (!leftOut_[nextLeftOut_].name.empty()) bindDefinition(leftOut_[nextLeftOut_].name);
    }
  }

 private:
  static constexpr int kSameArm = -2;  // a step that stays in the arm it is scheduled from

  // A node to visit, or the state to return to once a node's children are done. A node to visit
  // may enter an arm of an `if` statement.
  struct Step {
    TSNode node;
    int loopDepth;
    bool inDocumentation;
    bool restoresState;
    int function = -1;  // restored: index in functions_, -1 at module level
    int arm = kSameArm;  // restored, or entered: index in arms_, -1 outside any
    int formatStringDepth = 0;  // restored
    bool classBody = false;     // restored
  };

  // The step that returns to the current state, at loop depth `loopDepth`, once `node`'s children
  // scheduled after it are done.
  Step restoring(TSNode node, int loopDepth) const {
    return {node, loopDepth, inDocumentation_, true, function_, arm_, formatStringDepth_, classBody_};
  }

  // An arm of an `if` statement (its `if` block, an `elif` or the `else`), inside `parent`.
  struct Arm {
    int parent;
    int statement;
    int index;
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
    if (type == "if_statement") return onIf(node, steps);
    if (type == "assignment") onAssignment(node);
    if (type == "augmented_assignment") onAugmentedAssignment(node);
    if (type == "for_statement") bindUnread(field(node, kField.left));
    if (type == "return_statement") onReturn(node);
    if (type == "call") {
      calleeOfLastCall_ = field(node, kField.function);  // visited next, as the call's first child
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
      visitChildren(node, loopDepth_, steps, [](std::string_view t) { return t == "interpolation" || t == "string"; });
      ++formatStringDepth_;  // for the children just scheduled; their restore step undoes it
      return;
    }
    // A loop's iterable is evaluated once, before the loop: `for req in dist.batch_isend_irecv(ops)`
    // and a comprehension's first `for` call it once. (A later `for` of a comprehension runs once
    // per item of the one before, in the loop.)
    if (type == "for_statement") visitLoop(node, field(node, kField.right), loopDepth_ + 1, loopDepth_, steps);
    else if (type == "for_in_clause" && isFirstClause(node)) visitLoop(node, field(node, kField.right), loopDepth_, loopDepth_ - 1, steps);
    else visitChildren(node, loopDepth_ + isLoop(type), steps, [](std::string_view) { return true; });
    if (type == "class_definition") classBody_ = true;  // for its children, until their restore step
    inDocumentation_ = inDocumentation;
  }

  static bool isFirstClause(TSNode clause) {
    for (TSNode before = ts_node_prev_named_sibling(clause); !ts_node_is_null(before); before = ts_node_prev_named_sibling(before))
      if (typeOf(before) == "for_in_clause") return false;
    return true;
  }

  // Schedules a loop's children at `bodyDepth`, its iterable at `iterableDepth`, and the return to
  // the current depth after them.
  void visitLoop(TSNode node, TSNode iterable, int bodyDepth, int iterableDepth, std::vector<Step>& steps) {
    steps.push_back(restoring(node, loopDepth_));
    size_t first = steps.size();
    forEachNamedChild(node, [&](TSNode child) {
      if (!ts_node_eq(child, iterable)) return steps.push_back({child, 0, false, false});
      steps.push_back(restoring(child, iterableDepth));
      steps.push_back({child, 0, false, false});
      steps.push_back(restoring(child, bodyDepth));
    });
    std::reverse(steps.begin() + static_cast<std::ptrdiff_t>(first), steps.end());
    loopDepth_ = bodyDepth;
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
    steps.push_back(restoring(node, loopDepth_));
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
        if (auto parameter = parameterValue(textOf(piece))) {
          if (parameter->has_value()) {
            value += **parameter;
            known = true;
          }
        } else if (auto it = constants_.find(textOf(piece)); it != constants_.end()) {
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
        std::string module = textOf(field(child, kField.name));
        noteAscendImport(node, module);
        names_.bindImport(module, textOf(field(child, kField.alias)));
      } else {
        noteAscendImport(node, textOf(child));
        names_.bindImport(textOf(child), "");
      }
    });
  }

  // torch_npu imported by a module-level statement (not under try, if or a function) fails to load
  // anywhere but on Ascend: the module runs there only (SourceModel::needsAscendNpu).
  void noteAscendImport(TSNode statement, std::string_view module) {
    bool ascend = module == "torch_npu" || module.starts_with("torch_npu.");
    TSNode parent = ts_node_parent(statement);
    if (ascend && !ts_node_is_null(parent) && typeOf(parent) == "module") model_.needsAscendNpu = true;
  }

  void onFromImport(TSNode node) {
    TSNode module = field(node, kField.moduleName);
    if (typeOf(module) == "relative_import") return onRelativeImport(node, module);  // project-local
    std::string moduleName = textOf(module);
    noteAscendImport(node, moduleName);
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

  // Names from the project's own modules stay unresolved for the rules; the table of group
  // wrappers still matches them by their module (".groups.create_group").
  void onRelativeImport(TSNode node, TSNode module) {
    std::string moduleName = textOf(module);
    forEachNamedChild(node, [&](TSNode child) {
      if (ts_node_eq(child, module)) return;
      std::string_view type = typeOf(child);
      if (type == "aliased_import") {
        std::string name = textOf(field(child, kField.name));
        relativeImports_[textOf(field(child, kField.alias))] = moduleName + "." + name;
      } else if (type == "dotted_name") {
        relativeImports_[textOf(child)] = moduleName + "." + textOf(child);
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

  // A function's body runs when it is called, not where it stands: outside any arm.
  void onFunction(TSNode node, std::vector<Step>& steps) {
    std::string name = textOf(field(node, kField.name));
    bindDefinition(name);
    visitChildren(node, 0, steps, [](std::string_view) { return true; });
    function_ = static_cast<int>(functions_.size());
    classBody_ = false;  // a method's names are its own
    functionIsWrapper_.push_back(isGroupWrapperFunction(name));
    functionCalledInLoopAt_.push_back(calledInLoopAt(name, enclosingClassName(node)));
    model_.functions.push_back(name);
    functions_.push_back(std::move(name));
    arm_ = -1;
    bindParameters(field(node, kField.parameters), parameterKeyName(node));
  }

  // A function's parameters are bound to values its callers choose: not read here. A string
  // literal default is kept as the parameter's string (`backend: str = "gloo"`), the value the
  // function works with, unless a call in the scanned tree passes another value
  // (NameEquivalences::parametersCallersPass): then the value is the caller's, unknown here.
  // The class a function is a method of, by name; empty for any other function.
  std::string enclosingClassName(TSNode function) const {
    TSNode parent = ts_node_parent(function);
    if (!ts_node_is_null(parent) && typeOf(parent) == "decorated_definition") parent = ts_node_parent(parent);
    if (ts_node_is_null(parent) || typeOf(parent) != "block") return "";
    TSNode owner = ts_node_parent(parent);
    if (ts_node_is_null(owner) || typeOf(owner) != "class_definition") return "";
    return textOf(field(owner, kField.name));
  }

  // The name the tree's callers reach a function by, for its parameters' keys: a class's for its
  // __init__ (parametersCallersPass).
  std::string parameterKeyName(TSNode function) const {
    std::string name = textOf(field(function, kField.name));
    std::string owner = name == "__init__" ? enclosingClassName(function) : "";
    return owner.empty() ? name : owner;
  }

  void bindParameters(TSNode parameters, const std::string& keyName) {
    ValueNode positional{ValueNode::Kind::Sequence, "", "", {}, locationOf(parameters)};
    bool keywordOnly = false;
    auto record = [&](TSNode name) {
      if (!keywordOnly) positional.operands.push_back(addValue({ValueNode::Kind::Name, textOf(name), "", {}, locationOf(name)}));
    };
    forEachNamedChild(parameters, [&](TSNode p) {
      std::string_view type = typeOf(p);
      if (type == "identifier") {
        record(p);
        parameters_[{function_, textOf(p)}] = std::nullopt;
        return bind(textOf(p), -1, p);
      }
      if (type == "list_splat_pattern" || type == "dictionary_splat_pattern" || type == "keyword_separator") {
        keywordOnly = true;  // `*args`, `*`, `**kwargs`: no parameter after them takes a position
        return;
      }
      TSNode name = field(p, kField.name);
      if (ts_node_is_null(name) && ts_node_named_child_count(p) > 0) name = ts_node_named_child(p, 0);
      if (typeOf(name) == "list_splat_pattern" || typeOf(name) == "dictionary_splat_pattern") keywordOnly = true;
      if (typeOf(name) != "identifier") return;
      record(name);
      bind(textOf(name), -1, name);
      TSNode byDefault = field(p, kField.value);
      bool literal = typeOf(byDefault) == "string" || typeOf(byDefault) == "concatenated_string";
      bool callersPass = equivalences_.parametersCallersPass.contains(callerParameterKey(module_, keyName, textOf(name)));
      parameters_[{function_, textOf(name)}] = literal && !callersPass ? stringValueOf(byDefault) : std::nullopt;
    });
    model_.bindings.push_back({kParameters, addValue(std::move(positional)), function_, {}, locationOf(parameters)});
  }

  // A parameter of the function being read: its string default, or an empty optional inside when
  // it has none (its value is the caller's); nothing when the name is no parameter here.
  std::optional<std::optional<std::string>> parameterValue(const std::string& name) const {
    if (function_ < 0) return std::nullopt;
    auto it = parameters_.find({function_, name});
    if (it == parameters_.end()) return std::nullopt;
    return it->second;
  }

  // Each arm is entered by its first step; the condition and comments stay where they are.
  void onIf(TSNode node, std::vector<Step>& steps) {
    steps.push_back(restoring(node, loopDepth_));
    size_t first = steps.size();
    int statement = statements_++;
    int index = 0;
    TSNode consequence = field(node, kField.consequence);
    forEachNamedChild(node, [&](TSNode child) {
      std::string_view type = typeOf(child);
      bool arm = ts_node_eq(child, consequence) || type == "elif_clause" || type == "else_clause";
      int entered = kSameArm;
      if (arm) {
        entered = static_cast<int>(arms_.size());
        TSNode condition = ts_node_eq(child, consequence) ? field(node, kField.condition)
                           : type == "elif_clause"        ? field(child, kField.condition)
                                                          : TSNode{};
        if (!ts_node_is_null(condition)) bindArmCondition(condition, statement, index);
        arms_.push_back({arm_, statement, index++});
      }
      steps.push_back({child, 0, false, false, -1, arm ? entered : arm_});
    });
    std::reverse(steps.begin() + static_cast<std::ptrdiff_t>(first), steps.end());
  }

  // An `if` or `elif` arm's condition, bound under kArmCondition in the arm it opens (the arms
  // around the statement, then that arm), so that a rule can ask what holds inside it.
  void bindArmCondition(TSNode condition, int statement, int index) {
    std::vector<Call::Arm> arms = armsHere();
    arms.push_back({statement, index});
    model_.bindings.push_back({kArmCondition, valueOf(condition), function_, std::move(arms), locationOf(condition)});
  }

  // The arms around the current point, outermost first.
  std::vector<Call::Arm> armsHere() const {
    std::vector<Call::Arm> out;
    for (int a = arm_; a >= 0; a = arms_[a].parent) out.push_back({arms_[a].statement, arms_[a].index});
    std::reverse(out.begin(), out.end());
    return out;
  }

  static bool insideExceptHandler(TSNode node) {
    for (TSNode n = ts_node_parent(node); !ts_node_is_null(n); n = ts_node_parent(n)) {
      std::string_view type = ts_node_type(n);
      if (type == "except_clause") return true;
      if (type == "function_definition" || type == "class_definition") return false;
    }
    return false;
  }

  // `PG = dist.ProcessGroupNCCL` makes PG an alias; `CONF = "..."` a known string; any other
  // assignment shadows the name. `os.environ["X"] = v` sets an environment variable.
  void onAssignment(TSNode node) {
    TSNode left = field(node, kField.left);
    TSNode right = field(node, kField.right);
    keepSaved(left, right);
    if (typeOf(left) == "subscript") return onSubscriptAssignment(left, right);
    if (typeOf(left) == "attribute") {
      if (std::string dotted = dottedOf(left); !dotted.empty()) bind(dotted, ts_node_is_null(right) ? -1 : valueOf(right), left);
      return;
    }
    if (typeOf(left) != "identifier") return bindUnread(left);
    // `except ImportError: initialize_model_parallel = None` stands in for a library that is not
    // installed; where the code runs with the library, the name is the import (kept).
    if (!ts_node_is_null(right) && typeOf(right) == "none" && !names_.qualify(textOf(left)).empty() &&
        insideExceptHandler(node))
      return;
    // A class attribute (`class Backend(Enum): apex = "apex"`) is no name of the module or the
    // function the class stands in: their code still sees its `apex`.
    if (classBody_) return;
    bind(textOf(left), ts_node_is_null(right) ? -1 : valueOf(right), left);
    std::string name = textOf(left);
    std::string dotted = ts_node_is_null(right) ? "" : dottedOf(right);
    names_.bindAssignment(name, dotted.empty() ? "" : names_.qualify(dotted));
    if (!ts_node_is_null(right)) assigned_[name] = snippetOf(right);
    if (auto value = ts_node_is_null(right) ? std::nullopt : stringValueOf(right)) constants_[name] = *value;
    else constants_.erase(name);
    parameters_.erase({function_, name});  // the name now holds what was assigned, as constants_ tells
  }

  // Where code keeps one of torch's functions other than in a plain name (PythonNames::bindSaved):
  // `_orig = dist.new_group` in a class body, `self._orig = ...` in a method, `Cls._orig = ...`, a
  // dict display of them, `saved["new_group"] = dist.new_group`. Calls through such a place are
  // resolved once the whole file is read (resolveSavedCalls): the method that calls the original
  // may stand before the one that saves it, as it runs later.
  void keepSaved(TSNode left, TSNode right) {
    if (ts_node_is_null(right)) return;
    std::string_view type = typeOf(left);
    if (type != "identifier" && type != "attribute" && type != "subscript") return;
    bool dictionary = typeOf(right) == "dictionary";
    std::string function = dictionary ? "" : torchFunction(right);
    if (function.empty() && !dictionary) return;
    std::string place = placeOf(left);
    // A plain name outside a class body is names_'s; only a dict display of functions is kept here.
    if (place.empty() || (!dictionary && type == "identifier" && place.find('.') == std::string::npos)) return;
    if (!dictionary) {
      names_.bindSaved(place, function);
      anySaved_ = true;
      return;
    }
    forEachNamedChild(right, [&](TSNode pair) {
      if (typeOf(pair) != "pair") return;
      std::optional<std::string> key = stringValueOf(field(pair, kField.key));
      std::string saved = key ? torchFunction(field(pair, kField.value)) : "";
      if (saved.empty()) return;
      names_.bindSaved(place + "[" + *key + "]", saved);
      anySaved_ = true;
    });
  }

  // Calls through a place that may hold one of torch's functions (keepSaved), once the file is
  // read: an attribute call is renamed in place; a call through a dict's entry, which is recorded
  // only then, joins the calls where it stands in the source.
  void resolveSavedCalls() {
    if (!anySaved_) return;
    for (const auto& [index, function] : savedCandidates_) {
      Call& call = model_.calls[index];
      if (call.qualifiedName.starts_with("torch.")) continue;
      if (std::string saved = names_.saved(placeOf(function)); !saved.empty()) call.qualifiedName = saved;
    }
    for (auto& [call, function] : savedEntryCalls_) {
      std::string saved = names_.saved(placeOf(function));
      if (saved.empty()) continue;
      call.qualifiedName = saved;
      auto after = std::upper_bound(model_.calls.begin(), model_.calls.end(), call, [](const Call& a, const Call& b) {
        return std::tie(a.where.line, a.where.column) < std::tie(b.where.line, b.where.column);
      });
      model_.calls.insert(after, std::move(call));
    }
  }

  // One of torch's functions named by a dotted expression (`dist.new_group`, also as a class's
  // `staticmethod(dist.new_group)`), else empty.
  std::string torchFunction(TSNode value) const {
    if (typeOf(value) == "call" && textOf(field(value, kField.function)) == "staticmethod" && names_.isBuiltin("staticmethod")) {
      TSNode arguments = field(value, kField.arguments);
      if (ts_node_named_child_count(arguments) == 1) value = ts_node_named_child(arguments, 0);
    }
    std::string dotted = dottedOf(value);
    std::string qualified = dotted.empty() ? "" : names_.qualify(dotted);
    return qualified.starts_with("torch.") ? qualified : "";
  }

  // Where an assignment target or a callee keeps a value, as PythonNames::bindSaved names it: a
  // name in a class body or an attribute of self/cls in a method as "Class.name", another dotted
  // name as written, a subscript by a string as "place[key]"; empty for anything else.
  std::string placeOf(TSNode node, int depth = 0) const {
    std::string_view type = typeOf(node);
    if (type == "subscript") {
      if (depth > 4) return "";  // nested subscripts are the file's to choose, and the stack is not
      std::string base = placeOf(field(node, kField.value), depth + 1);
      std::optional<std::string> key = stringValueOf(field(node, kField.subscript));
      return base.empty() || !key ? "" : base + "[" + *key + "]";
    }
    if (type == "identifier") {
      std::string owner = classOf(node, false);
      return owner.empty() ? textOf(node) : owner + "." + textOf(node);
    }
    std::string dotted = dottedOf(node);
    for (const char* receiver : {"self.", "cls."}) {
      if (!dotted.starts_with(receiver)) continue;
      std::string rest = dotted.substr(std::strlen(receiver));
      std::string owner = rest.find('.') == std::string::npos ? classOf(node, true) : "";
      return owner.empty() ? "" : owner + "." + rest;
    }
    return dotted;
  }

  // The class whose body `node` stands in directly (`inMethod` false), or whose method it stands
  // in (`inMethod` true); empty when none.
  std::string classOf(TSNode node, bool inMethod) const {
    bool sawFunction = false;
    for (TSNode n = ts_node_parent(node); !ts_node_is_null(n); n = ts_node_parent(n)) {
      std::string_view type = typeOf(n);
      if (type == "class_definition") return inMethod == sawFunction ? textOf(field(n, kField.name)) : "";
      if (type == "function_definition") {
        if (!inMethod || sawFunction) return "";
        sawFunction = true;
      } else if (type == "lambda") {
        return "";
      } else if (sawFunction && type != "block" && type != "decorated_definition") {
        return "";  // a function nested in something other than a class body
      }
    }
    return "";
  }

  // `x *= n` binds x to `x * n`, its earlier value read where the target stands (so the read
  // reaches the bindings before this one); a target other than a name or a dotted name is unread.
  void onAugmentedAssignment(TSNode node) {
    TSNode left = field(node, kField.left);
    TSNode right = field(node, kField.right);
    std::string op = textOf(field(node, kField.operatorField));
    std::string target = typeOf(left) == "identifier" ? textOf(left) : typeOf(left) == "attribute" ? dottedOf(left) : "";
    if (target.empty() || ts_node_is_null(right) || op.size() < 2 || op.back() != '=') return bindUnread(left);
    op.pop_back();
    int value = addValue({ValueNode::Kind::Operator, op, "", {valueOf(left, 1), valueOf(right, 1)}, locationOf(node)});
    bind(target, value, left);
  }

  // `items.append(x)` in the body of `for t in iterable:` (the innermost loop around it, in its
  // function): `items` then holds what `[x for t in iterable]` holds, one item per iteration, as a
  // comprehension's value reads (`tensors = []; for i in range(torch.cuda.device_count()):
  // tensors.append(...)`).
  void bindAppendedInLoop(TSNode list, TSNode call) {
    if (typeOf(list) != "identifier") return;
    TSNode loop{};
    for (TSNode up = ts_node_parent(call); !ts_node_is_null(up); up = ts_node_parent(up)) {
      std::string_view type = typeOf(up);
      if (type == "for_statement") {
        loop = up;
        break;
      }
      if (isLoop(type) || type == "function_definition" || type == "class_definition" || type == "lambda") return;
    }
    TSNode arguments = field(call, kField.arguments);
    if (ts_node_is_null(loop) || ts_node_is_null(arguments) || ts_node_named_child_count(arguments) != 1) return;
    TSNode item = ts_node_named_child(arguments, 0);
    TSNode target = field(loop, kField.left);
    ValueNode comprehension{ValueNode::Kind::Comprehension, "", "", {valueOf(field(loop, kField.right), 1)}, locationOf(call)};
    comprehension.operands.push_back(valueOf(item, 1));
    comprehension.operands.push_back(addValue({ValueNode::Kind::Name, textOf(target), "", {}, locationOf(target)}));
    bind(textOf(list), addValue(std::move(comprehension)), call);
  }

  void bind(std::string name, int value, TSNode where) {
    model_.bindings.push_back({std::move(name), value, function_, arm_ >= 0 ? armsHere() : std::vector<Call::Arm>{}, locationOf(where)});
  }

  // Names bound to values not read here: each name of a target (`a, b = ...`, `for i in`, `x += 1`).
  void bindUnread(TSNode target) {
    std::vector<TSNode> pending{target};
    for (int seen = 0; !pending.empty() && seen < 64; ++seen) {
      TSNode n = pending.back();
      pending.pop_back();
      std::string_view type = typeOf(n);
      if (type == "identifier") bind(textOf(n), -1, n);
      else if (type == "attribute") {
        if (std::string dotted = dottedOf(n); !dotted.empty()) bind(dotted, -1, n);
      } else if (type == "pattern_list" || type == "tuple_pattern" || type == "list_pattern" || type == "tuple" ||
                 type == "list" || type == "list_splat_pattern" || type == "parenthesized_expression") {
        forEachNamedChild(n, [&](TSNode child) { pending.push_back(child); });
      }
    }
  }

  void onReturn(TSNode node) {
    if (function_ < 0 || ts_node_named_child_count(node) == 0) return;
    int value = valueOf(ts_node_named_child(node, 0));
    model_.returns.push_back({functions_[static_cast<size_t>(function_)], value, function_,
                              arm_ >= 0 ? armsHere() : std::vector<Call::Arm>{}, locationOf(node)});
  }

  // What an expression is made of, as nodes in model_.values (see ValueNode); returns the root's
  // index. Depth is bounded: a nested expression's inner parts past it are Unknown.
  int valueOf(TSNode node, int depth = 0) const {
    using Kind = ValueNode::Kind;
    constexpr int kMaxDepth = 8;
    // Parentheses are seen through in a loop, not by recursion: a file may nest 100,000 of them.
    while (typeOf(node) == "parenthesized_expression" && ts_node_named_child_count(node) == 1) {
      node = ts_node_named_child(node, 0);
    }
    std::string_view type = typeOf(node);
    Location where = locationOf(node);
    if (depth > kMaxDepth) return addValue({Kind::Unknown, clipped(node), "", {}, where});
    if (type == "integer" || type == "float" || type == "true" || type == "false" || type == "none")
      return addValue({Kind::Literal, textOf(node), "", {}, where});
    // The environment itself, however the file names it (`environ` from os, an alias of os), and
    // the dicts made of it: the tracer reads their items as the environment's (python_values.cc).
    if (isEnviron(node) || isEnvironmentCopy(node)) return addValue({Kind::Attribute, kEnviron, "", {}, where});
    if (type == "identifier") return addValue({Kind::Name, textOf(node), "", {}, where});
    if (type == "attribute") {
      std::string dotted = dottedOf(node);
      return addValue({dotted.empty() ? Kind::Unknown : Kind::Attribute, dotted.empty() ? clipped(node) : dotted, "", {}, where});
    }
    if (type == "string") return stringValueNode(node, depth);
    if (type == "concatenated_string") {
      if (auto value = stringValueOf(node)) return addValue({Kind::Literal, *value, "", {}, where});
    }
    if (type == "subscript" && isEnviron(field(node, kField.value))) {
      if (auto key = stringValueOf(field(node, kField.subscript))) return addValue({Kind::Environment, *key, "", {}, where});
    }
    if (type == "subscript" && ts_node_named_child_count(node) == 2 && typeOf(field(node, kField.subscript)) != "slice") {
      TSNode container = field(node, kField.value), index = field(node, kField.subscript);
      if (!ts_node_is_null(container) && !ts_node_is_null(index))
        return addValue({Kind::Item, clipped(node), "", {valueOf(container, depth + 1), valueOf(index, depth + 1)}, where});
    }
    if (type == "call") return callValueNode(node, depth);
    if (type == "binary_operator") {
      TSNode left = field(node, kField.left), right = field(node, kField.right);
      std::string op = textOf(field(node, kField.operatorField));
      if (op == "%" && (typeOf(left) == "string" || typeOf(left) == "concatenated_string")) {
        if (auto format = stringValueOf(left)) return formatNode(percentTemplate(*format), right, depth, where);
      }
      return addValue({Kind::Operator, op, "", {valueOf(left, depth + 1), valueOf(right, depth + 1)}, where});
    }
    if (type == "comparison_operator" && ts_node_named_child_count(node) == 2) {
      TSNode left = ts_node_named_child(node, 0), right = ts_node_named_child(node, 1);
      uint32_t from = ts_node_end_byte(left), to = ts_node_start_byte(right);
      std::string op;  // "==", "not in", "is not": the words between the operands, blanks made one
      for (char c : text_.substr(from, to > from ? to - from : 0)) {
        if (!std::isspace(static_cast<unsigned char>(c))) op += c;
        else if (!op.empty() && op.back() != ' ') op += ' ';
      }
      while (!op.empty() && op.back() == ' ') op.pop_back();
      return addValue({Kind::Operator, op, "", {valueOf(left, depth + 1), valueOf(right, depth + 1)}, where});
    }
    if (type == "not_operator" && !ts_node_is_null(field(node, kField.argument))) {
      return addValue({Kind::Operator, "not", "", {valueOf(field(node, kField.argument), depth + 1)}, where});
    }
    if (type == "boolean_operator" && textOf(field(node, kField.operatorField)) == "and") {
      return addValue({Kind::Operator, "and", "", {valueOf(field(node, kField.left), depth + 1), valueOf(field(node, kField.right), depth + 1)}, where});
    }
    if (type == "conditional_expression" && ts_node_named_child_count(node) == 3) {
      return addValue({Kind::OneOf, "", "", {valueOf(ts_node_named_child(node, 0), depth + 1), valueOf(ts_node_named_child(node, 2), depth + 1)}, where});
    }
    if (type == "boolean_operator" && textOf(field(node, kField.operatorField)) == "or") {
      return addValue({Kind::OneOf, "", "", {valueOf(field(node, kField.left), depth + 1), valueOf(field(node, kField.right), depth + 1)}, where});
    }
    if (type == "list" || type == "tuple") {
      ValueNode sequence{Kind::Sequence, "", "", {}, where};
      forEachNamedChild(node, [&](TSNode element) {
        if (typeOf(element) != "comment" && sequence.operands.size() < 16) sequence.operands.push_back(valueOf(element, depth + 1));
      });
      return addValue(std::move(sequence));
    }
    if (type == "list_comprehension" || type == "generator_expression") {
      ValueNode comprehension{Kind::Comprehension, "", "", {}, where};
      TSNode target{};
      forEachNamedChild(node, [&](TSNode child) {
        if (typeOf(child) == "for_in_clause" && comprehension.operands.empty()) {
          comprehension.operands.push_back(valueOf(field(child, kField.right), depth + 1));
          target = field(child, kField.left);
        }
      });
      TSNode body = field(node, kField.body);
      if (!comprehension.operands.empty() && !ts_node_is_null(body) && !ts_node_is_null(target)) {
        comprehension.operands.push_back(valueOf(body, depth + 1));
        comprehension.operands.push_back(addValue({Kind::Name, textOf(target), "", {}, locationOf(target)}));
      }
      return addValue(std::move(comprehension));
    }
    return addValue({Kind::Unknown, clipped(node), "", {}, where});
  }

  // A dict holding the environment's values under its keys: `dict(os.environ)`, `os.environ.copy()`,
  // `{k: os.environ[k] for k in keys}` and `{k: v for k, v in os.environ.items()}`.
  bool isEnvironmentCopy(TSNode node) const {
    std::string_view type = typeOf(node);
    if (type == "call") {
      TSNode function = field(node, kField.function), arguments = field(node, kField.arguments);
      if (typeOf(function) == "attribute") {
        return textOf(field(function, kField.attribute)) == "copy" && isEnviron(field(function, kField.object)) &&
               ts_node_named_child_count(arguments) == 0;
      }
      return typeOf(function) == "identifier" && textOf(function) == "dict" && names_.isBuiltin("dict") &&
             ts_node_named_child_count(arguments) == 1 &&
             isEnviron(ts_node_named_child(arguments, 0));
    }
    if (type != "dictionary_comprehension") return false;
    TSNode pair = field(node, kField.body);
    TSNode clause{};
    int clauses = 0;
    forEachNamedChild(node, [&](TSNode child) {
      if (typeOf(child) == "for_in_clause" && ts_node_is_null(clause)) clause = child;
      // A second `for` or an `if` leaves out or changes items: no copy of the environment.
      if (typeOf(child) == "for_in_clause" || typeOf(child) == "if_clause") ++clauses;
    });
    if (typeOf(pair) != "pair" || ts_node_is_null(clause) || clauses != 1) return false;
    TSNode key = field(pair, kField.key), value = field(pair, kField.value);
    TSNode target = field(clause, kField.left), iterable = field(clause, kField.right);
    if (typeOf(value) == "subscript" && isEnviron(field(value, kField.value))) {
      // {k: os.environ[k] for k in keys}: the environment's item under each key.
      TSNode index = field(value, kField.subscript);
      return typeOf(target) == "identifier" && typeOf(key) == "identifier" && typeOf(index) == "identifier" &&
             textOf(key) == textOf(target) && textOf(index) == textOf(target);
    }
    // {k: v for k, v in os.environ.items()}
    TSNode items = field(iterable, kField.function);
    bool overItems = typeOf(iterable) == "call" && typeOf(items) == "attribute" &&
                     textOf(field(items, kField.attribute)) == "items" && isEnviron(field(items, kField.object));
    if (!overItems || ts_node_named_child_count(target) != 2) return false;
    return textOf(key) == textOf(ts_node_named_child(target, 0)) && textOf(value) == textOf(ts_node_named_child(target, 1));
  }

  int addValue(ValueNode node) const {
    model_.values.push_back(std::move(node));
    return static_cast<int>(model_.values.size()) - 1;
  }

  // A short piece of source, for a node nothing is read from.
  std::string clipped(TSNode node) const {
    constexpr uint32_t kMax = 40;
    uint32_t begin = ts_node_start_byte(node), end = ts_node_end_byte(node);
    if (end - begin <= kMax) return text_.substr(begin, end - begin);
    return text_.substr(begin, kMax) + "...";
  }

  // A string: its value, or for an f-string its text with "{}" for each interpolation.
  int stringValueNode(TSNode node, int depth) const {
    using Kind = ValueNode::Kind;
    ValueNode format{Kind::Format, "", "", {}, locationOf(node)};
    forEachNamedChild(node, [&](TSNode part) {
      std::string_view type = typeOf(part);
      if (type == "string_content" || type == "escape_sequence") format.text += textOf(part);
      if (type != "interpolation") return;
      format.text += "{}";
      TSNode expression = field(part, kField.expression);
      if (ts_node_is_null(expression) && ts_node_named_child_count(part) > 0) expression = ts_node_named_child(part, 0);
      format.operands.push_back(valueOf(expression, depth + 1));
    });
    if (format.operands.empty()) format.kind = Kind::Literal;
    return addValue(std::move(format));
  }

  // "cuda:%d" % x and "cuda:{}".format(x): the template with "{}" for each operand.
  int formatNode(std::string templateText, TSNode arguments, int depth, Location where) const {
    ValueNode format{ValueNode::Kind::Format, std::move(templateText), "", {}, where};
    if (typeOf(arguments) == "tuple" || typeOf(arguments) == "argument_list") {
      forEachNamedChild(arguments, [&](TSNode element) {
        std::string_view type = typeOf(element);
        if (type != "comment" && type != "keyword_argument" && format.operands.size() < 16) format.operands.push_back(valueOf(element, depth + 1));
      });
    } else {
      format.operands.push_back(valueOf(arguments, depth + 1));
    }
    return addValue(std::move(format));
  }

  // printf-style conversions (`%d`, `%02d`, `%s`) as "{}"; `%%` as `%`.
  static std::string percentTemplate(const std::string& format) {
    std::string out;
    for (size_t i = 0; i < format.size(); ++i) {
      if (format[i] != '%') {
        out += format[i];
        continue;
      }
      if (i + 1 < format.size() && format[i + 1] == '%') {
        out += '%';
        ++i;
        continue;
      }
      size_t j = i + 1;
      while (j < format.size() && std::strchr("#0- +.0123456789", format[j])) ++j;
      out += "{}";
      i = j;  // the conversion letter
    }
    return out;
  }

  // "{}", "{0}" and "{name}" fields as "{}"; `{{` and `}}` as braces.
  static std::string braceTemplate(const std::string& format) {
    std::string out;
    for (size_t i = 0; i < format.size(); ++i) {
      char c = format[i];
      if ((c == '{' || c == '}') && i + 1 < format.size() && format[i + 1] == c) {
        out += c;
        ++i;
      } else if (c == '{') {
        size_t close = format.find('}', i);
        if (close == std::string::npos) return out + format.substr(i);
        out += "{}";
        i = close;
      } else {
        out += c;
      }
    }
    return out;
  }

  // A call's value: the environment reads, int()/str() seen through, "...".format(...), else a
  // Call node with its arguments.
  int callValueNode(TSNode node, int depth) const {
    using Kind = ValueNode::Kind;
    TSNode function = field(node, kField.function), arguments = field(node, kField.arguments);
    Location where = locationOf(node);
    std::vector<TSNode> positional;
    forEachNamedChild(arguments, [&](TSNode a) {
      std::string_view type = typeOf(a);
      if (type != "comment" && type != "keyword_argument") positional.push_back(a);
    });
    std::string dotted = dottedOf(function);
    if ((dotted == "int" || dotted == "str") && names_.isBuiltin(dotted) && !positional.empty()) return valueOf(positional.front(), depth + 1);
    if (typeOf(function) == "attribute") {
      std::string method = textOf(field(function, kField.attribute));
      TSNode object = field(function, kField.object);
      if (method == "format" && (typeOf(object) == "string" || typeOf(object) == "concatenated_string")) {
        if (auto format = stringValueOf(object)) return formatNode(braceTemplate(*format), arguments, depth, where);
      }
      bool environGet = (method == "get" || method == "setdefault") && isEnviron(object);
      if ((environGet || names_.qualify(dotted) == "os.getenv") && !positional.empty()) {
        if (auto key = stringValueOf(positional.front())) {
          ValueNode read{Kind::Environment, *key, "", {}, where};
          if (positional.size() > 1) read.operands.push_back(valueOf(positional[1], depth + 1));
          return addValue(std::move(read));
        }
      }
    }
    if (dotted.empty()) return addValue({Kind::Unknown, clipped(node), "", {}, where});
    std::string qualified = names_.qualify(dotted);
    if (!equivalences_.functionReturns.empty() && qualified.find('.') != std::string::npos) recordOtherFileReturns(qualified, where);
    ValueNode call{Kind::Call, qualified.empty() ? dotted : qualified, "", {}, where};
    forEachNamedChild(arguments, [&](TSNode a) {
      std::string_view type = typeOf(a);
      if (type == "comment" || call.operands.size() >= 16) return;
      if (type != "keyword_argument") return call.operands.push_back(valueOf(a, depth + 1));
      int value = valueOf(field(a, kField.value), depth + 1);
      model_.values[static_cast<size_t>(value)].keyword = textOf(field(a, kField.name));
      call.operands.push_back(value);
    });
    return addValue(std::move(call));
  }

  // The returns of another file's function that `qualified` (a call's callee, as the imports name
  // it) is, once per file (kOtherFileReturns): the function whose module the import names.
  void recordOtherFileReturns(const std::string& qualified, Location where) const {
    if (!otherFileReturns_.insert(qualified).second) return;
    size_t dot = qualified.rfind('.');
    std::string imported = qualified.substr(0, dot), name = qualified.substr(dot + 1);
    const std::vector<TracedValue>* returns = nullptr;
    for (const auto& [key, values] : equivalences_.functionReturns) {
      size_t colon = key.rfind(':');
      if (colon == std::string::npos || key.substr(colon + 1) != name || !moduleNamedBy(key.substr(0, colon), imported)) continue;
      if (returns) return;  // two functions the import may name: neither is known to be the one
      returns = &values;
    }
    if (!returns || returns->empty()) return;
    ValueNode any{ValueNode::Kind::OneOf, qualified, "", {}, where};
    for (const TracedValue& value : *returns) {
      int offset = static_cast<int>(model_.values.size());
      for (ValueNode node : value.nodes) {
        for (int& operand : node.operands) operand += offset;
        model_.values.push_back(std::move(node));
      }
      if (!value.nodes.empty()) any.operands.push_back(offset);
    }
    model_.returns.push_back({qualified, addValue(std::move(any)), kOtherFileReturns, {}, where});
  }

  void onSubscriptAssignment(TSNode target, TSNode right) {
    forgetChangedEnvironmentCopy(field(target, kField.value));
    if (!isEnviron(field(target, kField.value))) return;
    auto key = stringValueOf(field(target, kField.subscript));
    if (!key || ts_node_is_null(right)) return;
    model_.settings.push_back({*key, stringValueOf(right).value_or(""), locationOf(target), true});
    bind(environmentBinding(*key), valueOf(right), target);
  }

  // A name holding a copy of the environment that the code then changes (`env["RANK"] = ...`,
  // `env.update(...)`, `env.pop(...)`): from there on its items are no longer the environment's, and
  // the name holds a value not read here.
  void forgetChangedEnvironmentCopy(TSNode container) {
    if (typeOf(container) != "identifier") return;
    std::string name = textOf(container);
    auto assigned = assigned_.find(name);
    if (assigned == assigned_.end() || assigned->second.find("environ") == std::string::npos) return;
    bind(name, -1, container);
    assigned_.erase(assigned);
  }

  bool isEnviron(TSNode node) const {
    std::string dotted = dottedOf(node);
    return !dotted.empty() && names_.qualify(dotted) == "os.environ";
  }

  // The index of a run's table, built once per thread rather than for every file: a run's files
  // share one table (compared, not rebuilt, for each).
  static const GroupWrapperIndex& wrapperIndex(const std::set<std::string>& keys) {
    thread_local std::set<std::string> builtFor;
    thread_local GroupWrapperIndex index;
    if (builtFor != keys) {
      index = GroupWrapperIndex(keys);
      builtFor = keys;
    }
    return index;
  }

  // A call of a function the project-wide table found creating groups, through the file's imports
  // (a module's function), `self` (a method) or its bare name (a nested function).
  bool isInferredWrapper(TSNode function, TSNode arguments, const std::string& dotted, const std::string& qualified) const {
    if (wrappers_.empty() || dotted.empty()) return false;
    CallInFunction call;
    call.name = dotted.substr(dotted.rfind('.') + 1);
    // An alias (`from pkg.ps import create_group as cg`) is looked up under the name it imports.
    std::string defined = qualified.empty() ? call.name : qualified.substr(qualified.rfind('.') + 1);
    if (!wrappers_.names(call.name) && !wrappers_.names(defined)) return false;  // most calls: no wrapper has the name
    call.qualifiedName = qualified;
    if (qualified.empty()) {
      std::string head = dotted.substr(0, dotted.find('.'));
      if (auto it = relativeImports_.find(head); it != relativeImports_.end()) call.qualifiedName = it->second + dotted.substr(head.size());
    }
    call.onAttribute = typeOf(function) == "attribute";
    call.onSelf = dotted == "self." + call.name || dotted == "cls." + call.name;
    std::string key = wrappers_.reached(call, module_);
    return !key.empty() && !switchedOff(key, arguments);
  }

  // Whether the call's arguments pass False or None for a keyword that turns wrapper `key`'s
  // creation off (`DeviceMesh(..., _init_backend=False)`).
  bool switchedOff(const std::string& key, TSNode arguments) const {
    auto it = equivalences_.groupWrapperSwitches.find(key);
    if (it == equivalences_.groupWrapperSwitches.end()) return false;
    std::vector<std::string> off = keywordsPassedOff(arguments, text_);
    return std::any_of(off.begin(), off.end(), [&](const std::string& k) { return it->second.contains(k); });
  }

  // Where the project model saw this file's function `name` called in a loop (a module's function,
  // a method or a nested function of that name here); empty if nowhere.
  std::string calledInLoopAt(const std::string& name, const std::string& owner) const {
    const std::map<std::string, std::string>& table = equivalences_.functionsCalledInLoops;
    if (table.empty()) return "";
    if (!owner.empty())
      if (auto it = table.find(modelStepKey(module_, owner, name)); it != table.end()) return it->second;
    for (const char* scope : {":", "#self:", "#local:"})
      if (auto it = table.find(module_ + scope + name); it != table.end()) return it->second;
    return "";
  }

  // A function the project's group wrappers, inferred or configured, name.
  bool isGroupWrapperFunction(const std::string& name) const {
    return isGroupWrapperFunctionName(wrappers_, equivalences_.groupWrappers, name);
  }

  bool isConfiguredWrapper(const std::string& spelling) const {
    for (const std::string& w : equivalences_.groupWrappers)
      if (w == spelling) return true;
    return false;
  }

  void onCall(TSNode node) {
    TSNode function = field(node, kField.function);
    std::string dotted = dottedOf(function);
    if (typeOf(function) == "attribute") {
      std::string method = textOf(field(function, kField.attribute));
      if (method == "update" || method == "pop" || method == "setdefault" || method == "clear" || method == "popitem")
        forgetChangedEnvironmentCopy(field(function, kField.object));
      if (method == "append") bindAppendedInLoop(field(function, kField.object), node);
    }
    // A call through a dict's entry (`_SAVED["new_group"](ranks)`) may be one of torch's functions
    // kept there (keepSaved): recorded aside, it joins the calls if so.
    bool throughEntry = typeOf(function) == "subscript" && typeOf(field(function, kField.subscript)) == "string";
    // A method of a computed object (`Net().cuda()`) has no qualified name, only its spelling.
    if (dotted.empty() && typeOf(function) != "attribute" && !throughEntry) return;
    Call call;
    call.spelling = dotted.empty() ? snippetOf(function) : dotted;
    call.qualifiedName = dotted.empty() ? "" : names_.qualify(dotted);
    // torch's own functions are torch's, whatever the project names its helpers.
    bool torchName = call.qualifiedName.starts_with("torch.");
    std::string manyGroups = torchName || call.qualifiedName.empty() ? "" : manyGroupsCreatorFor(call.qualifiedName);
    // A library function the tree defines itself is the tree's wrapper.
    if (!manyGroups.empty() && equivalences_.libraryFunctionsTreeDefines.contains(call.qualifiedName)) manyGroups.clear();
    if (!manyGroups.empty()) {
      call.qualifiedName = manyGroups;  // a library's call that creates a group per block of ranks
    } else if (isConfiguredWrapper(call.qualifiedName) || isConfiguredWrapper(dotted) ||
        (!torchName && isInferredWrapper(function, field(node, kField.arguments), dotted, call.qualifiedName))) {
      call.qualifiedName = "torch.distributed.new_group";
    } else if (!torchName && typeOf(function) == "attribute") {
      // A group creator reached through a receiver not resolved here (a project's own mirror of
      // torch.distributed, an attribute of an object made elsewhere) is known by its last name.
      std::string method = textOf(field(function, kField.attribute));
      if (groupCreatorNames().contains(method)) call.qualifiedName = "torch.distributed." + method;
    }
    call.where = locationOf(node);
    call.loopDepth = loopDepth_;
    if (function_ >= 0) {
      call.function = functions_[function_];
      call.functionId = function_;
      call.inGroupWrapper = functionIsWrapper_[static_cast<size_t>(function_)];
      call.calledInLoopAt = functionCalledInLoopAt_[static_cast<size_t>(function_)];
    }
    if (arm_ >= 0) call.branches = armsHere();
    collectArguments(field(node, kField.arguments), call);
    if (dotted == "isinstance" && names_.isBuiltin("isinstance")) onIsinstance(function, field(node, kField.arguments));
    onEnvironmentCall(function, field(node, kField.arguments), call);
    if (throughEntry) return savedEntryCalls_.emplace_back(std::move(call), function), void();
    // `self.x(...)`, `cls.x(...)`, `Class.x(...)`: a class's attribute that may hold one of torch's
    // functions (keepSaved).
    if (call.qualifiedName.empty() && std::count(dotted.begin(), dotted.end(), '.') == 1)
      savedCandidates_.emplace_back(model_.calls.size(), function);
    model_.calls.push_back(std::move(call));
  }

  void collectArguments(TSNode list, Call& call) const {
    if (typeOf(list) != "argument_list") return;
    call.hasArgumentList = formatStringDepth_ == 0;
    call.nextArgumentAt = ts_node_start_byte(list) + 1;
    forEachNamedChild(list, [&](TSNode arg) {
      if (typeOf(arg) == "comment") return;
      call.nextArgumentAt = ts_node_end_byte(arg);
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
      a.value = valueOf(value);
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

  // Every check of one isinstance call carries the same callee (the word `isinstance`) and
  // operand, so a fix that rewrites the call is the same edit from each of its classes.
  void onIsinstance(TSNode callee, TSNode arguments) {
    std::vector<TSNode> args;  // comments between the arguments are named children too
    forEachNamedChild(arguments, [&](TSNode arg) {
      if (typeOf(arg) != "comment") args.push_back(arg);
    });
    if (args.size() < 2) return;
    TSNode object = args[0], classes = args[1];
    auto record = [&](TSNode cls) {
      if (TypeCheck* check = recordTypeCheck(TypeCheck::Kind::Isinstance, cls)) {
        check->callee = rangeOf(callee);
        check->operand = rangeOf(object);
        // A call laid out over several lines is one check: it is reported where it starts, the
        // line a reader (and a suppression comment) puts it on.
        Location start = locationOf(callee);
        if (start.line < check->where.line) check->where = start;
      }
    };
    if (typeOf(classes) != "tuple") return record(classes);
    forEachNamedChild(classes, record);
  }

  // A node's bytes, for fixes; empty inside an f-string (formatStringDepth_).
  Range rangeOf(TSNode node) const {
    if (formatStringDepth_ > 0) return {};
    return {ts_node_start_byte(node), ts_node_end_byte(node)};
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
    if (ts_node_start_byte(lhs) == ts_node_start_byte(node) && formatStringDepth_ == 0) {
      cmp.literalSide = {ts_node_end_byte(lhs), ts_node_end_byte(node)};
    }
    model_.comparisons.push_back(std::move(cmp));
  }

  bool isTypeCall(TSNode node) const {
    if (typeOf(node) != "call") return false;
    return snippetOf(field(node, kField.function)) == "type" && names_.isBuiltin("type");
  }

  void onAttribute(TSNode node) {
    TSNode object = field(node, kField.object);
    AttributeUse use{textOf(field(node, kField.attribute)), snippetOf(object), locationOf(field(node, kField.attribute))};
    use.object = rangeOf(object);
    if (formatStringDepth_ == 0) use.dotName = {ts_node_end_byte(object), ts_node_end_byte(node)};
    // Not ts_node_parent, which walks down from the root: quadratic in a deep chain of attributes.
    use.called = ts_node_eq(calleeOfLastCall_, node);
    model_.attributes.push_back(std::move(use));
  }

  void onString(TSNode node) {
    if (auto value = stringValueOf(node)) model_.strings.push_back({*value, locationOf(node), inDocumentation_});
  }

  // The check recorded, or null when the class expression names nothing.
  TypeCheck* recordTypeCheck(TypeCheck::Kind kind, TSNode classExpr) {
    std::string dotted = dottedOf(classExpr);
    if (dotted.empty()) return nullptr;
    model_.typeChecks.push_back({kind, names_.qualify(dotted), dotted, locationOf(classExpr)});
    return &model_.typeChecks.back();
  }

  const std::string& text_;
  SourceModel& model_;
  const NameEquivalences& equivalences_;
  const GroupWrapperIndex& wrappers_;  // the inferred wrappers, by name
  std::string module_;          // this file's, for the wrappers; empty when there are none
  mutable std::set<std::string> otherFileReturns_;  // callees whose returns were looked up
  std::unordered_map<std::string, std::string> relativeImports_;  // name -> ".module.name"
  PythonNames names_;
  std::unordered_map<std::string, std::string> constants_;  // name -> string value known so far
  // (function, parameter) -> its string default; an empty optional when it has none.
  std::map<std::pair<int, std::string>, std::optional<std::string>> parameters_;
  std::unordered_map<std::string, std::string> assigned_;   // name -> its last assigned value's text
  const std::vector<ParseRegion>& leftOut_;
  size_t nextLeftOut_ = 0;
  int loopDepth_ = 0;
  // Inside an f-string's interpolation: code a fix may not write into, since what fixes write
  // holds quotes, which the f-string's own may end before Python 3.12 (PEP 701). Ranges for
  // fixes stay empty there.
  int formatStringDepth_ = 0;
  TSNode calleeOfLastCall_{};      // the function of the call visited last
  bool inDocumentation_ = false;  // inside a print/log call or a help= argument
  int function_ = -1;             // the innermost function, in functions_
  bool classBody_ = false;        // directly in a class's body (not in one of its methods)
  int arm_ = -1;                  // the innermost arm of an `if`, in arms_
  int statements_ = 0;            // `if` statements so far
  bool anySaved_ = false;         // a function of torch kept in a class attribute or a dict
  std::vector<std::pair<size_t, TSNode>> savedCandidates_;  // calls (index, callee) through `a.b`
  std::vector<std::pair<Call, TSNode>> savedEntryCalls_;    // calls through `a["k"]`, not recorded yet
  std::vector<std::string> functions_;
  std::vector<bool> functionIsWrapper_;  // per function: one of the project's group wrappers
  std::vector<std::string> functionCalledInLoopAt_;  // per function: Call::calledInLoopAt
  std::vector<Arm> arms_;
  mutable std::deque<TSTreeCursor> cursors_;  // forEachNamedChild's, by nesting level
  mutable size_t openCursors_ = 0;
};

}  // namespace

std::string environmentBinding(std::string_view key) { return "os.environ[\"" + std::string(key) + "\"]"; }

SourceModel parsePython(const std::string& path, const std::string& text, const NameEquivalences& names,
                        const std::vector<ParseRegion>& regions, const std::vector<ParseRegion>& leftOut) {
  SourceModel model;
  model.path = path;
  model.language = Language::Python;
  PythonTree tree = parsePythonRegions(text, regions);
  if (!tree) return model;
  TSNode root = ts_tree_root_node(tree.get());
  model.hadSyntaxErrors = ts_node_has_error(root);
  PythonWalker walker(text, model, names, leftOut);
  walker.walk(root);
  walker.bindLeftOutBefore(text.size() + 1);
  return model;
}

}  // namespace nccl_migrate::lint
