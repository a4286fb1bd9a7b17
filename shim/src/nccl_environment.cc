// ncclEnvironment: see nccl_environment.h.
#include "nccl_migrate/shim/nccl_environment.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

namespace nccl_migrate::shim {
namespace {

std::string lowered(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// torch's boolean spellings (getCvarBool): 1, true, t, yes, y and 0, false, f, no, n, in any
// case; unset keeps the default.
std::optional<std::string> parseBool(const char* name, const std::optional<std::string>& value, bool& out) {
  if (!value) return std::nullopt;
  std::string v = lowered(*value);
  if (v == "1" || v == "true" || v == "t" || v == "yes" || v == "y") {
    out = true;
  } else if (v == "0" || v == "false" || v == "f" || v == "no" || v == "n") {
    out = false;
  } else {
    return std::string(name) + "='" + *value + "' is not a boolean: set 1 or 0";
  }
  return std::nullopt;
}

}  // namespace

Outcome<NcclEnvironment> ncclEnvironment(const JobSettings& settings) {
  NcclEnvironment env;
  auto blockingWait = settings.blockingWait ? settings.blockingWait : settings.legacyBlockingWait;
  const char* blockingName = settings.blockingWait ? "TORCH_NCCL_BLOCKING_WAIT" : "NCCL_BLOCKING_WAIT";
  if (auto error = parseBool(blockingName, blockingWait, env.blockingWait)) {
    return Outcome<NcclEnvironment>::failure(*error);
  }
  if (auto error = parseBool("TORCH_NCCL_USE_COMM_NONBLOCKING", settings.commNonblocking, env.commNonblocking)) {
    return Outcome<NcclEnvironment>::failure(*error);
  }
  if (settings.asyncErrorHandling) {
    const std::string& v = *settings.asyncErrorHandling;
    if (v.size() != 1 || v[0] < '0' || v[0] > '3') {
      return Outcome<NcclEnvironment>::failure("TORCH_NCCL_ASYNC_ERROR_HANDLING='" + v +
                                               "' is not a mode torch knows: set 0, 1, 2 or 3");
    }
    env.asyncErrorHandling = v[0] - '0';
  }
  return Outcome<NcclEnvironment>::success(env);
}

}  // namespace nccl_migrate::shim
