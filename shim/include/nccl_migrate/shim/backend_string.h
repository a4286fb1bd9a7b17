// The backend argument of init_process_group: one name ("nccl") or per-device pairs
// ("cpu:gloo,cuda:nccl"), split into entries so only the NCCL names get resolved.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "nccl_migrate/shim/outcome.h"

namespace nccl_migrate::shim {

struct DeviceBackend {
  std::string device;   // "cpu", "cuda", ...; empty for a plain name without devices
  std::string backend;  // as written ("gloo", "nccl", "NCCL", a custom name)
};

// Splits `text` like torch's BackendConfig: a string without ':' is one plain name; otherwise
// comma-separated "device:backend" pairs. Stricter than torch where torch would accept a string
// that later fails or silently misroutes tensors: empty entries, a missing or extra ':', an
// unknown device type (including one with spaces around it), and a device named twice are
// errors that say how to write the string.
Outcome<std::vector<DeviceBackend>> parseBackendString(std::string_view text);

// Joins entries back into the form init_process_group accepts.
std::string backendStringOf(const std::vector<DeviceBackend>& entries);

}  // namespace nccl_migrate::shim
