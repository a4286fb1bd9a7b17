// InFlightSet: see in_flight_sets.h.
#include "in_flight_sets.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include <c10/util/Exception.h>

namespace nccl_migrate::backends {

InFlightSet::InFlightSet(std::vector<std::unique_ptr<InFlight>> members) : members_(std::move(members)) {}

bool InFlightSet::isDone() {
  for (auto& m : members_) {
    if (!m->isDone()) return false;
  }
  return true;
}

std::exception_ptr InFlightSet::failure() {
  for (auto& m : members_) {
    if (auto error = m->failure()) return error;
  }
  return nullptr;
}

void InFlightSet::wait(std::chrono::milliseconds timeout) {
  // One deadline for the whole set: waiting member by member must not multiply the timeout.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& m : members_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    m->wait(std::max(left, std::chrono::milliseconds(1)));
  }
}

// Device ordering for the set only when every member has it; else the caller waits on the host.
bool InFlightSet::waitOnDevice() {
  if (!onDevice()) return false;
  for (auto& m : members_) m->waitOnDevice();
  return true;
}

bool InFlightSet::onDevice() const {
  return !members_.empty() &&
         std::all_of(members_.begin(), members_.end(), [](const auto& m) { return m->onDevice(); });
}

void InFlightSet::onDone(std::function<void(std::exception_ptr)> callback) {
  if (members_.empty()) return callback(nullptr);
  struct Countdown {
    std::atomic<size_t> left;
    std::mutex mutex;
    std::exception_ptr firstError;
    std::function<void(std::exception_ptr)> callback;
  };
  auto state = std::make_shared<Countdown>();
  state->left = members_.size();
  state->callback = std::move(callback);
  for (auto& m : members_) {
    m->onDone([state](std::exception_ptr error) {
      if (error) {
        std::lock_guard<std::mutex> lock(state->mutex);
        if (!state->firstError) state->firstError = error;
      }
      if (--state->left == 0) state->callback(state->firstError);
    });
  }
}

struct ThenInFlight::Then {
  std::once_flag once;
  std::function<void()> work;
  std::exception_ptr error;
  // Runs the work once; a failing op skips it (its outputs hold nothing to finish).
  std::exception_ptr after(std::exception_ptr opError) {
    if (opError) return opError;
    std::call_once(once, [&] {
      try {
        work();
      } catch (...) {
        error = std::current_exception();
      }
      work = nullptr;  // what it captured is freed with the op, not kept by the tracker
    });
    return error;
  }
};

ThenInFlight::ThenInFlight(std::unique_ptr<InFlight> op, std::function<void()> then)
    : op_(std::move(op)), then_(std::make_shared<Then>()) {
  then_->work = std::move(then);
}

bool ThenInFlight::isDone() {
  if (!op_->isDone()) return false;
  then_->after(op_->failure());
  return true;
}

std::exception_ptr ThenInFlight::failure() {
  if (!op_->isDone()) return op_->failure();
  return then_->after(op_->failure());
}

void ThenInFlight::wait(std::chrono::milliseconds timeout) {
  op_->wait(timeout);
  if (auto error = then_->after(nullptr)) std::rethrow_exception(error);
}

void ThenInFlight::onDone(std::function<void(std::exception_ptr)> callback) {
  op_->onDone([then = then_, callback = std::move(callback)](std::exception_ptr error) {
    callback(then->after(error));
  });
}

}  // namespace nccl_migrate::backends

namespace nccl_migrate::backends {

void DeferredInFlight::wait(std::chrono::milliseconds timeout) {
  if (*slot_) (*slot_)->wait(timeout);
}

void DeferredInFlight::onDone(std::function<void(std::exception_ptr)> callback) {
  TORCH_CHECK(*slot_, "this op belongs to a coalescing batch that has not been issued yet; call endCoalescing first");
  (*slot_)->onDone(std::move(callback));
}

}  // namespace nccl_migrate::backends
