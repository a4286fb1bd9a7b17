// CommHandle: see comm_handle.h.
#include "comm_handle.h"

#include <thread>

namespace nccl_migrate::backends::nccl {

CommHandle::CommHandle(std::shared_ptr<NcclApi> api, ncclComm_t comm, std::string group, int rank, std::string key)
    : api_(std::move(api)), group_(std::move(group)), rank_(rank), key_(std::move(key)), comm_(comm) {}

CommHandle::~CommHandle() {
  // No op can be in flight here (each holds the handle), so destroy is safe; an aborted
  // communicator is already freed.
  if (ncclComm_t comm = comm_.load()) (void)api_->commDestroy(comm);
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
  std::unique_lock<std::timed_mutex> lock(mutex_, std::defer_lock);
  // A poll must not wait behind a call stuck in NCCL: report nothing new this time.
  if (!lock.try_lock_for(std::chrono::milliseconds(10))) return cachedError_;
  ncclComm_t comm = comm_.load();
  if (!comm || aborted_.load()) return cachedError_ == ncclSuccess ? ncclSystemError : cachedError_.load();
  ncclResult_t state = ncclSuccess;
  ncclResult_t result = api_->commGetAsyncError(comm, &state);
  if (result != ncclSuccess) state = result;
  if (state != ncclSuccess && state != ncclInProgress) cachedError_ = state;
  return state == ncclInProgress ? ncclSuccess : state;
}

void CommHandle::waitUntilReady(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  CallSite at = site("communicator init");
  while (true) {
    ncclResult_t state = ncclSuccess;
    {
      std::lock_guard<std::timed_mutex> lock(mutex_);
      check(*api_, api_->commGetAsyncError(live("communicator init"), &state), "ncclCommGetAsyncError", at);
    }
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) check(*api_, state, "ncclCommInitRankConfig (nonblocking)", at);
    if (std::chrono::steady_clock::now() > deadline) {
      throw NcclError(ncclInProgress, "communicator " + key_ + " of group '" + group_ + "' on rank " +
                                          std::to_string(rank_) + " was not ready within " +
                                          std::to_string(timeout.count()) + " ms of its nonblocking init");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void CommHandle::abort() noexcept {
  if (aborted_.exchange(true)) return;
  // New uses fail from here on. A call already inside NCCL may hold the lock while stuck on a
  // dead peer; ncclCommAbort is NCCL's way to unblock it, so wait for the lock only briefly.
  std::unique_lock<std::timed_mutex> lock(mutex_, std::defer_lock);
  (void)lock.try_lock_for(std::chrono::seconds(1));
  ncclComm_t comm = comm_.exchange(nullptr);
  if (comm) (void)api_->commAbort(comm);
}

}  // namespace nccl_migrate::backends::nccl
