// What the simulated-device suites share: a toolkit backend of one rank whose device
// communicators run on the simulated device, the policies they run it under, and the checks a
// rank's body makes (a rank reports failure by throwing; runRanks names it).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "nccl_migrate/backends/communicator_factories.h"
#include "nccl_migrate/backends/communicator_policy.h"
#include "nccl_migrate/backends/migrate_backend.h"
#include "ranks.h"
#include "sim_device.h"
#include "sim_nccl.h"

namespace nccl_migrate::sim {

// Rank r's simulated device: sim:r, as each rank of a GPU job is bound to its own device.
c10::Device simDevice(int rank);

backends::PolicyMaker legacy();
backends::PolicyMaker rewritten(bool lazyInit = false);
backends::PolicyMaker rewrittenLazyP2P();

// A toolkit backend of this rank, group "0" ("default_pg"), bound to simDevice(rank), made as
// every creation path makes one (the NCCL environment applied). `transfers`: the store the
// simulated NCCL moves data through (default: the rank's own store).
c10::intrusive_ptr<backends::MigrateBackend> simBackend(
    RankContext& ctx, const backends::PolicyMaker& policy = rewritten(),
    std::chrono::milliseconds timeout = std::chrono::seconds(20), Faults faults = {},
    backends::DeviceCommOptions comms = {},
    std::shared_ptr<backends::EngineServices> services = backends::EngineServices::process(),
    c10::intrusive_ptr<c10d::Store> transfers = nullptr);

// A worker stream as the calling thread's current stream while it lives: the job's stream, which
// the host does not wait for (the simulated device's default current stream is the host itself).
// A wait() without a timeout makes it wait for an op, so the job's next op queues behind that one.
struct JobStream {
  std::shared_ptr<SimStream> stream = SimRuntime::instance()->makeWorkerStream("job");
  JobStream() { SimRuntime::instance()->setCurrentStream(stream.get()); }
  ~JobStream() { SimRuntime::instance()->setCurrentStream(nullptr); }
  SimStream* operator->() const { return stream.get(); }
};

// The unique id of a simulated NCCL communicator of the ranks of `ctx`: rank 0 makes it and the
// others read it from the store, as a job hands NCCL's id around.
ncclUniqueId sharedUniqueId(RankContext& ctx, backends::nccl::NcclApi& api);

// Throws `what` unless `ok`.
void check(bool ok, const std::string& what);
// Throws unless the tensors hold equal values (compared as doubles), naming both.
void expectEqual(const at::Tensor& actual, const at::Tensor& expected, const std::string& what);
c10d::AllreduceOptions allreduceWith(c10d::ReduceOp op);

}  // namespace nccl_migrate::sim
