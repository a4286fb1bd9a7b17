// Fuzz target: the Python frontend (tree-sitter walk, statement blocks, regions) and the text scans
// of the project tables that read Python.
#include "engine/group_wrappers.h"
#include "frontends/frontends.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nccl_migrate::lint;
  std::string text = fuzz::textOf(data, size);
  NameEquivalences names;
  names.modules = {{"deepspeed.comm", "torch.distributed"}};
  names.inferredGroupWrappers = {"make_group"};
  (void)parsePython("fuzz.py", text, names);
  std::vector<ParseRegion> blocks = pythonTopLevelBlocks(text);
  if (!blocks.empty()) (void)parsePython("fuzz.py", text, names, {blocks.front()}, {});
  (void)functionsCalling(text, {"new_group", "make_group"});
  (void)inferGroupWrappers({text, text});
  fuzz::lintAs("fuzz.py", text);
  return 0;
}
