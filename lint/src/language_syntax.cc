// Each language's check that a fix left its file readable, behind engine/fix_check.h: the engine
// asks, and this file, which knows the languages, answers (the engine includes none of them).
#include "cpp/cpp_brackets.h"
#include "engine/file_discovery.h"
#include "engine/fix_check.h"
#include "python/python_parse.h"

namespace nccl_migrate::lint {

std::optional<std::string> fixBreaksSyntax(const std::string& path, const std::string& before, const std::string& after) {
  std::optional<Language> language = languageByName(path);
  if (language == Language::Python && !path.ends_with(".ipynb")) {
    if (pythonHasSyntaxErrors(after) && !pythonHasSyntaxErrors(before)) return "the fixed file would not parse as Python";
  } else if (language == Language::Cpp) {
    if (!cppBracketsBalance(after) && cppBracketsBalance(before)) return "the fixed file's brackets would not balance";
  }
  return std::nullopt;
}

}  // namespace nccl_migrate::lint
