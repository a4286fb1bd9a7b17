// What the toolkit's threads may do once the interpreter's exit has begun. From then on, a
// thread that takes the GIL is ended by the interpreter (Python 3.11's pthread_exit), and inside
// a C++ destructor that ends the whole process (std::terminate, SIGABRT). Releasing anything
// Python has seen takes the GIL: a tensor whose Python object lives, a future holding Python
// callbacks. So work that a thread other than the caller's does for an op (Gloo's worker, a
// waiter of ours) runs in a Section; the atexit hook closes the gate, waits for the open
// sections, and from then on such work keeps what it holds instead of releasing it: the process
// is ending, and its memory goes with it. (On CUDA, the NCCL path completes an op's future on
// the caller's thread; the simulated device, a test double, on its stream's.)
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <type_traits>
#include <utility>

namespace nccl_migrate::backends {

class ExitGate {
 public:
  // Open (true) unless the exit has begun; while open, the exit waits for it to end.
  class Section {
   public:
    Section();
    ~Section();
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;
    explicit operator bool() const { return open_; }

   private:
    bool open_;
  };

  // From the atexit hook, with the GIL released: no section opens after this, and the open ones
  // are waited for up to `bound` (a section stuck longer is a library call that never returns).
  static void close(std::chrono::milliseconds bound);
  static bool closed();

  // What an op's thread holds once the exit has begun: never released. Moved in, so that the
  // caller's own copy holds nothing when it is destroyed.
  template <class... Held>
  static void keep(Held&&... held) {
    static_assert((!std::is_lvalue_reference_v<Held> && ...), "keep() takes what it keeps by std::move");
    (new std::decay_t<Held>(std::forward<Held>(held)), ...);
  }

  // Lets go of `held` inside a section (its destructors run before the exit may begin), or keeps
  // it once the exit has begun: what an op's thread does last with what it held.
  template <class Held>
  static void release(Held&& held) {
    Section section;
    if (!section) return keep(std::forward<Held>(held));
    [[maybe_unused]] std::decay_t<Held> released = std::forward<Held>(held);  // goes before the section ends
  }

  // `callback` as another thread may run it: in a section, and released inside it (not later,
  // when that thread destroys the wrapper); kept once the exit has begun. Run while its
  // registration is under way on that thread (see Registering), it simply runs.
  static std::function<void(std::exception_ptr)> guard(std::function<void(std::exception_ptr)> callback);

  // Around handing a guarded callback to a library that may run it at once, on this thread (a
  // future already complete): that thread is the caller's, so an op finished before an atexit
  // hook that waits on its future still completes it. (Not the registering thread's identity:
  // a Python callback on Gloo's worker may issue an op whose future a worker completes later.)
  class Registering {
   public:
    Registering();
    ~Registering();
    Registering(const Registering&) = delete;
    Registering& operator=(const Registering&) = delete;
  };
};

}  // namespace nccl_migrate::backends
