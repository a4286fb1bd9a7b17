// The resolver: backend argument x settings x torch capabilities -> concrete backend (see
// resolution.h). Each step that can refuse returns early with an error that names the fix.
#include "nccl_migrate/shim/resolution.h"

#include "nccl_migrate/shim/allocator_settings.h"
#include "nccl_migrate/shim/backend_string.h"
#include "text.h"

namespace nccl_migrate::shim {
namespace {

// Who implements the requested behaviour, or why nobody can.
struct Decision {
  std::optional<Implementation> implementation;
  std::string backend;  // concrete registered name
  std::string reason;   // the second half of the doctor sentence
  std::optional<std::string> error;
};

// Why torch's own implementation cannot be used here, if it cannot.
struct TorchObstacle {
  std::string because;  // for reasons: "... so the toolkit's ... runs it"
  std::string fix;      // for errors under NCCL_MIGRATE_IMPL=torch
};

std::string var(std::string_view name) { return std::string(name); }

bool conflictsWithCudaMallocAsync(Behaviour behaviour) { return behaviour != Behaviour::Legacy; }

std::optional<TorchObstacle> torchObstacle(Behaviour behaviour, const TorchCapabilities& torch,
                                           const std::optional<AllocatorBackendSetting>& allocator) {
  std::string behaviourText(behaviourName(behaviour));
  std::string toolkit = quoted(toolkitBackendName(behaviour));
  const auto& builtIn = torch.builtInBackend(behaviour);
  if (!builtIn) {
    return TorchObstacle{"torch " + torch.version + " has no built-in " + behaviourText + " backend",
                         "use a torch that has one, or set " + var(kImplementationVariable) +
                             "=auto (or toolkit) to run the toolkit's " + toolkit};
  }
  if (!torch.gpuPresent) {
    return TorchObstacle{"no GPU is present and torch's " + quoted(*builtIn) + " runs only CUDA tensors",
                         "run on a machine with a GPU, or set " + var(kImplementationVariable) +
                             "=auto (or toolkit) to run the toolkit's " + toolkit + ", which also runs CPU tensors"};
  }
  if (allocator && allocator->backend == kCudaMallocAsync && conflictsWithCudaMallocAsync(behaviour)) {
    std::string setting = "backend:" + std::string(kCudaMallocAsync) + " in " + allocator->variable;
    return TorchObstacle{setting + " conflicts with torch's " + quoted(*builtIn) + " (remove it to use torch's)",
                         "remove " + setting + " (the native allocator works with " + quoted(*builtIn) +
                             "), or set " + var(kImplementationVariable) + "=auto (or toolkit) to run the toolkit's " +
                             toolkit + ", which works with cudaMallocAsync"};
  }
  return std::nullopt;
}

Decision useToolkit(Behaviour behaviour, std::string because) {
  std::string name(toolkitBackendName(behaviour));
  return {Implementation::Toolkit, name, because + ", so the toolkit's " + quoted(name) + " runs it", {}};
}

Decision decide(Behaviour behaviour, ImplementationChoice choice, const TorchCapabilities& torch,
                const std::optional<AllocatorBackendSetting>& allocator) {
  std::string impl = var(kImplementationVariable);
  if (choice == ImplementationChoice::Toolkit) return useToolkit(behaviour, impl + "=toolkit asks for it");
  auto obstacle = torchObstacle(behaviour, torch, allocator);
  if (choice == ImplementationChoice::Auto) {
    if (obstacle) return useToolkit(behaviour, obstacle->because);
    const std::string& name = *torch.builtInBackend(behaviour);
    return {Implementation::Torch, name, "torch " + torch.version + " has it built in as " + quoted(name), {}};
  }
  if (obstacle) {
    std::string error = impl + "=torch asks for torch's own " + std::string(behaviourName(behaviour)) +
                        " backend, but " + obstacle->because + ". To fix: " + obstacle->fix + ".";
    return {std::nullopt, "", "", error};
  }
  const std::string& name = *torch.builtInBackend(behaviour);
  return {Implementation::Torch, name, impl + "=torch asks for torch's own " + quoted(name), {}};
}

Resolution failed(std::string error, std::optional<Behaviour> behaviour = std::nullopt) {
  Resolution r;
  r.behaviour = behaviour;
  r.error = std::move(error);
  r.reason = "the backend cannot be resolved: " + *r.error;
  return r;
}

// torch's default when init_process_group gets no backend (BackendConfig with UNDEFINED).
std::string defaultBackend(const TorchCapabilities& torch) { return torch.gpuPresent ? "nccl" : "gloo"; }

std::string nameForReason(const DeviceBackend& entry) {
  return entry.device.empty() ? "" : "for " + entry.device + ", ";
}

}  // namespace

Resolution resolveBackend(std::string_view backend, const JobSettings& settings, const TorchCapabilities& torch) {
  std::string text(backend);
  std::string prefix;
  if (trimmed(text).empty()) {
    text = defaultBackend(torch);
    prefix = "no backend was given, so torch's default " + quoted(text) + " applies; ";
  }
  auto entries = parseBackendString(text);
  if (!entries.ok()) return failed(entries.error());

  std::vector<DeviceBackend> resolved = entries.value();
  DeviceBackend* ncclEntry = nullptr;
  std::optional<NameResolution> name;
  for (auto& entry : resolved) {
    auto found = resolveNcclName(entry.backend, settings.useNccl2);
    if (!found) continue;
    if (!entry.device.empty() && entry.device != "cuda") {
      return failed("NCCL backends run CUDA tensors, but backend " + quoted(text) + " gives " +
                        quoted(entry.backend) + " to " + entry.device + "; use " + quoted(entry.device + ":gloo") +
                        " for " + entry.device + " tensors.",
                    found->behaviour);
    }
    ncclEntry = &entry;  // at most one: only cuda may carry an NCCL name, and devices are unique
    name = found;
  }
  if (ncclEntry == nullptr) {
    // NCCL_MIGRATE_IMPL is still checked: a typo in it should not wait for the first NCCL job.
    auto choice = parseImplementationChoice(settings.implementation);
    if (!choice.ok()) return failed(choice.error());
    Resolution r;
    r.backend = text;
    r.reason = prefix + quoted(text) + " names no NCCL backend, so it is used as given.";
    return r;
  }

  Resolution r;
  r.behaviour = name->behaviour;
  if (name->warning) r.warnings.push_back(*name->warning);
  auto choice = parseImplementationChoice(settings.implementation);
  if (!choice.ok()) {
    r.error = choice.error();
    r.reason = "the backend cannot be resolved: " + *r.error;
    return r;
  }
  AllocatorReading allocator = readAllocatorBackend(settings.allocConf, settings.cudaAllocConf);
  Decision decision = decide(name->behaviour, choice.value(), torch, allocator.backend);
  r.warnings.insert(r.warnings.end(), allocator.warnings.begin(), allocator.warnings.end());
  if (decision.error) {
    r.error = decision.error;
    r.reason = prefix + nameForReason(*ncclEntry) + name->why + ", but it cannot run: " + *decision.error;
    return r;
  }
  r.implementation = decision.implementation;
  r.reason = prefix + nameForReason(*ncclEntry) + name->why + "; " + decision.reason + ".";
  ncclEntry->backend = decision.backend;
  r.backend = backendStringOf(resolved);
  return r;
}

}  // namespace nccl_migrate::shim
