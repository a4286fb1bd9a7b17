// CommHandle: see comm_handle.h.
#include "comm_handle.h"

#include <thread>
#include <utility>

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include "common/bounded_run.h"
#include "common/exit_gate.h"

namespace nccl_migrate::backends::nccl {
namespace {

// Takes `lock` within `limit` by polling try_lock. Not a timed mutex: libstdc++ times its lock
// with pthread_mutex_clocklock, which ThreadSanitizer does not see, so it reports each later
// unlock as the unlock of an unlocked mutex and stops there. The waits here are short.
bool lockWithin(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!lock.try_lock()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// ncclCommDestroy of a communicator holding an error (one that came after the handle last asked)
// returns that error and frees nothing: ncclCommEnsureReady hands it back ("if ret is not
// ncclInProgress, we just keep it", src/init.cc 385 / 434) and NCCLCHECK returns before the
// reclaim (2381 / 2901), so the bootstrap listener stays open and the proxy thread runs on. Only
// ncclCommAbort frees it then. Not on the same thread: that early return also skips
// ncclGroupEndInternal after ncclGroupStartInternal (2373 / 2892), leaving the thread's group
// depth one level up (ncclGroupDepth is thread-local, src/group.cc), and ncclCommAbort's reclaim
// would be queued in that group (ncclAsyncLaunch, src/group.cc 37 / 40) and never run. A thread
// of its own starts at depth 0; it runs within the caller's bound (tearDown).
void abortAfterFailedDestroy(const std::shared_ptr<NcclApi>& api, ncclComm_t comm, ncclResult_t destroyed,
                             const std::string& what) {
  LOG(WARNING) << "[nccl_migrate] " << what << ": ncclCommDestroy answered " << api->errorString(destroyed)
               << " (NCCL result " << static_cast<int>(destroyed) << ") and freed nothing; aborting it instead";
  std::thread([api, comm] { (void)api->commAbort(comm); }).join();
}

// Frees `comm` with ncclCommAbort or ncclCommDestroy on a thread of its own, and waits for that
// at most kTeardownWait. Both can block: ncclCommDestroy synchronizes NCCL's streams and frees
// its device memory (commDestroySync and commCleanup through commReclaim), which waits for a
// kernel that never ends; ncclCommAbort first joins a nonblocking init or launch still running
// (ncclCommEnsureReady -> ncclGroupJobAbort), while ncclCommDestroy of a communicator still in
// ncclInProgress answers ncclInvalidArgument and frees nothing; src/init.cc, v2.28.9 and v2.30.7
// (376-383, 2381 / 425-432, 2901). The thread that lets go last may be
// the watchdog, which every group of the process needs: past the bound it goes on and the
// teardown finishes (or not) in the background. Once the interpreter's exit has begun no NCCL
// call is made at all: the CUDA context may already be gone, and the process's end frees what
// the communicator held (torch's NCCLComm destructor makes no NCCL call, for that reason).
void tearDown(std::shared_ptr<NcclApi> api, ncclComm_t comm, bool byAbort, const std::string& what) {
  const char* call = byAbort ? "ncclCommAbort" : "ncclCommDestroy";
  if (ExitGate::closed()) {
    LOG(WARNING) << "[nccl_migrate] " << what << " is left to the process's exit: no " << call
                 << " once the interpreter is exiting";
    return;
  }
  if (!runTogetherWithin({[api = std::move(api), comm, byAbort, what] {
                           if (byAbort) {
                             (void)api->commAbort(comm);
                             return;
                           }
                           ncclResult_t destroyed = api->commDestroy(comm);
                           if (destroyed == ncclSuccess) return;
                           abortAfterFailedDestroy(api, comm, destroyed, what);
                         }},
                         kTeardownWait)
           .empty()) {
    LOG(WARNING) << "[nccl_migrate] " << what << ": " << call << " did not return within "
                 << std::chrono::duration_cast<std::chrono::milliseconds>(kTeardownWait).count()
                 << " ms; it goes on in the background (its device memory stays held until it returns)";
  }
}

}  // namespace

CommHandle::CommHandle(std::shared_ptr<NcclApi> api, ncclComm_t comm, std::string group, int rank, std::string key,
                       bool nonblocking, std::chrono::milliseconds launchTimeout)
    : api_(std::move(api)),
      group_(std::move(group)),
      rank_(rank),
      key_(std::move(key)),
      nonblocking_(nonblocking),
      launchTimeout_(launchTimeout),
      comm_(comm) {}

// Declared before the lock it watches, so it runs once that lock is released, returning or
// throwing: an abort that found the lock held left the freeing to whoever held it (freeByAbort).
struct CommHandle::AbortLeftToTheHolder {
  CommHandle& handle;
  ~AbortLeftToTheHolder() {
    if (handle.abortWhenCallReturns_.load()) handle.freeLeftAbort();
  }
};

void CommHandle::use(std::string_view op, const std::function<void(ncclComm_t)>& fn) {
  AbortLeftToTheHolder afterTheCall{*this};
  std::lock_guard<std::mutex> lock(mutex_);
  ncclComm_t comm = live(op);
  InProgressScope launches;
  fn(comm);
  // NCCL's answer decides, not the mode the handle was made for: a call that answered
  // ncclInProgress launched on NCCL's thread, so this waits until the launch put the op on the
  // stream, whatever the handle expected (nccl_api.h, InProgressScope).
  if (launches.seen() && !nonblocking_.exchange(true)) {
    LOG(WARNING) << "[nccl_migrate] communicator " << key_ << " of group '" << group_ << "' on rank " << rank_
                 << ": NCCL answered " << op << " with ncclInProgress, so NCCL runs it in nonblocking mode "
                 << "(NCCL_COMM_BLOCKING=0 from the environment, an NCCL config file or an environment plugin); "
                 << "every launch on it now waits for NCCL to finish it, within the group's timeout";
  }
  if (nonblocking_) awaitCompletion(comm, op, launchTimeout_);
}

CommHandle::~CommHandle() {
  // No op can be in flight here (each holds the handle). A communicator with a failed or stuck
  // op is aborted: ncclCommDestroy would wait for it. An aborted one is already freed, unless its
  // abort was left to a call that never returned to free it.
  ncclComm_t comm = comm_.exchange(nullptr);
  if (!comm) return;
  bool byAbort = aborted_ || broken_ || cachedError_ != ncclSuccess;
  if (!byAbort && !ExitGate::closed()) byAbort = holdsAnError(comm);
  tearDown(api_, comm, byAbort, "communicator " + key_ + " of group '" + group_ + "' on rank " + std::to_string(rank_));
}

bool CommHandle::holdsAnError(ncclComm_t comm) noexcept {
  // The cached error is as old as the last poll, and polls stop while no op is pending: a peer
  // that died while the group was idle leaves its error in NCCL's proxy state
  // (ncclCommGetAsyncError reads proxyState->asyncResult, src/init.cc 2711 / 3455), and
  // ncclCommDestroy would answer it and free nothing (abortAfterFailedDestroy). So NCCL is asked
  // once more, under the lock, right before destroy is chosen. A nonblocking communicator that
  // answers ncclInProgress counts as one holding an error too, and is aborted where destroy would
  // wait: no op is in flight here (each holds the handle), so what NCCL still works on is a launch
  // or connect that never finished (a peer that never came), which ncclCommDestroy would wait for
  // without bound, while ncclCommAbort frees the communicator at once. Nothing the job still
  // needs is lost by aborting: every op of it has already settled.
  std::lock_guard<std::mutex> lock(mutex_);
  ncclResult_t state = ncclSuccess;
  ncclResult_t asked = api_->commGetAsyncError(comm, &state);
  return asked != ncclSuccess || state != ncclSuccess;
}

ncclComm_t CommHandle::live(std::string_view op) const {
  ncclComm_t comm = comm_.load();
  if (!comm || aborted_.load()) {
    // The engine refuses ops of an aborted group before they get here; an op that does was
    // issued as the group was aborted under it (a failure seen on another thread, between a
    // ring's send and its receive). It is refused at issue as torch refuses an op on an aborted
    // communicator: a DistBackendError, never a usage error of the job's.
    C10_THROW_ERROR(DistBackendError, std::string(op) + " on communicator " + key_ + " of group '" + group_ +
                                          "' on rank " + std::to_string(rank_) +
                                          ": the communicator was aborted; create a new group to communicate again");
  }
  return comm;
}

ncclResult_t CommHandle::asyncError() noexcept {
  auto abortedError = [&] { return cachedError_ == ncclSuccess ? ncclSystemError : cachedError_.load(); };
  if (aborted_.load()) return abortedError();  // known without the lock, which a stuck call may hold
  AbortLeftToTheHolder afterThePoll{*this};
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  // A poll must not wait behind a call stuck in NCCL: report nothing new this time.
  if (!lockWithin(lock, std::chrono::milliseconds(10))) return cachedError_;
  ncclComm_t comm = comm_.load();
  if (!comm || aborted_.load()) return abortedError();
  ncclResult_t state = ncclSuccess;
  ncclResult_t result = api_->commGetAsyncError(comm, &state);
  if (result != ncclSuccess) state = result;
  if (state != ncclSuccess && state != ncclInProgress) cachedError_ = state;
  return state == ncclInProgress ? ncclSuccess : state;
}

void CommHandle::waitUntilReady(std::chrono::milliseconds timeout) {
  // Asked of NCCL in every mode: in blocking mode it answers at once.
  AbortLeftToTheHolder afterTheWait{*this};
  std::lock_guard<std::mutex> lock(mutex_);
  awaitCompletion(live("communicator init"), "communicator init", timeout);
}

void CommHandle::awaitCompletion(ncclComm_t comm, std::string_view what, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  CallSite at = site(what);
  while (true) {
    ncclResult_t state = ncclSuccess;
    check(*api_, api_->commGetAsyncError(comm, &state), "ncclCommGetAsyncError", at);
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) check(*api_, state, "NCCL (nonblocking)", at);
    // An abort meanwhile (the watchdog saw another op fail) left the freeing to this holder
    // (freeByAbort), and ncclCommAbort ends a launch still in progress (ncclCommAbort waits in
    // ncclCommEnsureReady for the group job it aborts; src/init.cc, v2.28.9 and v2.30.7): stop
    // waiting, and the holder frees the communicator as it lets go (AbortLeftToTheHolder).
    if (aborted_.load()) {
      C10_THROW_ERROR(DistBackendError, std::string(what) + " on communicator " + key_ + " of group '" + group_ +
                                            "' on rank " + std::to_string(rank_) +
                                            ": the communicator was aborted while NCCL was still launching it "
                                            "(nonblocking mode); create a new group to communicate again");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw NcclError(ncclInProgress, std::string(what) + " on communicator " + key_ + " of group '" + group_ +
                                          "' on rank " + std::to_string(rank_) + " was still in progress after " +
                                          std::to_string(timeout.count()) + " ms (nonblocking mode)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void CommHandle::abort() noexcept {
  if (aborted_.exchange(true)) return;  // new uses fail from here on
  {
    std::lock_guard<std::mutex> groups(groupsMutex_);
    if (openGroups_ > 0) {
      abortDeferred_ = true;  // freed by groupClosed(), after ncclGroupEnd
      return;
    }
  }
  freeByAbort();
}

void CommHandle::freeByAbort() noexcept {
  // A call inside NCCL holds the lock, and may be stuck on a peer. NCCL does not document
  // ncclCommAbort as safe beside it: its user guide allows no two threads to operate one
  // communicator at a time ("Thread Safety"), its fault-tolerance section asks that no thread
  // be calling NCCL while ncclCommAbort runs (usage/communicators.rst, "Fault Tolerance"), and
  // ncclCommAbort frees the communicator the call is still using (commReclaim, src/init.cc). So the abort waits for the lock briefly, and past
  // that leaves the freeing to the call's thread, as the call returns; new uses already fail.
  // In blocking mode nothing bounds such a call: NCCL's connect on first use waits for its peer
  // until the abort flag is set, which only ncclCommAbort sets, so a peer that met in the store
  // and never connects leaves the call, and the communicator, inside NCCL for good
  // (docs/backends.md, "Abort"). NCCL's nonblocking mode is the bound it documents: there the
  // holder polls (awaitCompletion), sees the abort, and frees the communicator.
  // The flag is set before the last try, and every holder reads it after releasing the lock
  // (AbortLeftToTheHolder): a holder that releases before the flag is set leaves the lock free
  // for the try, and one that releases after it sees the flag. Either way the abort happens.
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  if (!lockWithin(lock, kAbortLockWait)) {
    abortWhenCallReturns_ = true;
    if (!lock.try_lock()) return;  // the holder frees it once it lets go
  }
  abortWhenCallReturns_ = false;
  if (ncclComm_t comm = comm_.exchange(nullptr)) abortNow(comm);
}

void CommHandle::freeLeftAbort() noexcept {
  // Never waits: a poll (asyncError) must not stand behind a call stuck in NCCL. While another
  // holds the lock, that holder sees the flag as it lets go and frees it then.
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);  // no other call inside NCCL beside it
  if (!lock.owns_lock()) return;
  if (!abortWhenCallReturns_.exchange(false)) return;  // another holder freed it first
  if (ncclComm_t comm = comm_.exchange(nullptr)) abortNow(comm);
}

void CommHandle::abortNow(ncclComm_t comm) noexcept {
  (void)api_->commAbort(comm);
  std::vector<std::shared_ptr<void>> released;
  {
    std::lock_guard<std::mutex> kept(keptMutex_);
    released.swap(kept_);
  }
  // Released outside the lock: a tensor's release may take Python's lock, which a thread must not
  // take once the interpreter's exit has begun (exit_gate.h); this may be an abort's own thread.
  ExitGate::release(std::move(released));
}

void CommHandle::keepUntilFreed(std::shared_ptr<void> what) {
  std::lock_guard<std::mutex> kept(keptMutex_);
  kept_.push_back(std::move(what));
}

void CommHandle::groupOpened() {
  std::lock_guard<std::mutex> groups(groupsMutex_);
  ++openGroups_;
}

void CommHandle::groupClosed() noexcept {
  bool freeNow = false;
  {
    std::lock_guard<std::mutex> groups(groupsMutex_);
    freeNow = --openGroups_ == 0 && std::exchange(abortDeferred_, false);
  }
  if (freeNow) freeByAbort();
}

}  // namespace nccl_migrate::backends::nccl
