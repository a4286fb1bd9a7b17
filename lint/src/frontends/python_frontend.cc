// Python frontend: walks a tree-sitter-python syntax tree in source order, keeping an import
// and alias table, and records type checks and calls with their qualified names.
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include <tree_sitter/api.h>

#include "frontends.h"
#include "python_names.h"

extern "C" const TSLanguage* tree_sitter_python();

namespace nccl_migrate::lint {
namespace {

using TreePtr = std::unique_ptr<TSTree, decltype(&ts_tree_delete)>;
using ParserPtr = std::unique_ptr<TSParser, decltype(&ts_parser_delete)>;

class PythonWalker {
 public:
  PythonWalker(const std::string& text, SourceModel& model) : text_(text), model_(model) {}

  void walk(TSNode node) {
    std::string_view type = ts_node_type(node);
    if (type == "import_statement") return onImport(node);
    if (type == "import_from_statement") return onFromImport(node);
    if (type == "class_definition") onClass(node);
    if (type == "function_definition") onFunction(node);
    if (type == "assignment") onAssignment(node);
    if (type == "call") onCall(node);
    if (type == "comparison_operator") onComparison(node);
    uint32_t n = ts_node_named_child_count(node);
    for (uint32_t i = 0; i < n; ++i) walk(ts_node_named_child(node, i));
  }

 private:
  std::string textOf(TSNode node) const {
    uint32_t begin = ts_node_start_byte(node), end = ts_node_end_byte(node);
    return text_.substr(begin, end - begin);
  }

  static Location locationOf(TSNode node) {
    TSPoint p = ts_node_start_point(node);
    return {static_cast<int>(p.row) + 1, static_cast<int>(p.column) + 1};
  }

  static TSNode field(TSNode node, const char* name) {
    return ts_node_child_by_field_name(node, name, static_cast<uint32_t>(std::strlen(name)));
  }

  // Dotted spelling of an identifier or attribute chain ("dist.ProcessGroupNCCL"); empty for
  // anything else (a call, a subscript), which cannot name a module-level object.
  std::string dottedOf(TSNode node) const {
    std::string_view type = ts_node_type(node);
    if (type == "identifier" || type == "dotted_name") return textOf(node);
    if (type != "attribute") return "";
    std::string object = dottedOf(field(node, "object"));
    if (object.empty()) return "";
    return object + "." + textOf(field(node, "attribute"));
  }

  void onImport(TSNode node) {
    uint32_t n = ts_node_named_child_count(node);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode child = ts_node_named_child(node, i);
      if (std::string_view(ts_node_type(child)) == "aliased_import") {
        names_.bindImport(textOf(field(child, "name")), textOf(field(child, "alias")));
      } else {
        names_.bindImport(textOf(child), "");
      }
    }
  }

  void onFromImport(TSNode node) {
    TSNode module = field(node, "module_name");
    if (std::string_view(ts_node_type(module)) == "relative_import") return;  // project-local
    std::string moduleName = textOf(module);
    uint32_t n = ts_node_named_child_count(node);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode child = ts_node_named_child(node, i);
      if (ts_node_eq(child, module)) continue;
      std::string_view type = ts_node_type(child);
      if (type == "aliased_import") {
        names_.bindFromImport(moduleName, textOf(field(child, "name")), textOf(field(child, "alias")));
      } else if (type == "dotted_name") {
        names_.bindFromImport(moduleName, textOf(child), "");
      }
    }
  }

  void onClass(TSNode node) {
    TSNode bases = field(node, "superclasses");
    if (!ts_node_is_null(bases)) {
      uint32_t n = ts_node_named_child_count(bases);
      for (uint32_t i = 0; i < n; ++i) recordTypeCheck(TypeCheck::Kind::Subclass, ts_node_named_child(bases, i));
    }
    names_.bindLocalDefinition(textOf(field(node, "name")));
  }

  void onFunction(TSNode node) { names_.bindLocalDefinition(textOf(field(node, "name"))); }

  // `PG = dist.ProcessGroupNCCL` makes PG an alias; any other assignment shadows the name.
  void onAssignment(TSNode node) {
    TSNode left = field(node, "left");
    if (std::string_view(ts_node_type(left)) != "identifier") return;
    TSNode right = field(node, "right");
    std::string dotted = ts_node_is_null(right) ? "" : dottedOf(right);
    names_.bindAssignment(textOf(left), dotted.empty() ? "" : names_.qualify(dotted));
  }

  void onCall(TSNode node) {
    TSNode function = field(node, "function");
    std::string dotted = dottedOf(function);
    if (dotted.empty()) return;
    model_.calls.push_back({names_.qualify(dotted), dotted, locationOf(node)});
    if (dotted == "isinstance" && names_.isBuiltin("isinstance")) onIsinstance(field(node, "arguments"));
  }

  void onIsinstance(TSNode arguments) {
    if (ts_node_named_child_count(arguments) < 2) return;
    TSNode classes = ts_node_named_child(arguments, 1);
    if (std::string_view(ts_node_type(classes)) != "tuple") {
      return recordTypeCheck(TypeCheck::Kind::Isinstance, classes);
    }
    uint32_t n = ts_node_named_child_count(classes);
    for (uint32_t i = 0; i < n; ++i) recordTypeCheck(TypeCheck::Kind::Isinstance, ts_node_named_child(classes, i));
  }

  // `type(x) is C`, `type(x) == C` and the mirrored forms.
  void onComparison(TSNode node) {
    if (ts_node_named_child_count(node) != 2) return;
    TSNode lhs = ts_node_named_child(node, 0), rhs = ts_node_named_child(node, 1);
    if (isTypeCall(lhs)) recordTypeCheck(TypeCheck::Kind::TypeIdentity, rhs);
    else if (isTypeCall(rhs)) recordTypeCheck(TypeCheck::Kind::TypeIdentity, lhs);
  }

  bool isTypeCall(TSNode node) const {
    if (std::string_view(ts_node_type(node)) != "call") return false;
    return textOf(field(node, "function")) == "type" && names_.isBuiltin("type");
  }

  void recordTypeCheck(TypeCheck::Kind kind, TSNode classExpr) {
    std::string dotted = dottedOf(classExpr);
    if (dotted.empty()) return;
    model_.typeChecks.push_back({kind, names_.qualify(dotted), dotted, locationOf(classExpr)});
  }

  const std::string& text_;
  SourceModel& model_;
  PythonNames names_;
};

}  // namespace

SourceModel parsePython(const std::string& path, const std::string& text) {
  SourceModel model;
  model.path = path;
  model.language = Language::Python;
  ParserPtr parser(ts_parser_new(), &ts_parser_delete);
  ts_parser_set_language(parser.get(), tree_sitter_python());
  TreePtr tree(ts_parser_parse_string(parser.get(), nullptr, text.data(), static_cast<uint32_t>(text.size())),
               &ts_tree_delete);
  if (!tree) return model;
  TSNode root = ts_tree_root_node(tree.get());
  model.hadSyntaxErrors = ts_node_has_error(root);
  PythonWalker(text, model).walk(root);
  return model;
}

}  // namespace nccl_migrate::lint
