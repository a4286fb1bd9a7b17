// Fuzz target: the C/C++/CUDA raw-lexer frontend and the header alias scan.
#include "cpp/cpp_aliases.h"
#include "cpp/cpp_frontend.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nccl_migrate::lint;
  std::string text = fuzz::textOf(data, size);
  (void)lexCpp("fuzz.cc", text);  // no folder: no headers are read
  (void)aliasesOf(text, "ProcessGroupNCCL");
  fuzz::lintAs("fuzz.cu", text);
  return 0;
}
