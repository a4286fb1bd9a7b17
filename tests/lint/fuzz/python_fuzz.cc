// Fuzz target: the Python frontend (tree-sitter walk, statement blocks, the region choice) and
// the text scans of the project tables that read Python.
#include "python/group_wrappers.h"
#include "python/python_regions.h"
#include "python/python_frontend.h"
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
  std::vector<size_t> wordEnds;  // words at arbitrary places, for the region choice
  for (size_t at = 7; at <= text.size(); at += 97) wordEnds.push_back(at);
  std::vector<ParseRegion> leftOut;
  std::vector<ParseRegion> regions = pythonRegions(text, wordEnds, leftOut);
  (void)parsePython("fuzz.py", text, names, regions, leftOut);
  (void)functionsCalling(text, {"new_group", "make_group"});
  (void)inferGroupWrappers({text, text});
  fuzz::lintAs("fuzz.py", text);
  return 0;
}
