// Fuzz target: notebooks (the JSON reader, cell joining, and the Python frontend on the cells).
#include <exception>

#include "python/python_frontend.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text = nccl_migrate::lint::fuzz::textOf(data, size);
  try {
    nccl_migrate::lint::NotebookCode code = nccl_migrate::lint::notebookCode(text);
    for (int line = 0; line < 4; ++line) (void)code.locate({line, 1, 0});
  } catch (const std::exception&) {
    // Not notebook JSON: the engine skips such a file with a warning.
  }
  nccl_migrate::lint::fuzz::lintAs("fuzz.ipynb", text);
  return 0;
}
