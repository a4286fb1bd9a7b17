// Parser for init_process_group's backend argument (see backend_string.h).
#include "nccl_migrate/shim/backend_string.h"

#include <algorithm>
#include <array>

#include "text.h"

namespace nccl_migrate::shim {
namespace {

using Entries = std::vector<DeviceBackend>;

// Device types torch's c10d maps to backends (Backend.default_device_backend_map and
// backend_capability). A misspelled device gets no backend, so its tensors fail only later.
constexpr std::array<std::string_view, 6> kDevices = {"cpu", "cuda", "hpu", "mps", "mtia", "xpu"};

constexpr std::string_view kForm = "write it as \"<device>:<backend>,<device>:<backend>\", e.g. \"cpu:gloo,cuda:nccl\"";

bool isKnownDevice(std::string_view device) {
  return std::find(kDevices.begin(), kDevices.end(), device) != kDevices.end();
}

std::string knownDevices() {
  std::vector<std::string> names(kDevices.begin(), kDevices.end());
  return joined(names, ", ");
}

std::string deviceError(std::string_view device, std::string_view text) {
  std::string fix;
  std::string clean = lowered(trimmed(device));
  if (clean != device && isKnownDevice(clean)) {
    fix = "remove the spaces around \"" + clean + "\"";
  } else if (clean == "gpu") {
    fix = "the device type for NVIDIA GPUs is \"cuda\"";
  } else {
    fix = "use one of " + knownDevices();
  }
  return "unknown device type " + quoted(device) + " in backend " + quoted(text) + "; " + fix + ".";
}

Outcome<DeviceBackend> parsePair(std::string_view pair, std::string_view text) {
  if (pair.empty()) {
    return Outcome<DeviceBackend>::failure("empty entry in backend " + quoted(text) +
                                           " (two commas in a row, or a comma at an end); remove the extra comma.");
  }
  auto parts = splitOn(pair, ':');
  if (parts.size() == 1) {
    return Outcome<DeviceBackend>::failure("entry " + quoted(pair) + " in backend " + quoted(text) +
                                           " is not a device:backend pair; " + std::string(kForm) + ".");
  }
  if (parts.size() > 2) {
    return Outcome<DeviceBackend>::failure("entry " + quoted(pair) + " in backend " + quoted(text) +
                                           " has more than one ':'; " + std::string(kForm) + ".");
  }
  std::string device = lowered(parts[0]);
  if (!isKnownDevice(device)) return Outcome<DeviceBackend>::failure(deviceError(parts[0], text));
  if (trimmed(parts[1]).empty()) {
    return Outcome<DeviceBackend>::failure("entry " + quoted(pair) + " in backend " + quoted(text) +
                                           " names no backend for " + device + "; " + std::string(kForm) + ".");
  }
  if (trimmed(parts[1]) != parts[1]) {
    return Outcome<DeviceBackend>::failure("backend name " + quoted(parts[1]) + " in " + quoted(text) +
                                           " has spaces around it, which torch keeps as part of the name; "
                                           "remove them.");
  }
  return Outcome<DeviceBackend>::success({device, std::string(parts[1])});
}

}  // namespace

Outcome<Entries> parseBackendString(std::string_view text) {
  if (text.find(':') == std::string_view::npos) {
    if (text.find(',') != std::string_view::npos) {
      return Outcome<Entries>::failure("backend " + quoted(text) + " lists several backends without devices; " +
                                       std::string(kForm) + ".");
    }
    if (trimmed(text).empty()) {
      return Outcome<Entries>::failure("the backend name is empty; pass a name such as \"nccl\" or \"gloo\", or "
                                       "per-device pairs such as \"cpu:gloo,cuda:nccl\".");
    }
    return Outcome<Entries>::success({{"", std::string(text)}});
  }
  Entries entries;
  for (std::string_view pair : splitOn(text, ',')) {
    auto entry = parsePair(pair, text);
    if (!entry.ok()) return Outcome<Entries>::failure(entry.error());
    auto sameDevice = [&](const DeviceBackend& e) { return e.device == entry.value().device; };
    if (std::any_of(entries.begin(), entries.end(), sameDevice)) {
      return Outcome<Entries>::failure("device " + quoted(entry.value().device) + " appears twice in backend " +
                                       quoted(text) + "; give each device one backend.");
    }
    entries.push_back(entry.value());
  }
  return Outcome<Entries>::success(std::move(entries));
}

std::string backendStringOf(const std::vector<DeviceBackend>& entries) {
  std::vector<std::string> parts;
  for (const auto& entry : entries) {
    parts.push_back(entry.device.empty() ? entry.backend : entry.device + ":" + entry.backend);
  }
  return joined(parts, ",");
}

}  // namespace nccl_migrate::shim
