// The C/C++ frontends are a module of their own (libnccl_migrate_lint_cpp.so), the only part of
// the linter that links Clang and LLVM. Loading those libraries takes ~13 ms of CPU, more than
// linting a whole Python package, so the engine loads the module only for runs with C/C++ files
// (cpp_module_loader.cc); lexCpp and addCppAstFacts in frontends.h call into it.
#pragma once

#include <stdexcept>
#include <string>

#include "cpp/cpp_frontend.h"

namespace nccl_migrate::lint {

// What the module offers; its layout is shared by the module and the engine, built together.
struct CppFrontendModule {
  SourceModel (*lexCpp)(const std::string& path, const std::string& text);
  std::string (*addCppAstFacts)(SourceModel& model, const std::string& text, const CppAstOptions& options);
};

// In the module: the Clang-based implementations behind the table.
SourceModel clangLexCpp(const std::string& path, const std::string& text);
std::string clangAddCppAstFacts(SourceModel& model, const std::string& text, const CppAstOptions& options);

// The module could not be loaded: an installation problem, not the linted file's.
struct CppFrontendMissing : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Loads the module (once per process; a forked worker inherits it). Throws CppFrontendMissing
// naming where it looked and why it failed.
const CppFrontendModule& cppFrontendModule();

}  // namespace nccl_migrate::lint

// The module's one exported symbol.
#define NCCL_MIGRATE_CPP_MODULE_ENTRY "nccl_migrate_lint_cpp_frontend"
extern "C" const nccl_migrate::lint::CppFrontendModule* nccl_migrate_lint_cpp_frontend();
