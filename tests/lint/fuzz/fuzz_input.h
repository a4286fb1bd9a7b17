// What every lint fuzz target shares: the input as text, and the whole engine on it under a
// name that picks the frontend, so each target reaches the rules and the suppressions too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint::fuzz {

inline std::string textOf(const uint8_t* data, size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

// The engine on one in-memory file (no worker processes: a crash must reach libFuzzer).
inline void lintAs(const char* name, const std::string& text) {
  LintOptions options;
  options.config.groupWrappers = {"create_group"};
  (void)lintSource(name, text, options);
}

}  // namespace nccl_migrate::lint::fuzz
