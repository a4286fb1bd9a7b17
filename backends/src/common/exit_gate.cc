// ExitGate: see exit_gate.h. Process-wide, as the interpreter it guards is.
#include "exit_gate.h"

#include <condition_variable>
#include <mutex>
#include <utility>

namespace nccl_migrate::backends {
namespace {

struct GateState {
  std::mutex mutex;
  std::condition_variable sectionEnded;
  bool closed = false;
  int openSections = 0;
};

GateState& gate() {
  static GateState* state = new GateState;  // never destroyed: threads may still ask at exit
  return *state;
}

thread_local int registrationsUnderWay = 0;  // see Registering

}  // namespace

ExitGate::Section::Section() {
  std::lock_guard<std::mutex> lock(gate().mutex);
  open_ = !gate().closed;
  if (open_) ++gate().openSections;
}

ExitGate::Section::~Section() {
  if (!open_) return;
  std::lock_guard<std::mutex> lock(gate().mutex);
  if (--gate().openSections == 0) gate().sectionEnded.notify_all();
}

void ExitGate::close(std::chrono::milliseconds bound) {
  std::unique_lock<std::mutex> lock(gate().mutex);
  gate().closed = true;
  gate().sectionEnded.wait_for(lock, bound, [] { return gate().openSections == 0; });
}

bool ExitGate::closed() {
  std::lock_guard<std::mutex> lock(gate().mutex);
  return gate().closed;
}

ExitGate::Registering::Registering() { ++registrationsUnderWay; }
ExitGate::Registering::~Registering() { --registrationsUnderWay; }

std::function<void(std::exception_ptr)> ExitGate::guard(std::function<void(std::exception_ptr)> callback) {
  return [callback = std::move(callback)](std::exception_ptr error) mutable {
    if (registrationsUnderWay > 0) return std::exchange(callback, nullptr)(error);
    Section section;
    if (!section) return keep(std::exchange(callback, nullptr));
    std::exchange(callback, nullptr)(error);  // the temporary, and what it captured, go before the section ends
  };
}

}  // namespace nccl_migrate::backends
