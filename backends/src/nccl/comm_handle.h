// The one owner of an NCCL communicator. The communicator and every op in flight on it share
// the handle, so the NCCL communicator is freed exactly once, by whoever lets go last or by
// abort, and no call can reach it afterwards: every use checks the aborted flag under the lock.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nccl_api.h"

namespace nccl_migrate::backends::nccl {

// How long the thread that lets a communicator go waits for NCCL to free it (see ~CommHandle).
inline constexpr std::chrono::milliseconds kTeardownWait{2000};
// How long an abort waits for a call inside NCCL to return before leaving the freeing to it.
inline constexpr std::chrono::milliseconds kAbortLockWait{1000};

class CommHandle {
 public:
  // `nonblocking`: NCCL answered its init with ncclInProgress (its nonblocking mode), so init and
  // every call may return before NCCL finished them; a call that answers so later makes it so
  // too (use). `launchTimeout` bounds the wait for them.
  CommHandle(std::shared_ptr<NcclApi> api, ncclComm_t comm, std::string group, int rank, std::string key,
             bool nonblocking = false, std::chrono::milliseconds launchTimeout = std::chrono::minutes(10));
  // Destroys the communicator unless it was aborted (aborts it when it is broken, or when NCCL,
  // asked right before, holds an error; and when ncclCommDestroy answers one), on a thread of
  // its own, waiting for that at most kTeardownWait; no NCCL call once the interpreter is exiting.
  ~CommHandle();
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;

  NcclApi& api() const { return *api_; }
  CallSite site(std::string_view op) const { return {op, group_, rank_}; }

  // Runs fn(comm) while holding the communicator; throws a c10::DistBackendError naming `op` once the
  // communicator was aborted. Once a call answered ncclInProgress (NCCL's nonblocking mode, known
  // from NCCL's answers, never from the environment) it returns only once NCCL really issued
  // the calls (their kernels are on the stream), so what the caller records next follows them.
  void use(std::string_view op, const std::function<void(ncclComm_t)>& fn);

  // NCCL's asynchronous error, polled without blocking; once aborted, the error that led there
  // (ncclSystemError when abort came from outside). Never throws.
  ncclResult_t asyncError() noexcept;
  // Frees the NCCL communicator with ncclCommAbort, once; later uses fail. Never throws, but
  // blocks as ncclCommAbort does: it sets the communicator's abort flag and then waits for every
  // kernel launched on it, so a kernel queued behind another communicator's stuck op (through
  // the job's stream) holds it until that one is aborted too. Callers that abort several run
  // them together and bound the wait (MigrateBackend::abortTogether). While another thread's call
  // is inside NCCL (NCCL allows no call beside another on one communicator) it waits
  // kAbortLockWait for it, then leaves the freeing to that thread as the call returns; in blocking
  // mode a call stuck on a peer that never connects never returns (docs/backends.md, "Abort").
  void abort() noexcept;
  bool aborted() const { return aborted_.load(); }
  // Keeps `what` (the tensors of ops that failed while NCCL may still run or launch them) until
  // the NCCL communicator is freed, which ends whatever it still runs.
  void keepUntilFreed(std::shared_ptr<void> what);
  // A coalescing batch keeps an NCCL group open across calls; ncclGroupEnd must never launch its
  // queued ops on a freed communicator, so an abort meanwhile frees it once the group closed.
  void groupOpened();
  void groupClosed() noexcept;
  // An op of this communicator failed or timed out: when the last owner lets go, the
  // communicator is aborted, not destroyed (ncclCommDestroy would wait for the stuck op).
  void markBroken() noexcept { broken_ = true; }
  // A communicator NCCL made in nonblocking mode (config.blocking=0, or NCCL_COMM_BLOCKING=0 from
  // wherever NCCL read it) is not ready when init returns: asks NCCL, and waits until it says it
  // is, fails, or `timeout` passes.
  void waitUntilReady(std::chrono::milliseconds timeout);

 private:
  struct AbortLeftToTheHolder;
  ncclComm_t live(std::string_view op) const;
  // Whether NCCL, asked now under the lock, holds an error for `comm` (or the asking failed).
  bool holdsAnError(ncclComm_t comm) noexcept;
  void freeByAbort() noexcept;
  // Frees the communicator by the abort freeByAbort left to the lock's holder, if still left
  // and the lock is free (else its holder does, as it lets go).
  void freeLeftAbort() noexcept;
  // ncclCommAbort of `comm`, then what was kept for it goes.
  void abortNow(ncclComm_t comm) noexcept;
  // Polls NCCL's state while it is ncclInProgress (the lock held); throws on an error or when
  // `timeout` passes.
  void awaitCompletion(ncclComm_t comm, std::string_view what, std::chrono::milliseconds timeout);

  std::shared_ptr<NcclApi> api_;
  std::string group_;
  int rank_;
  std::string key_;
  std::atomic<bool> nonblocking_;
  std::chrono::milliseconds launchTimeout_;
  std::mutex mutex_;
  // Atomics: read without the lock by polls that must not wait behind a call inside NCCL.
  std::atomic<ncclComm_t> comm_;
  std::atomic<bool> aborted_{false};
  std::atomic<ncclResult_t> cachedError_{ncclSuccess};
  std::atomic<bool> broken_{false};
  std::atomic<bool> abortWhenCallReturns_{false};
  std::mutex keptMutex_;
  std::vector<std::shared_ptr<void>> kept_;
  std::mutex groupsMutex_;
  int openGroups_ = 0;
  bool abortDeferred_ = false;
};

}  // namespace nccl_migrate::backends::nccl
