// Each language's layout of fixes, behind engine/fix_layout.h: the engine asks, and this file,
// which knows the languages, answers (the engine includes none of them). What no language needs
// to know lives here too: a definition's name, whether the file has it, which name is free.
#include <algorithm>
#include <cctype>

#include "cpp/cpp_fix_layout.h"
#include "engine/file_discovery.h"
#include "engine/fix_layout.h"
#include "nccl_migrate/lint/fixes.h"
#include "python/python_fix_layout.h"

namespace nccl_migrate::lint {
namespace {

bool identifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Where `word` occurs in `text` as a whole identifier, from `from`; npos when nowhere.
size_t findWord(const std::string& text, const std::string& word, size_t from = 0) {
  for (size_t at = text.find(word, from); at != std::string::npos; at = text.find(word, at + 1)) {
    bool starts = at == 0 || !identifierChar(text[at - 1]);
    bool ends = at + word.size() >= text.size() || !identifierChar(text[at + word.size()]);
    if (starts && ends) return at;
  }
  return std::string::npos;
}

std::string renamed(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = findWord(text, from); at != std::string::npos; at = findWord(text, from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// The first identifier written with `(` right after it, outside `//` comment lines.
std::string definedName(const std::string& definition) {
  size_t at = 0;
  while (at < definition.size()) {
    size_t end = definition.find('\n', at);
    if (end == std::string::npos) end = definition.size();
    std::string line = definition.substr(at, end - at);
    if (!line.starts_with("//")) {
      for (size_t paren = line.find('('); paren != std::string::npos; paren = line.find('(', paren + 1)) {
        size_t begin = paren;
        while (begin > 0 && identifierChar(line[begin - 1])) --begin;
        if (begin < paren) return line.substr(begin, paren - begin);
      }
    }
    at = end + 1;
  }
  return "";
}

// The line of `definition` that names it: the one the file must hold for the definition to be
// there already.
std::string signatureLine(const std::string& definition, const std::string& name) {
  size_t at = findWord(definition, name);
  if (at == std::string::npos) return "";
  size_t begin = definition.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return definition.substr(begin, definition.find('\n', at) - begin);
}

bool holdsLine(const std::string& text, const std::string& line) {
  for (size_t at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) {
    bool starts = at == 0 || text[at - 1] == '\n';
    bool ends = at + line.size() == text.size() || text[at + line.size()] == '\n' || text[at + line.size()] == '\r';
    if (starts && ends) return true;
  }
  return false;
}

}  // namespace

std::vector<Edit> layOutEdits(const std::string& path, const std::string& text, std::vector<Edit> edits) {
  std::optional<Language> language = languageByName(path);
  bool python = language == Language::Python && !path.ends_with(".ipynb");
  bool cpp = language == Language::Cpp;
  std::vector<Edit> definitions, out;
  for (Edit& e : edits) (e.range.begin == kDefinitionSite ? definitions : out).push_back(std::move(e));
  std::vector<std::string> helpers;
  for (const Edit& definition : definitions) {
    std::string name = definedName(definition.replacement);
    auto calls = [&](const Edit& e) { return findWord(e.replacement, name) != std::string::npos; };
    if (name.empty() || (!python && !cpp)) {
      std::erase_if(out, calls);  // a call of a definition the file cannot hold would not run
      continue;
    }
    // The name the file gives it already, else the first one it does not use.
    std::string chosen = name, definitionText = definition.replacement;
    bool present = false;
    for (int n = 2; n < 100; ++n) {
      definitionText = renamed(definition.replacement, name, chosen);
      if ((present = holdsLine(text, signatureLine(definitionText, chosen)))) break;
      if (findWord(text, chosen) == std::string::npos) break;
      chosen = name + (python ? "_" : "") + std::to_string(n);
    }
    size_t firstUse = text.size();
    for (Edit& e : out) {
      if (!calls(e)) continue;
      e.replacement = renamed(e.replacement, name, chosen);
      firstUse = std::min(firstUse, e.range.begin);
    }
    helpers.push_back(chosen);
    if (present) continue;
    out.push_back(python ? pythonDefinitionPlacement(text, definitionText, firstUse)
                         : cppDefinitionPlacement(text, definitionText, firstUse));
  }
  if (python && !helpers.empty()) out = layOutPythonCalls(text, std::move(out), helpers, pythonLineLength(path));
  std::stable_sort(out.begin(), out.end(), [](const Edit& a, const Edit& b) { return a.range.begin < b.range.begin; });
  return out;
}

}  // namespace nccl_migrate::lint
