// parsePythonRegions: see python_parse.h.
#include "python/python_parse.h"

extern "C" const TSLanguage* tree_sitter_python();

namespace nccl_migrate::lint {

PythonTree parsePythonRegions(std::string_view text, const std::vector<ParseRegion>& regions) {
  using ParserPtr = std::unique_ptr<TSParser, decltype(&ts_parser_delete)>;
  thread_local ParserPtr parser = [] {
    ParserPtr p(ts_parser_new(), &ts_parser_delete);
    ts_parser_set_language(p.get(), tree_sitter_python());
    return p;
  }();
  std::vector<TSRange> ranges;
  ranges.reserve(regions.size());
  for (const ParseRegion& r : regions) {
    ranges.push_back({{r.beginRow, 0}, {r.endRow, r.endColumn}, static_cast<uint32_t>(r.begin), static_cast<uint32_t>(r.end)});
  }
  // An empty list restores the whole document for the parser's next file.
  ts_parser_set_included_ranges(parser.get(), ranges.data(), static_cast<uint32_t>(ranges.size()));
  return PythonTree(ts_parser_parse_string(parser.get(), nullptr, text.data(), static_cast<uint32_t>(text.size())),
                    &ts_tree_delete);
}

std::vector<std::string> keywordsPassedOff(TSNode arguments, std::string_view text) {
  std::vector<std::string> off;
  uint32_t n = ts_node_is_null(arguments) ? 0 : ts_node_named_child_count(arguments);
  for (uint32_t i = 0; i < n; ++i) {
    TSNode argument = ts_node_named_child(arguments, i);
    if (std::string_view(ts_node_type(argument)) != "keyword_argument") continue;
    TSNode value = ts_node_child_by_field_name(argument, "value", 5);
    TSNode name = ts_node_child_by_field_name(argument, "name", 4);
    if (ts_node_is_null(value) || ts_node_is_null(name)) continue;
    std::string_view type = ts_node_type(value);
    if (type == "false" || type == "none")
      off.emplace_back(text.substr(ts_node_start_byte(name), ts_node_end_byte(name) - ts_node_start_byte(name)));
  }
  return off;
}

bool pythonHasSyntaxErrors(const std::string& text) {
  PythonTree tree = parsePythonRegions(text, {});
  return !tree || ts_node_has_error(ts_tree_root_node(tree.get()));
}

}  // namespace nccl_migrate::lint
