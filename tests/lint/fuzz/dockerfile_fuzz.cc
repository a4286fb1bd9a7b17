// Fuzz target: the Dockerfile scanner.
#include "settings/settings_frontends.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text = nccl_migrate::lint::fuzz::textOf(data, size);
  (void)nccl_migrate::lint::scanDockerfile("Dockerfile", text);
  nccl_migrate::lint::fuzz::lintAs("Dockerfile", text);
  return 0;
}
