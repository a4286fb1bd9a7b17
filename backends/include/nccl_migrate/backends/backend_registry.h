// The toolkit backends alive in a process and every communicator they ever created: what
// `nccl_migrate.communicators()`, reports and A/B runs show of a job's cost. Part of the
// engine's services, so a test's backends are counted in a registry of their own.
#pragma once

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

class MigrateBackend;

// One communicator, as seen from the process: which group and policy made it.
struct LiveCommunicator {
  std::string groupName;
  std::string policy;
  CommunicatorInfo info;
};

class BackendRegistry {
 public:
  void add(const MigrateBackend* backend);
  void remove(const MigrateBackend* backend);
  void recordCreated(LiveCommunicator made);

  // Every live communicator of every registered backend.
  std::vector<LiveCommunicator> live() const;
  // Every communicator created, in creation order, including those of groups since destroyed.
  std::vector<LiveCommunicator> created() const;

 private:
  mutable std::mutex mutex_;
  std::set<const MigrateBackend*> backends_;
  std::vector<LiveCommunicator> created_;
};

}  // namespace nccl_migrate::backends
