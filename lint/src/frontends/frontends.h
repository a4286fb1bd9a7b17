// Frontends turn one file's text into a SourceModel. They are the only code that touches a
// parser's API.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nccl_migrate/lint/linter.h"
#include "nccl_migrate/lint/source_model.h"

namespace nccl_migrate::lint {

// What the user's configuration tells a frontend about names.
struct NameEquivalences {
  std::map<std::string, std::string> modules;  // "deepspeed.comm" -> "torch.distributed"
  std::vector<std::string> groupWrappers;      // callees that stand for torch.distributed.new_group
};

// Python through tree-sitter-python: error tolerant, so a file with a syntax error keeps its
// other findings.
SourceModel parsePython(const std::string& path, const std::string& text, const NameEquivalences& names);

// Jupyter notebooks: the code cells, joined, through parsePython. Lines count from the first
// code cell's first line. Throws std::runtime_error when the file is not notebook JSON.
SourceModel parseNotebook(const std::string& path, const std::string& text, const NameEquivalences& names);

// C/C++/CUDA through Clang's raw lexer: needs no headers and no compile database.
SourceModel lexCpp(const std::string& path, const std::string& text);

// C/C++/CUDA through Clang's AST with the given compile commands; adds to `model` the type checks
// the lexer cannot see (typedefs, aliases, templates). Missing headers are not fatal: torch's
// classes are stubbed. Returns a note when the file could not be parsed at all.
std::string addCppAstFacts(SourceModel& model, const std::string& text, const CppAstOptions& options);

// Shell scripts, Dockerfiles and configuration files: assignments and exported values.
SourceModel scanShell(const std::string& path, const std::string& text);
SourceModel scanDockerfile(const std::string& path, const std::string& text);
SourceModel scanConfig(const std::string& path, const std::string& text);

}  // namespace nccl_migrate::lint
