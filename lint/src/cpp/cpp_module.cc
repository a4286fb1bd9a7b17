// The entry point of the C/C++ frontend module (see cpp_module.h): its one exported symbol.
#include "cpp/cpp_module.h"

extern "C" __attribute__((visibility("default"))) const nccl_migrate::lint::CppFrontendModule*
nccl_migrate_lint_cpp_frontend() {
  static const nccl_migrate::lint::CppFrontendModule kModule{&nccl_migrate::lint::clangLexCpp,
                                                             &nccl_migrate::lint::clangAddCppAstFacts};
  return &kModule;
}
