// NcclInFlight: see nccl_in_flight.h.
#include "nccl_in_flight.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace nccl_migrate::backends {
namespace {

std::exception_ptr abortedDuring(const std::string& op) {
  return std::make_exception_ptr(
      nccl::NcclError(ncclSystemError, "the communicator was aborted while " + op + " was in flight"));
}

}  // namespace

bool NcclInFlight::isDone() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_ || p_.captured) return true;
  nccl::EventStatus status = p_.end->query();
  if (p_.handle->aborted()) {
    // Aborted under it: whatever the stream does now, the op did not complete. Its tensors stay
    // stashed until the stream has passed it.
    done_ = true;
    deviceError_ = abortedDuring(p_.op);
    if (status.state == nccl::EventState::Done) p_.stash.clear();
    return true;
  }
  if (status.state == nccl::EventState::Pending) return false;
  done_ = true;
  if (status.state == nccl::EventState::Failed) {
    deviceError_ = std::make_exception_ptr(nccl::NcclError(
        ncclUnhandledCudaError, "the device failed during " + p_.op + " (" + status.error + ")"));
  }
  p_.stash.clear();  // the stream has passed the op: its memory may be reused
  return true;
}

std::exception_ptr NcclInFlight::failure() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return deviceError_;
  }
  ncclResult_t state = p_.handle->asyncError();
  if (state == ncclSuccess) return nullptr;
  return std::make_exception_ptr(nccl::NcclError(
      state, std::string("NCCL asynchronous error during ") + p_.op + ": " + p_.handle->api().errorString(state) +
                 " (NCCL result " + std::to_string(static_cast<int>(state)) + ")"));
}

void NcclInFlight::orderCaller() { p_.end->block(p_.runtime->currentStream(p_.device)); }

bool NcclInFlight::waitOnDevice() {
  orderCaller();
  return true;
}

void NcclInFlight::wait(std::chrono::milliseconds timeout) {
  if (!p_.captured) {  // a captured op runs on replay: there is nothing to wait for now
    auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::microseconds(50);
    while (!isDone()) {
      if (auto error = failure()) std::rethrow_exception(error);
      if (std::chrono::steady_clock::now() > deadline) {
        throw OpTimedOut(p_.op + " timed out after " + std::to_string(timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
    if (auto error = failure()) std::rethrow_exception(error);
  }
  // Only once the op finished: on a device whose "stream" is the host itself (the simulated
  // one), ordering the caller first would block before the timeout could be seen.
  orderCaller();
}

void NcclInFlight::onDone(std::function<void(std::exception_ptr)> callback) {
  // An abort releases the stream past an op that never finished: the callback is told (the
  // engine completes a device op's future regardless, as torch does). (Only the
  // handle's flag is read: a host function in the stream may not call CUDA.)
  // In the communicator's stream order the engine asks at issue (EngineWork::Identity), so the
  // completion follows this op and nothing issued after it, as torch's legacy collective() marks
  // its future right after the op's end event; in the caller's, at getFuture(), as nccl2's.
  auto complete = [callback = std::move(callback), handle = p_.handle, op = p_.op] {
    if (!handle->aborted()) return callback(nullptr);
    callback(abortedDuring(op));
  };
  if (p_.futureOrder == FutureOrder::CommunicatorStream) {
    p_.runtime->completeInStreamOrder(p_.stream, complete);
    return;
  }
  nccl::StreamRef caller = p_.runtime->currentStream(p_.device);
  p_.end->block(caller);
  p_.runtime->completeInStreamOrder(caller, complete);
}

}  // namespace nccl_migrate::backends
