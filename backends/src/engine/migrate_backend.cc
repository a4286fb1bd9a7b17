// MigrateBackend lifecycle: creation, communicators, issuing ops, coalescing, errors, split,
// abort and shutdown. The ops themselves are in engine_ops.cc.
#include "nccl_migrate/backends/migrate_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include "common/bounded_run.h"
#include "common/exit_gate.h"
#include "engine_internals.h"
#include "engine_work.h"
#include "nccl_migrate/backends/engine_services.h"
#include "nccl_migrate/shim/nccl_environment.h"
#include "watchdog.h"

namespace nccl_migrate::backends {
namespace {

// host:pid:counter, unique among the backends of a job.
std::string uniqueInstanceTag() {
  static std::atomic<uint64_t> counter{0};
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown-host");
  return std::string(host) + ":" + std::to_string(getpid()) + ":" + std::to_string(counter++);
}

}  // namespace

void applyNcclEnvironment(GroupOptions& options) {
  auto env = shim::ncclEnvironment(shim::settingsFromEnvironment());
  TORCH_CHECK_VALUE(env.ok(), env.ok() ? "" : env.error());
  options.blockingWait = env.value().blockingWait;
  options.abortOnFailure = env.value().asyncErrorHandling != 0;
  if (env.value().commNonblocking && !options.deviceComms.blocking) options.deviceComms.blocking = 0;
  // NCCL_COMM_BLOCKING is left to NCCL, which applies it over the config from wherever it read
  // it (the environment, its config files, an environment plugin) once per process: the
  // communicator learns the mode from NCCL's answers (nccl::InProgressScope).
}

MigrateBackend::MigrateBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, GroupOptions options,
                               PolicyMaker makePolicy, FactoryMaker makeFactory,
                               std::shared_ptr<EngineServices> services)
    : c10d::Backend(rank, size),
      services_(std::move(services)),
      store_(store),
      options_(std::move(options)),
      makePolicy_(std::move(makePolicy)),
      makeFactory_(std::move(makeFactory)),
      policy_(makePolicy_(rank, size)),
      factory_(makeFactory_(store_, options_)),
      backendName_(policy_->backendName()) {
  registerWithFlightRecorder();
  TORCH_CHECK(services_, "a toolkit backend needs engine services");
  instanceTag_ = uniqueInstanceTag();
  // A reconfigurable group has no members to connect to until reconfigure() names them.
  awaitingReconfigure_ = options_.enableReconfigure;
  if (!awaitingReconfigure_) connectEagerly();
  // Last: a constructor that throws runs no destructor, and the registry must never keep it.
  services_->registry->add(this);
}

void MigrateBackend::registerWithFlightRecorder() {
  std::vector<uint64_t> ranks = options_.globalRanks;
  if (ranks.empty()) {
    for (int i = 0; i < size_; ++i) ranks.push_back(static_cast<uint64_t>(i));
  }
  services_->flightRecorder->registerGroup(
      {options_.groupName, options_.groupDesc.empty() ? "undefined" : options_.groupDesc, std::move(ranks)});
}

void MigrateBackend::connectEagerly() {
  for (const CommunicatorRequest& request : policy_->atGroupCreation(options_.boundDevice)) {
    communicatorFor(request);
  }
}

MigrateBackend::~MigrateBackend() { release_resources(); }

void MigrateBackend::release_resources() {
  if (services_) services_->registry->remove(this);
  std::lock_guard<std::mutex> lock(mutex_);
  communicators_.clear();
  creationOrder_.clear();
  factory_.reset();
  makeFactory_ = nullptr;
  makePolicy_ = nullptr;
  store_.reset();
  // Pending works keep only a weak reference to the backend: the services (and a test's own
  // watchdog with them) go now, not when the last of those works is dropped.
  services_.reset();
}

c10::intrusive_ptr<c10d::Backend::Options> MigrateBackend::getBackendOptions() {
  auto opts = c10::make_intrusive<c10d::Backend::Options>(backendName_, options_.timeout);
  opts->group_name = options_.groupName;
  opts->group_desc = options_.groupDesc;
  opts->global_ranks_in_group = options_.globalRanks;
  return opts;
}

uint64_t MigrateBackend::getSequenceNumberForGroup() {
  std::lock_guard<std::mutex> lock(mutex_);
  return collectiveSeq_;
}

void MigrateBackend::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  options_.timeout = timeout;
}

c10d::ErrorType MigrateBackend::getError() { return static_cast<c10d::ErrorType>(error_.load()); }

uint64_t MigrateBackend::globalRank() const {
  return options_.globalRanks.empty() ? static_cast<uint64_t>(rank_) : options_.globalRanks.at(rank_);
}

std::string MigrateBackend::policyName() const { return policy_->policyName(); }

void MigrateBackend::checkUsable() const {
  TORCH_CHECK(!awaitingReconfigure_, "ProcessGroupNCCL has not been initialized. Call reconfigure() before issuing "
              "collectives when enable_reconfigure=True. (group '", options_.groupName, "', backend ", backendName_, ")");
  if (aborted_) {
    C10_THROW_ERROR(DistBackendError, "process group '" + options_.groupName + "' (" + backendName_ +
                                          ") was aborted after a failed op or an abort; shrink it or create a new "
                                          "group to communicate again");
  }
}

std::unique_lock<std::mutex> MigrateBackend::lockUsable() const {
  // The group is aborted from the abort's first moment (aborted_ is set under mutex_, which the
  // abort then lets go before its communicators abort), so a caller that finds the lock held
  // while the group is aborted is refused at once, whatever holds it.
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) {
    checkUsable();
    lock.lock();
  }
  checkUsable();
  return lock;
}

Communicator& MigrateBackend::communicatorFor(const CommunicatorRequest& request) {
  // Creation rendezvouses with the other ranks, so it must not hold mutex_ while blocking on
  // them; ops of one group are issued from one thread in order, as in torch.
  {
    auto lock = lockUsable();
    if (auto it = communicators_.find(request.key); it != communicators_.end()) return *it->second;
  }
  std::shared_ptr<Communicator> made = factory_->create(request);
  services_->registry->recordCreated({options_.groupName, policy_->policyName(), made->info()});
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = communicators_.emplace(request.key, made);
    // Another thread's communicator for this key came first: the map's is the one that lives on
    // (ours is freed as `made` goes); never a reference to one only `made` holds.
    if (inserted) creationOrder_.push_back(request.key);
    made = it->second;
    if (!aborted_) return *made;
  }
  // An abort that ran while this one was created did not see it: it is aborted as the others
  // were, and the op that asked for it refused, instead of running on a group already aborted.
  abortTogether({made});
  checkUsable();
  return *made;
}

std::string MigrateBackend::describeOp(const std::string& op, uint64_t seq) const {
  return op + " (backend " + backendName_ + ", group '" + options_.groupName + "', rank " + std::to_string(rank_) +
         ", sequence number " + std::to_string(seq) + ")";
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::issue(Op op, const CommunicatorRequest& where, const Run& run) {
  // Inside a batch every op joins the batch's communicator, whatever the policy would pick alone.
  CommunicatorRequest target = batch_ ? policy_->forCollective(op.device) : where;
  TORCH_CHECK_VALUE(!batch_ || !batch_->communicator || batch_->key == target.key,
                    "all ops of a coalescing batch must use one device; ", op.name, " on ", op.device.str(),
                    " joined a batch on ", batch_ ? batch_->key : "");
  uint64_t seq, p2pSeq, opId;
  {
    auto lock = lockUsable();
    seq = op.isP2P ? collectiveSeq_ : ++collectiveSeq_;
    p2pSeq = op.isP2P ? ++p2pSeq_ : p2pSeq_;
    opId = ++opId_;
  }
  std::chrono::milliseconds timeout = op.timeout == c10d::kUnsetTimeout ? options_.timeout : op.timeout;
  IssuedOp issued = describeIssued(op.name, op.type, seq, timeout);
  issued.p2pSeq = p2pSeq;
  issued.opId = opId;
  issued.isP2P = op.isP2P;
  issued.peer = op.peer;
  issued.inBatch = batch_ != nullptr;
  issued.inputs = op.inputs;
  issued.outputs = op.outputs;
  SettleListeners observed = notifyIssued(issued);

  uint64_t shownSeq = op.isP2P ? p2pSeq : seq;
  std::string description = describeOp(op.name, shownSeq);
  // A lazy communicator is created by the op that first needs it, meeting its peers: a peer that
  // died or never comes fails this op like a transfer to it would (DistBackendError naming the
  // op, abort hooks, flight-recorder dump, the group aborted), not with the store's own error.
  Communicator* comm = batch_ && batch_->communicator ? batch_->communicator : nullptr;
  if (!comm) {
    try {
      comm = &communicatorFor(target);
    } catch (const c10::DistError&) {
      std::exception_ptr failure = std::current_exception();
      try {
        // Aborted meanwhile (the op refused, or its communicator created while the abort ran):
        // the group's refusal, not a failure of its own to report, abort or dump for.
        checkUsable();
      } catch (...) {
        notifySettled(observed, std::current_exception());
        throw;
      }
      notifySettled(observed, failure);
      std::string what = description + " failed: its communicator ('" + target.key +
                         "') could not be created with its peers: " + messageOf(std::current_exception());
      onOpFailure(/*timedOut=*/false, what, generation());
      std::rethrow_exception(backendError(what));
    } catch (...) {
      // A usage error (no device index, creation during capture, an aborted group) fails
      // only this call: torch's type and text, no abort of the group.
      notifySettled(observed, std::current_exception());
      throw;
    }
  }
  if (batch_ && !batch_->communicator) {
    comm->beginBatch();
    batch_->communicator = comm;
    batch_->key = target.key;
  }
  std::unique_ptr<InFlight> inFlight;
  try {
    inFlight = run(*comm, target);
  } catch (const c10::Error&) {
    notifySettled(observed, std::current_exception());  // an op that never ran has settled
    throw;  // argument errors keep torch's type and text
  } catch (const std::exception& e) {
    notifySettled(observed, std::current_exception());
    TORCH_CHECK(false, description, " failed: ", e.what());
  }
  if (batch_) {
    ++batch_->ops;
    batch_->inputs.insert(batch_->inputs.end(), op.inputs.begin(), op.inputs.end());
    batch_->outputs.insert(batch_->outputs.end(), op.outputs.begin(), op.outputs.end());
    inFlight = std::make_unique<DeferredInFlight>(batch_->slot);
  }
  auto self = c10::intrusive_ptr<MigrateBackend>::reclaim_copy(this);
  auto work = c10::make_intrusive<EngineWork>(
      rank_,
      EngineWork::Identity{op.type, shownSeq, description, std::move(observed),
                           op.type == c10d::OpType::BARRIER || options_.blockingWait, generation(),
                           target.futureOrder},
      std::move(inFlight), op.outputs, timeout, c10::weak_intrusive_ptr<MigrateBackend>(self),
      batch_ ? nullptr : unsettled_);
  if (!batch_) services_->watchdog->watchUntilSettled(work);
  return work;
}

// What every observer is told of an op of this group; the caller adds the op's own fields.
IssuedOp MigrateBackend::describeIssued(std::string name, c10d::OpType type, uint64_t seq,
                                        std::chrono::milliseconds timeout) const {
  IssuedOp issued;
  issued.backendName = backendName_;
  issued.groupName = options_.groupName;
  issued.groupDesc = options_.groupDesc;
  issued.name = std::move(name);
  issued.type = type;
  issued.collectiveSeq = seq;
  issued.rank = rank_;
  issued.timeout = timeout;
  return issued;
}

SettleListeners MigrateBackend::notifyIssued(const IssuedOp& issued) const {
  SettleListeners observed;
  for (const auto& observer : services_->observers) {
    try {
      if (auto token = observer->onIssued(issued)) observed.emplace_back(observer, *token);
    } catch (const std::exception& e) {
      // An observer sees ops; it never stops one.
      LOG(ERROR) << "[nccl_migrate] an op observer failed on " << issued.name << ": " << e.what();
    }
  }
  return observed;
}

// A batch the engine opened itself and could not fill: its members fail with `error`, and what
// the communicator's batch holds is launched and given up (an NCCL group must never stay open,
// and a peer may already wait for the part that was issued).
void MigrateBackend::abandonBatch(const std::exception_ptr& error) {
  std::unique_ptr<Batch> batch = std::move(batch_);
  if (!batch) return;
  *batch->slot = std::make_shared<FinishedInFlight>(error);
  if (!batch->communicator) return;
  try {
    if (auto launched = batch->communicator->endBatch()) launched->giveUp();
  } catch (...) {
    // the error that made us abandon it is the one to report
  }
}

void MigrateBackend::startCoalescing() {
  TORCH_CHECK(!batch_, "startCoalescing called twice on group '", options_.groupName, "' without endCoalescing");
  batch_ = std::make_unique<Batch>();
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::endCoalescing() {
  TORCH_CHECK(batch_, "endCoalescing without startCoalescing on group '", options_.groupName, "'");
  std::unique_ptr<Batch> batch = std::move(batch_);
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    seq = ++collectiveSeq_;
  }
  std::string description = describeOp("coalesced", seq);
  std::unique_ptr<InFlight> inFlight;
  if (batch->communicator) {
    try {
      *batch->slot = std::shared_ptr<InFlight>(batch->communicator->endBatch());
    } catch (const c10::Error&) {
      *batch->slot = std::make_shared<FinishedInFlight>(std::current_exception());  // its members failed too
      throw;
    } catch (const std::exception& e) {
      *batch->slot = std::make_shared<FinishedInFlight>(std::current_exception());
      TORCH_CHECK(false, description, " failed: ", e.what());
    }
    inFlight = std::make_unique<DeferredInFlight>(batch->slot);
  } else {
    inFlight = std::make_unique<FinishedInFlight>();  // an empty batch
  }
  // Its members were described as they joined; like torch's, the batch's entry carries no tensors.
  IssuedOp issued = describeIssued("coalesced", c10d::OpType::COALESCED, seq, options_.timeout);
  SettleListeners observed = notifyIssued(issued);
  auto self = c10::intrusive_ptr<MigrateBackend>::reclaim_copy(this);
  auto work = c10::make_intrusive<EngineWork>(rank_,
                                              EngineWork::Identity{c10d::OpType::COALESCED, seq, description, std::move(observed),
                                                                   options_.blockingWait, generation()},
                                              std::move(inFlight), batch->outputs, options_.timeout,
                                              c10::weak_intrusive_ptr<MigrateBackend>(self), unsettled_);
  services_->watchdog->watchUntilSettled(work);
  return work;
}

void MigrateBackend::registerAbortHook(int64_t hookId, c10d::AbortHook hook) {
  std::lock_guard<std::mutex> lock(hooksMutex_);
  abortHooks_[hookId] = std::move(hook);
}

void MigrateBackend::unregisterAbortHook(int64_t hookId) {
  std::lock_guard<std::mutex> lock(hooksMutex_);
  abortHooks_.erase(hookId);
}

void MigrateBackend::runAbortHooks() {
  std::map<int64_t, c10d::AbortHook> hooks;
  {
    std::lock_guard<std::mutex> lock(hooksMutex_);
    hooks = abortHooks_;
  }
  // A failing hook must not stop the others, nor the abort that follows.
  for (auto& [id, hook] : hooks) {
    try {
      hook();
    } catch (const std::exception& e) {
      LOG(ERROR) << "[nccl_migrate] abort hook " << id << " of group '" << options_.groupName << "' threw: " << e.what();
    }
  }
}

void MigrateBackend::onOpFailure(bool timedOut, const std::string& what, uint64_t generation) {
  {
    std::lock_guard<std::mutex> lock(generationMutex_);
    if (generation == generation_.load()) {
      int expected = static_cast<int>(c10d::ErrorType::SUCCESS);
      error_.compare_exchange_strong(expected, static_cast<int>(timedOut ? c10d::ErrorType::TIMEOUT
                                                                         : c10d::ErrorType::COMM_ERROR));
    }
  }
  // Hooks and dumps may take seconds (torch's FlightRecorderHook writes its own trace); the
  // thread that saw the failure raises now and the watchdog does the rest.
  auto self = c10::weak_intrusive_ptr<MigrateBackend>(c10::intrusive_ptr<MigrateBackend>::reclaim_copy(this));
  services_->watchdog->post([self, timedOut, what, generation] {
    if (auto backend = self.lock()) backend->handleFailure(timedOut, what, generation);
  });
}

void MigrateBackend::handleFailure(bool timedOut, const std::string& what, uint64_t generation) {
  // Once per failure of a generation, as torch: the abort that follows fails the generation's
  // other pending ops, each of which reports here too. A failure that prompted a reconfigure
  // still gets its hooks and dump, however soon the job reconfigured.
  if (static_cast<int64_t>(generation) > handledGeneration_) {
    handledGeneration_ = static_cast<int64_t>(generation);
    runAbortHooks();
    if (services_->flightRecorder->enabled()) {
      try {
        std::string path = services_->flightRecorder->dumpToFile(globalRank());
        LOG(ERROR) << "[nccl_migrate] " << what << "; flight recorder dumped to " << path;
      } catch (const std::exception& e) {
        LOG(ERROR) << "[nccl_migrate] " << what << "; the flight recorder dump failed: " << e.what();
      }
    }
  }
  // A timed-out op, NCCL's asynchronous error or a transport that lost its peer leaves the
  // communicator in an unknown state (its stream may never get past the op): abort the group so
  // that every other pending op fails now instead of hanging behind it.
  if (timedOut || options_.abortOnFailure) abortIfGeneration(generation);
}

void MigrateBackend::abortIfGeneration(uint64_t generation) {
  // Checked under mutex_ alone, not generationMutex_, which every thread that sees a failure
  // takes (onOpFailure). A reconfigure bumps the generation before it replaces the communicators
  // under mutex_, so a newer generation's are never aborted here.
  std::vector<std::shared_ptr<Communicator>> aborting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation != generation_.load()) return;
    aborting = markAbortedLocked();
  }
  abortTogether(std::move(aborting));
}

c10::intrusive_ptr<c10d::Backend> MigrateBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                        const std::vector<int>& ranks,
                                                        const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me == ranks.end()) return nullptr;  // not a member: torch expects no backend
  GroupOptions child = options_;
  if (opts) {
    child.groupName = opts->group_name;
    child.groupDesc = opts->group_desc;
    child.timeout = opts->timeout;
  }
  child.connectTimeoutOverride.reset();  // a split's members come together, as the parent's did
  child.globalRanks.clear();
  for (int r : ranks) child.globalRanks.push_back(options_.globalRanks.empty() ? r : options_.globalRanks.at(r));
  child.boundDevice = policy_->boundDevice();
  ++splitCount_;
  return c10::make_intrusive<MigrateBackend>(store, static_cast<int>(me - ranks.begin()), static_cast<int>(ranks.size()),
                                             std::move(child), makePolicy_, makeFactory_, services_);
}

// torch calls this for every new group of a device-bound world; what it creates is the policy's
// call, so lazy groups stay lazy (bound, without a communicator until their first op).
void MigrateBackend::eagerConnectSingleDevice(at::Device device) {
  for (const CommunicatorRequest& request : policy_->atGroupCreation(device)) communicatorFor(request);
}

void MigrateBackend::abort() {
  std::vector<std::shared_ptr<Communicator>> aborting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborting = markAbortedLocked();
  }
  abortTogether(std::move(aborting));
}

std::vector<std::shared_ptr<Communicator>> MigrateBackend::markAbortedLocked() {
  aborted_ = true;
  std::vector<std::shared_ptr<Communicator>> aborting;
  for (auto& [key, comm] : communicators_) aborting.push_back(comm);
  return aborting;
}

void MigrateBackend::abortTogether(std::vector<std::shared_ptr<Communicator>> comms) const {
  // NCCL's abort sets its communicator's abort flag and then waits for every kernel launched on
  // the communicator (commReclaim -> commDestroySync synchronizes NCCL's device stream, which
  // waits for each launch: src/init.cc and src/enqueue.cc, v2.28.9 and v2.30.7). A kernel queued
  // behind another communicator's stuck op (through the job's stream: a receive the job waited
  // on, then a collective) runs only once that one's abort set its flag; aborted one after the
  // other on one thread, in the wrong order, the first abort never returns. NCCL's own group
  // abort runs each communicator's reclaim on a thread of its own after setting every flag
  // (asyncJobLaunch, src/group.cc); so do these, on every NCCL version (ncclCommRevoke would not
  // help: it synchronizes the same stream; docs/backends.md, "Abort"). The thread that asked (the
  // watchdog every group of the process needs, a shrink, the job) waits for them a bounded time.
  if (comms.empty()) return;
  std::vector<std::function<void()>> aborts;
  for (const std::shared_ptr<Communicator>& comm : comms) {
    // The abort's thread may drop the communicator's last reference after this thread moved on,
    // perhaps once the interpreter's exit has begun: released through the exit gate (exit_gate.h).
    aborts.emplace_back([comm]() mutable {
      comm->abort();
      ExitGate::release(std::move(comm));
    });
  }
  std::vector<size_t> running = runTogetherWithin(std::move(aborts), kAbortWait);
  if (running.empty()) return;
  std::string keys;
  for (size_t i : running) keys += (keys.empty() ? "'" : ", '") + comms[i]->info().key + "'";
  LOG(ERROR) << "[nccl_migrate] the abort of group '" << options_.groupName << "' (" << backendName_ << ", rank "
             << rank_ << ") did not finish within " << kAbortWait.count() << " ms: communicator(s) " << keys
             << " are still aborting. An abort waits for every kernel its communicator launched; if this does not "
                "end soon, most likely one of them is queued behind an op that has not ended (an op of another group "
                "on the same stream, ended once that group times out and is aborted, or the job's own work on that "
                "stream). The abort goes on in the background; until it ends the communicators' device memory "
                "stays held. If it never ends, the device stays blocked and the process must end to recover.";
}

void MigrateBackend::dropCommunicators() {
  std::map<std::string, std::shared_ptr<Communicator>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped.swap(communicators_);
    creationOrder_.clear();
  }
  std::vector<std::shared_ptr<Communicator>> aborting;
  for (auto& [key, comm] : dropped) aborting.push_back(std::move(comm));
  abortTogether(std::move(aborting));
}

void MigrateBackend::shutdown() {
  std::map<std::string, std::shared_ptr<Communicator>> closing;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    closing.swap(communicators_);
    creationOrder_.clear();
  }
  // Destroyed outside the lock: NCCL's destroy can wait on a dead peer, and the watchdog's abort
  // of this group needs the lock meanwhile.
  closing.clear();
}

std::vector<CommunicatorInfo> MigrateBackend::communicators() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<CommunicatorInfo> out;
  for (const std::string& key : creationOrder_) out.push_back(communicators_.at(key)->info());
  return out;
}

}  // namespace nccl_migrate::backends
