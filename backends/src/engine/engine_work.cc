// EngineWork: see engine_work.h.
#include "engine_work.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

namespace nccl_migrate::backends {
namespace {

// torch.distributed.DistBackendError on the Python side, like torch's own backends raise.
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

}  // namespace

EngineWork::EngineWork(int rank, c10d::OpType type, uint64_t sequence, std::string description,
                       std::unique_ptr<InFlight> inFlight, std::vector<at::Tensor> outputs,
                       std::chrono::milliseconds defaultTimeout)
    : c10d::Work(rank, type),
      sequence_(sequence),
      description_(std::move(description)),
      inFlight_(std::move(inFlight)),
      outputs_(std::move(outputs)),
      defaultTimeout_(defaultTimeout) {}

bool EngineWork::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (completed_) return true;
  return inFlight_->isDone();
}

bool EngineWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr EngineWork::withContext(const std::exception_ptr& cause) const {
  return backendError(description_ + " failed: " + messageOf(cause));
}

bool EngineWork::wait(std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) {
      if (exception_) std::rethrow_exception(exception_);
      return true;
    }
  }
  auto limit = timeout == kNoTimeout ? defaultTimeout_ : timeout;
  try {
    inFlight_->wait(limit);
  } catch (...) {
    auto error = withContext(std::current_exception());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      completed_ = true;
      exception_ = error;
    }
    std::rethrow_exception(error);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  completed_ = true;
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> EngineWork::getFuture() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (future_) return future_;
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  auto future = future_;
  auto outputs = outputs_;
  auto describe = description_;
  inFlight_->onDone([future, outputs, describe](std::exception_ptr error) {
    if (error) {
      future->setError(backendError(describe + " failed: " + messageOf(error)));
      return;
    }
    future->markCompleted(c10::IValue(outputs));
  });
  return future_;
}

}  // namespace nccl_migrate::backends
