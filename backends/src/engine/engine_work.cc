// EngineWork: see engine_work.h.
#include "engine_work.h"

#include <utility>

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include "nccl_migrate/backends/migrate_backend.h"

namespace nccl_migrate::backends {
namespace {

std::vector<c10::Device> cudaDevicesOf(const std::vector<at::Tensor>& tensors) {
  std::vector<c10::Device> devices;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.is_cuda() && std::find(devices.begin(), devices.end(), t.device()) == devices.end()) {
      devices.push_back(t.device());
    }
  }
  return devices;
}

}  // namespace

std::exception_ptr backendError(const std::string& message) {
  return std::make_exception_ptr(
      c10::DistBackendError(c10::SourceLocation{"EngineWork", __FILE__, static_cast<uint32_t>(__LINE__)}, message));
}

std::string messageOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

void notifySettled(const SettleListeners& listeners, const std::exception_ptr& error) noexcept {
  for (const auto& [observer, token] : listeners) {
    try {
      observer->onSettled(token, error);
    } catch (const std::exception& e) {
      LOG(ERROR) << "[nccl_migrate] an op observer failed: " << e.what();
    } catch (...) {
      LOG(ERROR) << "[nccl_migrate] an op observer failed";
    }
  }
}

EngineWork::EngineWork(int rank, Identity identity, std::unique_ptr<InFlight> inFlight, std::vector<at::Tensor> outputs,
                       std::chrono::milliseconds timeout, c10::weak_intrusive_ptr<MigrateBackend> backend,
                       std::shared_ptr<std::atomic<int64_t>> unsettled)
    : c10d::Work(rank, identity.type),
      identity_(std::move(identity)),
      inFlight_(std::move(inFlight)),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      deadline_(std::chrono::steady_clock::now() + timeout),
      backend_(std::move(backend)),
      unsettled_(std::move(unsettled)) {
  if (unsettled_) unsettled_->fetch_add(1, std::memory_order_relaxed);
  // Now, before the job issues anything else on the communicator: the future's completion is
  // ordered right after this op's end. (A batch member is on no device until the batch is issued:
  // its future is made when asked for.) Under CUDA graph capture too, as torch's legacy backend
  // does: its collective() and pointToPoint() make and mark the future under a guard of the NCCL
  // stream whatever the capture status, and skip only the watchdog's enqueue while capturing
  // (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp). The mark then records its event in the
  // graph, so a wait on the future from a stream outside the capture fails as it fails on torch;
  // a future made later instead would complete after whatever the stream holds then, not after
  // the captured op (which only runs when the graph is replayed).
  if (identity_.futureOrder == FutureOrder::CommunicatorStream && inFlight_->onDevice()) (void)getFuture();
}

std::exception_ptr EngineWork::withContext(const std::exception_ptr& cause) const {
  return backendError(identity_.description + " failed: " + messageOf(cause));
}

void EngineWork::settle(std::exception_ptr error, bool timedOut) {
  c10::intrusive_ptr<MigrateBackend> backend = error ? backend_.lock() : nullptr;  // only a failure reports
  bool ofCurrentMembership = false;
  std::shared_ptr<OpFuture> future;
  c10::intrusive_ptr<c10::ivalue::Future> result;
  c10d::WorkResult outcome;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return;
    completed_ = true;
    exception_ = error ? withContext(error) : nullptr;
    settledAs_ = outcome = !error    ? c10d::WorkResult::SUCCESS
                           : timedOut ? c10d::WorkResult::TIMEOUT
                                      : c10d::WorkResult::COMM_ERROR;
    // Read before anyone can see the failure (a reconfigure it prompts comes after): an op that
    // fails once a reconfigure replaced its membership was dropped by it, and is not reported.
    ofCurrentMembership = backend && backend->generation() == identity_.generation;
    future = future_;
    result = result_;
  }
  cv_.notify_all();
  if (unsettled_) unsettled_->fetch_sub(1, std::memory_order_relaxed);
  if (error) inFlight_->giveUp();
  notifySettled(identity_.settleListeners, error);
  if (future) future->settled(exception());
  if (result) markResult(result, outcome);
  if (!error || !ofCurrentMembership) return;
  backend->onOpFailure(timedOut, messageOf(exception()), identity_.generation);
}

bool EngineWork::isCompleted() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return true;
  }
  if (!inFlight_->isDone()) return false;
  settle(inFlight_->failure(), /*timedOut=*/false);
  return true;
}

bool EngineWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr EngineWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

bool EngineWork::wait(std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_ && exception_) std::rethrow_exception(exception_);
  }
  // torch's semantics: without a timeout, a device op only makes the caller's stream wait for it
  // and the host runs ahead (DDP and FSDP overlap on that); the watchdog enforces the group's
  // timeout. The host blocks for a barrier, in blocking-wait mode, or for an explicit timeout.
  if (timeout == kNoTimeout && !identity_.waitBlocksHost && inFlight_->waitOnDevice()) {
    if (auto error = inFlight_->failure()) {
      settle(error, /*timedOut=*/false);
      std::rethrow_exception(exception());
    }
    return true;
  }
  auto limit = timeout == kNoTimeout ? timeout_ : timeout;
  try {
    inFlight_->wait(limit);
  } catch (const OpTimedOut& e) {
    // torch's Gloo only raises when a wait outlives its own timeout: the op goes on, under the
    // watchdog's group timeout. On the device, legacy NCCL fails the op and aborts the group.
    if (timeout != kNoTimeout && !inFlight_->onDevice()) std::rethrow_exception(withContext(std::current_exception()));
    settle(std::current_exception(), /*timedOut=*/true);
    std::rethrow_exception(exception());
  } catch (...) {
    settle(std::current_exception(), /*timedOut=*/!inFlight_->isDone() && !inFlight_->failure());
    std::rethrow_exception(exception());
  }
  settle(nullptr, false);
  std::lock_guard<std::mutex> lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

// torch's synchronize(): the caller's stream waits for the op, as wait() without a timeout.
void EngineWork::synchronize() { wait(kNoTimeout); }

bool EngineWork::watch(std::chrono::steady_clock::time_point now) {
  if (isCompleted()) return true;
  if (auto error = inFlight_->failure()) {
    settle(error, false);
    return true;
  }
  if (now < deadline_) return false;
  settle(std::make_exception_ptr(std::runtime_error("Watchdog caught collective operation timeout: the op ran longer "
                                                    "than the group's timeout of " +
                                                    std::to_string(timeout_.count()) + " ms")),
         /*timedOut=*/true);
  return true;
}

void EngineWork::OpFuture::settled(const std::exception_ptr& error) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!error) {
      succeeded = true;  // its completion in stream order decides it, whatever came after
      return;
    }
    if (!failsWithTheOp || std::exchange(decided, true)) return;
  }
  // Its callbacks run here (on the watchdog, or the thread that saw the failure): one that
  // throws must not end that thread.
  try {
    future->setError(error);
  } catch (const std::exception& e) {
    LOG(ERROR) << "[nccl_migrate] a callback of a failed op's future threw: " << e.what();
  }
}

void EngineWork::OpFuture::completed(const c10::IValue& value, const std::exception_ptr& error) {
  bool fails;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (std::exchange(decided, true)) return;
    // A host op that settled as done keeps its result though an abort came before its completion.
    fails = failsWithTheOp && error && !succeeded;
  }
  if (fails) {
    future->setError(error);
  } else {
    future->markCompleted(value);
  }
}

c10::intrusive_ptr<c10::ivalue::Future> EngineWork::getFuture() {
  std::shared_ptr<OpFuture> made;
  bool settledAs = false;
  std::exception_ptr failedAlready;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (future_) return future_->future;
    future_ = std::make_shared<OpFuture>();
    future_->future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                               cudaDevicesOf(outputs_));
    future_->failsWithTheOp = !inFlight_->onDevice();
    made = future_;
    settledAs = completed_;
    failedAlready = exception_;
  }
  if (settledAs) made->settled(failedAlready);
  if (failedAlready && made->failsWithTheOp) return made->future;
  // Outside the lock: ordering the caller's stream may block the host until the op is done (on
  // the simulated device, whose host is a stream), and the watchdog takes the lock to settle
  // the op meanwhile.
  inFlight_->onDone([made, outputs = outputs_, describe = identity_.description](std::exception_ptr error) {
    made->completed(c10::IValue(outputs), error ? backendError(describe + " failed: " + messageOf(error)) : nullptr);
  });
  return made->future;
}

void EngineWork::markResult(const c10::intrusive_ptr<c10::ivalue::Future>& result, c10d::WorkResult settledAs) {
  try {
    result->markCompleted(c10::IValue(static_cast<uint8_t>(settledAs)));
  } catch (const std::exception& e) {
    LOG(ERROR) << "[nccl_migrate] a callback of an op's result future threw: " << e.what();
  }
}

c10::intrusive_ptr<c10::ivalue::Future> EngineWork::getFutureResult() {
  (void)isCompleted();  // an op that finished is decided now, as torch nccl2's checkStatus() does
  c10::intrusive_ptr<c10::ivalue::Future> made;
  c10d::WorkResult settledAs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (result_) return result_;
    result_ = made = c10::make_intrusive<c10::ivalue::Future>(c10::AnyEnumType::get());
    if (!completed_) return made;  // settle() completes it
    settledAs = settledAs_;
  }
  markResult(made, settledAs);
  return made;
}

}  // namespace nccl_migrate::backends
