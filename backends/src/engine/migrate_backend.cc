// MigrateBackend: the engine behind every toolkit backend (see migrate_backend.h).
#include "nccl_migrate/backends/migrate_backend.h"

#include <c10/util/Exception.h>

#include "engine_work.h"

namespace nccl_migrate::backends {

MigrateBackend::MigrateBackend(int rank, int size, GroupOptions options,
                               std::unique_ptr<CommunicatorPolicy> policy,
                               std::shared_ptr<CommunicatorFactory> factory)
    : c10d::Backend(rank, size),
      options_(std::move(options)),
      policy_(std::move(policy)),
      factory_(std::move(factory)),
      backendName_(policy_->backendName()) {
  for (const CommunicatorRequest& request : policy_->atGroupCreation(options_.boundDevice)) {
    communicatorFor(request);
  }
}

MigrateBackend::~MigrateBackend() = default;

c10::intrusive_ptr<c10d::Backend::Options> MigrateBackend::getBackendOptions() {
  auto opts = c10::make_intrusive<c10d::Backend::Options>(backendName_, options_.timeout);
  opts->group_name = options_.groupName;
  opts->global_ranks_in_group = options_.globalRanks;
  return opts;
}

uint64_t MigrateBackend::getSequenceNumberForGroup() {
  std::lock_guard<std::mutex> lock(mutex_);
  return sequence_;
}

void MigrateBackend::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  options_.timeout = timeout;
}

Communicator& MigrateBackend::communicatorFor(const CommunicatorRequest& request) {
  // Creation rendezvouses with the other ranks, so it must not hold mutex_ while blocking on
  // them; ops of one group are issued from one thread in order, as in torch.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!aborted_, "process group '", options_.groupName, "' (", backendName_, ") was aborted; create a new group");
    if (auto it = communicators_.find(request.key); it != communicators_.end()) return *it->second;
  }
  std::unique_ptr<Communicator> made = factory_->create(request);
  std::lock_guard<std::mutex> lock(mutex_);
  Communicator& ref = *made;
  communicators_.emplace(request.key, std::move(made));
  creationOrder_.push_back(request.key);
  return ref;
}

std::string MigrateBackend::describeOp(const char* op, uint64_t seq) const {
  return std::string(op) + " (backend " + backendName_ + ", group '" + options_.groupName + "', rank " +
         std::to_string(rank_) + ", sequence number " + std::to_string(seq) + ")";
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "allreduce takes exactly one tensor per call, got ", tensors.size());
  at::Tensor& tensor = tensors[0];
  TORCH_CHECK(tensor.is_contiguous(), "allreduce needs a contiguous tensor");
  Communicator& comm = communicatorFor(policy_->forCollective(tensor.device()));
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    seq = ++sequence_;
  }
  std::unique_ptr<InFlight> inFlight = comm.allReduce(tensor, opts.reduceOp);
  return c10::make_intrusive<EngineWork>(rank_, c10d::OpType::ALLREDUCE, seq, describeOp("allreduce", seq),
                                         std::move(inFlight), std::vector<at::Tensor>{tensor},
                                         options_.timeout);
}

void MigrateBackend::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  for (auto& [key, comm] : communicators_) comm->abort();
}

void MigrateBackend::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  communicators_.clear();
  creationOrder_.clear();
}

std::vector<CommunicatorInfo> MigrateBackend::communicators() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<CommunicatorInfo> out;
  for (const std::string& key : creationOrder_) out.push_back(communicators_.at(key)->info());
  return out;
}

}  // namespace nccl_migrate::backends
