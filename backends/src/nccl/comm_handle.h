// The one owner of an NCCL communicator. The communicator and every op in flight on it share
// the handle, so the NCCL communicator is freed exactly once, by whoever lets go last or by
// abort, and no call can reach it afterwards: every use checks the aborted flag under the lock.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "nccl_api.h"

namespace nccl_migrate::backends::nccl {

class CommHandle {
 public:
  CommHandle(std::shared_ptr<NcclApi> api, ncclComm_t comm, std::string group, int rank, std::string key);
  ~CommHandle();  // destroys the communicator unless it was aborted
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;

  NcclApi& api() const { return *api_; }
  CallSite site(std::string_view op) const { return {op, group_, rank_}; }

  // Runs fn(comm) while holding the communicator; throws an NcclError naming `op` once the
  // communicator was aborted.
  template <typename Fn>
  decltype(auto) use(std::string_view op, Fn&& fn) {
    std::lock_guard<std::timed_mutex> lock(mutex_);
    return fn(live(op));
  }

  // NCCL's asynchronous error, polled without blocking; once aborted, the error that led there
  // (ncclSystemError when abort came from outside). Never throws.
  ncclResult_t asyncError() noexcept;
  // Frees the NCCL communicator with ncclCommAbort, once; later uses fail. Never throws and
  // never waits long: a call stuck in NCCL is what abort is for.
  void abort() noexcept;
  bool aborted() const { return aborted_.load(); }
  // A communicator made in nonblocking mode (NCCL_COMM_BLOCKING=0 or config.blocking=0) is not
  // ready when init returns: waits until NCCL says it is, fails, or `timeout` passes.
  void waitUntilReady(std::chrono::milliseconds timeout);

 private:
  ncclComm_t live(std::string_view op) const;

  std::shared_ptr<NcclApi> api_;
  std::string group_;
  int rank_;
  std::string key_;
  std::timed_mutex mutex_;
  // Atomics: abort may go ahead without the lock when a call is stuck inside NCCL holding it.
  std::atomic<ncclComm_t> comm_;
  std::atomic<bool> aborted_{false};
  std::atomic<ncclResult_t> cachedError_{ncclSuccess};
};

}  // namespace nccl_migrate::backends::nccl
