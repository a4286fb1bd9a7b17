// Fuzz target: the configuration scanners (YAML, TOML through toml++, JSON, .env); the first byte
// picks the format, the rest is the file.
#include "settings/settings_frontends.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr const char* kNames[] = {"fuzz.yaml", "fuzz.toml", "fuzz.json", ".env"};
  const char* name = kNames[data[0] % 4];
  std::string text = nccl_migrate::lint::fuzz::textOf(data + 1, size - 1);
  (void)nccl_migrate::lint::scanConfig(name, text);
  nccl_migrate::lint::fuzz::lintAs(name, text);
  return 0;
}
