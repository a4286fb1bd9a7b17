// Runs a test body in N real processes that meet through a FileStore, the way a job's ranks do,
// and reports each rank's failure. A rank that outlives the limit fails the test (and is
// killed): a hang is a failure, never a pass.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace nccl_migrate::sim {

struct RankContext {
  int rank;
  int size;
  c10::intrusive_ptr<c10d::Store> store;
};

// Returns "" when every rank returned normally, else what went wrong, rank by rank. `expectDeath`
// ranks must end by a signal or a non-zero exit instead (what a use-after-free check does).
std::string runRanks(int size, const std::function<void(RankContext&)>& body,
                     std::chrono::seconds limit = std::chrono::seconds(60), std::vector<int> expectDeath = {});

}  // namespace nccl_migrate::sim
