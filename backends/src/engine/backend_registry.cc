// BackendRegistry: see backend_registry.h.
#include "nccl_migrate/backends/backend_registry.h"

#include "nccl_migrate/backends/migrate_backend.h"

namespace nccl_migrate::backends {

void BackendRegistry::add(const MigrateBackend* backend) {
  std::lock_guard<std::mutex> lock(mutex_);
  backends_.insert(backend);
}

void BackendRegistry::remove(const MigrateBackend* backend) {
  std::lock_guard<std::mutex> lock(mutex_);
  backends_.erase(backend);
}

void BackendRegistry::recordCreated(LiveCommunicator made) {
  std::lock_guard<std::mutex> lock(mutex_);
  created_.push_back(std::move(made));
}

// Under the registry's lock, so no backend is destroyed while it is asked (a backend leaves the
// registry before it frees its communicators).
std::vector<LiveCommunicator> BackendRegistry::live() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<LiveCommunicator> out;
  for (const MigrateBackend* backend : backends_) {
    for (CommunicatorInfo& info : backend->communicators()) {
      out.push_back({backend->groupName(), backend->policyName(), std::move(info)});
    }
  }
  return out;
}

std::vector<LiveCommunicator> BackendRegistry::created() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return created_;
}

}  // namespace nccl_migrate::backends
