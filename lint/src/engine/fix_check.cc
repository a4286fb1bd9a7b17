// Syntax checks of fixed files, before they are written.
#include "fix_check.h"

#include <vector>

#include "engine/file_discovery.h"
#include "frontends/python_parse.h"

namespace nccl_migrate::lint {
namespace {

bool pythonHasErrors(const std::string& text) {
  PythonTree tree = parsePythonRegions(text, {});
  return !tree || ts_node_has_error(ts_tree_root_node(tree.get()));
}

// (), [] and {} outside comments, string and character literals, each closed by its own kind.
// A lexical check only: enough to catch an edit that cut a parenthesis or left one open.
bool cppBalanced(const std::string& text) {
  std::vector<char> open;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? text.size() : end + 1;
    } else if (c == '"' || c == '\'') {
      for (++i; i < text.size() && text[i] != c && text[i] != '\n'; ++i)
        if (text[i] == '\\') ++i;
    } else if (c == '(' || c == '[' || c == '{') {
      open.push_back(c);
    } else if (c == ')' || c == ']' || c == '}') {
      char want = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (open.empty() || open.back() != want) return false;
      open.pop_back();
    }
  }
  return open.empty();
}

}  // namespace

std::optional<std::string> fixBreaksSyntax(const std::string& path, const std::string& before, const std::string& after) {
  std::optional<Language> language = languageByName(path);
  if (language == Language::Python && !path.ends_with(".ipynb")) {
    if (pythonHasErrors(after) && !pythonHasErrors(before)) return "the fixed file would not parse as Python";
  } else if (language == Language::Cpp) {
    if (!cppBalanced(after) && cppBalanced(before)) return "the fixed file's brackets would not balance";
  }
  return std::nullopt;
}

}  // namespace nccl_migrate::lint
