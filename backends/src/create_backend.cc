// createBackend: see create_backend.h. torch's own NCCL backends are built from torch's headers
// (compiled with USE_C10D_NCCL, as torch itself was), the toolkit's from the engine.
#include "nccl_migrate/backends/create_backend.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#if NCCL_MIGRATE_TORCH_HAS_HEADERONLY_VERSION
#include <torch/headeronly/version.h>
#else
#include <torch/version.h>
#endif

#include "nccl_migrate/backends/communicator_policy.h"
#include "nccl_migrate/backends/migrate_backend.h"
#include "nccl_migrate/shim/group_device.h"
#include "nccl_migrate/shim/job_settings.h"

#if NCCL_MIGRATE_HAVE_NCCL
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
// torch's rewritten backends, where this torch has them (cmake/TorchFeatures.cmake).
#if NCCL_MIGRATE_TORCH_HAS_NCCL2
#include <torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCL.hpp>
#endif
#if NCCL_MIGRATE_TORCH_HAS_NCCL2_LAZY
#include <torch/csrc/distributed/c10d/nccl2/ProcessGroupNCCLLazy.hpp>
#endif
#endif

namespace nccl_migrate::backends {
namespace {

PolicyMaker policyMakerFor(shim::Behaviour behaviour) {
  switch (behaviour) {
    case shim::Behaviour::Legacy:
      return [](int rank, int size) { return makeLegacyPolicy(rank, size); };
    case shim::Behaviour::Rewritten:
      return [](int rank, int size) { return makeRewrittenPolicy(rank, size, /*lazyInit=*/false); };
    case shim::Behaviour::RewrittenLazyP2P:
      return [](int rank, int size) { return makeRewrittenLazyP2PPolicy(rank, size, /*lazyInit=*/false); };
  }
  TORCH_CHECK(false, "unknown behaviour");
}

c10::intrusive_ptr<c10d::Backend> toolkitBackend(shim::Behaviour behaviour, const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int size, const CreateOptions& options) {
  GroupOptions group{options.groupName, "default_pg", options.timeout, {}, options.device};
  applyNcclEnvironment(group);
  // Like torch's nccl2, the rewritten behaviours bind to a device at creation: the given one,
  // else the shim's rule (local rank, or rank, modulo the GPUs), else the CPU.
  if (!group.boundDevice && behaviour != shim::Behaviour::Legacy) {
    auto index = shim::defaultDeviceIndex(shim::settingsFromEnvironment().localRank, rank, c10::cuda::device_count());
    TORCH_CHECK_VALUE(index.ok(), index.ok() ? "" : index.error());
    group.boundDevice = index.value() ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(*index.value()))
                                      : c10::Device(c10::kCPU);
  }
  GlooBackendMaker gloo = options.makeGloo;
  FactoryMaker makeFactory = [gloo](const c10::intrusive_ptr<c10d::Store>& s, const GroupOptions& o) {
    return makeCommunicatorFactory(s, gloo, o.groupName, o.connectTimeout(), o.deviceComms);
  };
  return c10::make_intrusive<MigrateBackend>(store, rank, size, std::move(group), policyMakerFor(behaviour),
                                             std::move(makeFactory));
}

#if NCCL_MIGRATE_HAVE_NCCL
c10::intrusive_ptr<c10d::Backend> torchBackend(shim::Behaviour behaviour, const c10::intrusive_ptr<c10d::Store>& store,
                                               int rank, int size, const CreateOptions& options) {
  auto nccl = c10d::ProcessGroupNCCL::Options::create();
  nccl->timeout = options.timeout;
  nccl->group_name = options.groupName;
  c10::intrusive_ptr<c10d::Backend> backend;
  switch (behaviour) {
    case shim::Behaviour::Legacy:
      backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, nccl);
      break;
    case shim::Behaviour::Rewritten:
#if NCCL_MIGRATE_TORCH_HAS_NCCL2
      backend = c10::make_intrusive<c10d::nccl2::ProcessGroupNCCL>(store, rank, size, nccl);
#endif
      break;
    case shim::Behaviour::RewrittenLazyP2P:
#if NCCL_MIGRATE_TORCH_HAS_NCCL2_LAZY
      backend = c10::make_intrusive<c10d::nccl2::ProcessGroupNCCLLazy>(store, rank, size, nccl);
#endif
      break;
  }
  // The shim offers torch's implementation only where linkedTorchCapabilities() says it exists.
  TORCH_CHECK(backend, "torch ", TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR, " has no ", shim::behaviourName(behaviour),
              " backend of its own; set NCCL_MIGRATE_IMPL=toolkit to run the toolkit's");
  if (options.device) backend->eagerConnectSingleDevice(*options.device);
  return backend;
}
#endif

}  // namespace

shim::TorchCapabilities linkedTorchCapabilities() {
  shim::TorchCapabilities caps;
  caps.version = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
#if NCCL_MIGRATE_HAVE_NCCL
  bool since214 = TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 14);
  caps.legacy = since214 ? "nccl-legacy" : "nccl";
  if (since214 && NCCL_MIGRATE_TORCH_HAS_NCCL2) caps.rewritten = "nccl2";
  if (since214 && NCCL_MIGRATE_TORCH_HAS_NCCL2_LAZY) caps.rewrittenLazyP2P = "nccl-lazy";
#endif
  caps.gpuPresent = c10::cuda::device_count() > 0;
  return caps;
}

CreatedBackend createBackend(const std::string& name, const c10::intrusive_ptr<c10d::Store>& store, int rank,
                             int size, const CreateOptions& options) {
  shim::Resolution r = shim::resolveBackend(name, shim::settingsFromEnvironment(), linkedTorchCapabilities());
  TORCH_CHECK(!r.error, "backend '", name, "' cannot run here: ", r.error.value_or(""));
  TORCH_CHECK_VALUE(r.behaviour, "'", name, "' names no NCCL backend; createBackend makes only nccl, nccl2, nccl-lazy "
                                  "and nccl-legacy (create other backends with torch's own API)");
  TORCH_CHECK_VALUE(r.backend.find(':') == std::string::npos, "createBackend takes one backend name, not a per-device "
                                                              "list like '", name, "': create one backend per device");
  for (const std::string& warning : r.warnings) TORCH_WARN(warning);
  if (r.implementation == shim::Implementation::Toolkit) {
    return {toolkitBackend(*r.behaviour, store, rank, size, options), r};
  }
#if NCCL_MIGRATE_HAVE_NCCL
  return {torchBackend(*r.behaviour, store, rank, size, options), r};
#else
  TORCH_CHECK(false, "torch's ", r.backend, " was chosen but this build has no NCCL; set NCCL_MIGRATE_IMPL=toolkit");
#endif
}

}  // namespace nccl_migrate::backends
