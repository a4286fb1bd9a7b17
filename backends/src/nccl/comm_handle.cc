// CommHandle: see comm_handle.h.
#include "comm_handle.h"

#include <thread>
#include <utility>

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

void CommHandle::use(std::string_view op, const std::function<void(ncclComm_t)>& fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  ncclComm_t comm = live(op);
  fn(comm);
  if (nonblocking_) awaitCompletion(comm, op, launchTimeout_);
}

CommHandle::~CommHandle() {
  // No op can be in flight here (each holds the handle). A communicator with a failed or stuck
  // op is aborted: ncclCommDestroy would wait for it, on whatever thread let go last (often the
  // watchdog, which every group of the process needs). An aborted one is already freed.
  ncclComm_t comm = comm_.load();
  if (!comm) return;
  if (broken_ || cachedError_ != ncclSuccess) {
    (void)api_->commAbort(comm);
  } else {
    (void)api_->commDestroy(comm);
  }
}

ncclComm_t CommHandle::live(std::string_view op) const {
  ncclComm_t comm = comm_.load();
  if (!comm || aborted_.load()) {
    throw NcclError(ncclInvalidUsage, std::string(op) + " on communicator " + key_ + " of group '" + group_ +
                                          "' on rank " + std::to_string(rank_) +
                                          ": the communicator was aborted; create a new group to communicate again");
  }
  return comm;
}

ncclResult_t CommHandle::asyncError() noexcept {
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  // A poll must not wait behind a call stuck in NCCL: report nothing new this time.
  if (!lockWithin(lock, std::chrono::milliseconds(10))) return cachedError_;
  ncclComm_t comm = comm_.load();
  if (!comm || aborted_.load()) return cachedError_ == ncclSuccess ? ncclSystemError : cachedError_.load();
  ncclResult_t state = ncclSuccess;
  ncclResult_t result = api_->commGetAsyncError(comm, &state);
  if (result != ncclSuccess) state = result;
  if (state != ncclSuccess && state != ncclInProgress) cachedError_ = state;
  return state == ncclInProgress ? ncclSuccess : state;
}

void CommHandle::waitUntilReady(std::chrono::milliseconds timeout) {
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
  // A call already inside NCCL may hold the lock while stuck on a dead peer; ncclCommAbort is
  // NCCL's way to unblock it, so wait for the lock only briefly.
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  (void)lockWithin(lock, std::chrono::seconds(1));
  ncclComm_t comm = comm_.exchange(nullptr);
  if (comm) (void)api_->commAbort(comm);
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
