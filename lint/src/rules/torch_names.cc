// Backend strings, TORCH_DIST_USE_NCCL2 and allocator settings read by the shim's own parsers, so
// that lint and the backends never disagree on what a value means.
#include "torch_names.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <vector>

#include "nccl_migrate/shim/allocator_settings.h"
#include "nccl_migrate/shim/backend_name.h"
#include "nccl_migrate/shim/backend_string.h"

namespace nccl_migrate::lint {
namespace {

// The backend names of a backend string; empty when the shim cannot read it as one.
std::vector<std::string> backendNames(std::string_view text) {
  auto entries = shim::parseBackendString(text);
  std::vector<std::string> names;
  if (!entries.ok()) return names;
  for (const shim::DeviceBackend& entry : entries.value()) names.push_back(entry.backend);
  return names;
}

std::optional<shim::Behaviour> behaviourWhenUnset(const std::string& name) {
  auto resolution = shim::resolveNcclName(name, std::nullopt);
  if (!resolution) return std::nullopt;
  return resolution->behaviour;
}

constexpr std::array<std::string_view, 6> kLocalRankVariables = {
    "LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
    "PMI_LOCAL_RANK"};
constexpr std::array<std::string_view, 6> kGlobalRankVariables = {"RANK",     "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                                                  "MV2_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};

}  // namespace

bool isLocalRankVariable(std::string_view name) {
  return std::find(kLocalRankVariables.begin(), kLocalRankVariables.end(), name) != kLocalRankVariables.end();
}

bool isGlobalRankVariable(std::string_view name) {
  return std::find(kGlobalRankVariables.begin(), kGlobalRankVariables.end(), name) != kGlobalRankVariables.end();
}

bool selectsDefaultNccl(const std::string& backend) {
  for (const std::string& name : backendNames(backend))
    if (shim::isDefaultNcclName(name)) return true;
  return false;
}

bool worldShownNotNccl(const SourceModel& model) {
  bool initialised = false;
  for (const Call& call : model.calls) {
    if (!isDistributed(call.qualifiedName, "init_process_group")) continue;
    initialised = true;
    const Argument* backend = call.argument("backend", 0);
    if (!backend || !backend->stringValue) return false;
    std::string lower = *backend->stringValue;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lower.find("nccl") != std::string::npos) return false;
  }
  return initialised;
}

bool selectsEagerNccl(const std::string& backend) {
  for (const std::string& name : backendNames(backend))
    if (behaviourWhenUnset(name) == shim::Behaviour::Rewritten) return true;
  return false;
}

bool namesNcclOtherThanPlain(const std::string& backend) {
  auto entries = shim::parseBackendString(backend);
  if (!entries.ok()) return false;
  for (const shim::DeviceBackend& entry : entries.value()) {
    if (!behaviourWhenUnset(entry.backend)) continue;  // not an NCCL backend
    if (!entry.device.empty() || !shim::isDefaultNcclName(entry.backend)) return true;
  }
  return false;
}

bool namesLegacyBackend(const std::string& value) {
  size_t at = 0;
  while (at < value.size()) {
    size_t start = value.find_first_not_of(" \t\r\n", at);
    if (start == std::string::npos) break;
    size_t end = value.find_first_of(" \t\r\n", start);
    if (end == std::string::npos) end = value.size();
    for (const std::string& name : backendNames(std::string_view(value).substr(start, end - start))) {
      // Only an explicit name pins legacy: "nccl" follows the variable, which is reported on its own.
      if (!shim::isDefaultNcclName(name) && behaviourWhenUnset(name) == shim::Behaviour::Legacy) return true;
    }
    at = end;
  }
  return false;
}

bool useNccl2SelectsLegacy(const std::string& value) {
  auto resolution = shim::resolveNcclName("nccl", value);
  return resolution && resolution->behaviour == shim::Behaviour::Legacy;
}

bool isUseNccl2Variable(const std::string& key) { return key == shim::kUseNccl2Variable; }

bool isAllocatorVariable(const std::string& key) {
  return key == shim::kAllocatorVariable || key == shim::kCudaAllocatorVariable;
}

bool selectsCudaMallocAsync(const std::string& allocatorSettings) {
  return shim::allocatorBackendIn(allocatorSettings) == std::string(shim::kCudaMallocAsync);
}

}  // namespace nccl_migrate::lint
