// GlooCommunicator: ops are forwarded to torch's Gloo backend; its Work is our InFlight.
#include "gloo_communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "common/exit_gate.h"
#include "common/in_flight_sets.h"

namespace nccl_migrate::backends {

// Shared by a communicator and its in-flight ops. Gloo's own abort does not interrupt an op
// blocked on a peer that never joins, so abort() fails the pending ops here instead.
struct AbortSignal {
  std::mutex mutex;
  std::condition_variable changed;
  std::atomic<bool> aborted{false};
  std::string key;
  // The group's timeout: Gloo's send and recv waits given none fall back to the timeout the
  // context connected under, a fifth of it (glooConnectContextTimeout).
  std::chrono::milliseconds opTimeout{0};
  // How many op calls hold a reference to the Gloo backend now (GlooCommunicator::InCall).
  int callsHoldingGloo = 0;
};

namespace {

class GlooInFlight final : public InFlight {
 public:
  // `hasFuture`: Gloo gives futures for most works, but not for send, recv and the flat
  // reduce-scatter; their wait cannot be interrupted, and is bounded by the timeout alone.
  GlooInFlight(c10::intrusive_ptr<c10d::Work> work, std::shared_ptr<AbortSignal> signal, bool hasFuture)
      : work_(std::move(work)), signal_(std::move(signal)), hasFuture_(hasFuture) {}
  ~GlooInFlight() override {
    // An op Gloo has not finished (its peer died or went silent) still runs on Gloo's worker
    // thread. Were that thread's reference the last, it would free the op's tensors there, which
    // takes the GIL, and ends the process once the interpreter's exit has begun (ExitGate). Such
    // ops are rare and their memory goes with the process anyway: keep them. Past the exit's
    // start, a finished op's worker may not have let go of it yet either.
    if (work_ && (!work_->isCompleted() || ExitGate::closed())) ExitGate::keep(std::move(work_));
  }
  bool isDone() override { return work_->isCompleted() || signal_->aborted; }
  std::exception_ptr failure() override {
    if (work_->isCompleted()) return work_->exception();
    return signal_->aborted ? abortedError() : nullptr;
  }
  void wait(std::chrono::milliseconds timeout) override {
    if (hasFuture_ && !work_->isCompleted()) {
      // Waits on the future rather than in Gloo's wait, so an abort wakes the waiter.
      auto future = work_->getFuture();
      future->addCallback([signal = signal_](c10::ivalue::Future&) {
        { std::lock_guard<std::mutex> lock(signal->mutex); }  // no wakeup lost between check and wait
        signal->changed.notify_all();
      });
      {
        std::unique_lock<std::mutex> lock(signal_->mutex);
        signal_->changed.wait_for(lock, timeout, [&] { return future->completed() || signal_->aborted; });
      }
      if (!future->completed()) {
        if (signal_->aborted) std::rethrow_exception(abortedError());
        throw OpTimedOut("the op did not complete within " + std::to_string(timeout.count()) + " ms");
      }
    } else if (signal_->aborted && !work_->isCompleted()) {
      std::rethrow_exception(abortedError());
    }
    work_->wait(timeout);  // Gloo's own error, if any
  }
  void onDone(std::function<void(std::exception_ptr)> callback) override {
    callback = ExitGate::guard(std::move(callback));  // Gloo's worker, or our waiter, runs it
    if (hasFuture_) {
      ExitGate::Registering registering;  // a finished op's future runs it here, at once
      work_->getFuture()->addCallback([callback = std::move(callback)](c10::ivalue::Future& future) {
        callback(future.hasError() ? future.exception_ptr() : nullptr);
      });
      return;
    }
    // Gloo gives no future for send, recv and the flat reduce-scatter: a thread waits in Gloo
    // (bounded by the group's timeout) and completes ours, so get_future() works for every op, as on NCCL.
    std::thread([work = work_, timeout = signal_->opTimeout, callback = std::move(callback)]() mutable {
      std::exception_ptr error;
      try {
        work->wait(timeout);
      } catch (...) {
        error = std::current_exception();
      }
      std::exchange(callback, nullptr)(error);
      ExitGate::release(std::move(work));  // the process may have begun to exit while it waited
    }).detach();
  }

 private:
  std::exception_ptr abortedError() const {
    return std::make_exception_ptr(
        std::runtime_error("communicator " + signal_->key + " was aborted while the op was pending"));
  }

  c10::intrusive_ptr<c10d::Work> work_;
  std::shared_ptr<AbortSignal> signal_;
  bool hasFuture_;
};

c10d::ReduceOp glooOp(c10d::ReduceOp::RedOpType type) { return c10d::ReduceOp(type); }

// How many times its context's timeout Gloo's connect can take (see the header).
constexpr int kGlooConnectWaits = 5;

}  // namespace

std::chrono::milliseconds glooConnectContextTimeout(std::chrono::milliseconds connectBudget) {
  return std::max(std::chrono::milliseconds(1), connectBudget / kGlooConnectWaits);
}

GlooCommunicator::GlooCommunicator(CommunicatorInfo info, c10::intrusive_ptr<c10d::Backend> gloo,
                                   std::chrono::milliseconds opTimeout)
    : info_(std::move(info)), gloo_(std::move(gloo)), abortSignal_(std::make_shared<AbortSignal>()) {
  abortSignal_->key = info_.key;
  abortSignal_->opTimeout = opTimeout;
}

GlooCommunicator::~GlooCommunicator() = default;

GlooCommunicator::InCall GlooCommunicator::gloo() {
  // A copy taken under the abort's lock: abort() takes gloo_ away on another thread (the engine
  // aborts off its own lock), and an op being issued meanwhile must neither read gloo_ as it is
  // moved nor lose the backend under its call. The op's copy keeps it alive until the call returns.
  std::lock_guard<std::mutex> lock(abortSignal_->mutex);
  TORCH_CHECK(gloo_ && !abortSignal_->aborted, "communicator ", info_.key, " was aborted");
  ++abortSignal_->callsHoldingGloo;
  return InCall(gloo_, abortSignal_);
}

GlooCommunicator::InCall::InCall(c10::intrusive_ptr<c10d::Backend> gloo, std::shared_ptr<AbortSignal> signal)
    : gloo_(std::move(gloo)), signal_(std::move(signal)) {}

// The call's reference goes before the count says the call is over: until then the abort's
// teardown thread holds its own (it waits for the count to reach zero), so the call's is never
// the last. Were it the last, ~ProcessGroupGloo (which waits for Gloo's work queue and joins its
// workers, without bound when an op is stuck on a dead peer) would run here, on the job's thread,
// outside any ExitGate section.
GlooCommunicator::InCall::~InCall() {
  gloo_.reset();
  {
    std::lock_guard<std::mutex> lock(signal_->mutex);
    --signal_->callsHoldingGloo;
  }
  signal_->changed.notify_all();
}

std::unique_ptr<InFlight> GlooCommunicator::track(c10::intrusive_ptr<c10d::Work> work, bool hasFuture,
                                                  std::function<void()> then) {
  std::unique_ptr<InFlight> op = std::make_unique<GlooInFlight>(std::move(work), abortSignal_, hasFuture);
  if (then) op = std::make_unique<ThenInFlight>(std::move(op), std::move(then));
  if (!batching_) return op;
  batch_.push_back(std::move(op));
  return nullptr;
}

// Gloo has neither AVG nor PREMUL_SUM; both are a SUM, with the factor applied to the input
// first (PREMUL_SUM, here) or the result divided after the op (AVG, in averaged()).
c10d::ReduceOp GlooCommunicator::glooOpFor(const Reduction& r, at::Tensor& input) {
  switch (r.kind) {
    case Reduction::Kind::Sum: return glooOp(c10d::ReduceOp::SUM);
    case Reduction::Kind::Product: return glooOp(c10d::ReduceOp::PRODUCT);
    case Reduction::Kind::Min: return glooOp(c10d::ReduceOp::MIN);
    case Reduction::Kind::Max: return glooOp(c10d::ReduceOp::MAX);
    case Reduction::Kind::Avg: return glooOp(c10d::ReduceOp::SUM);
    case Reduction::Kind::PreMulSum:
      if (r.tensorFactor.defined()) {
        input.mul_(r.tensorFactor);
      } else {
        input.mul_(r.scalarFactor.value());
      }
      return glooOp(c10d::ReduceOp::SUM);
  }
  TORCH_CHECK(false, "unknown reduction");
}

// AVG's division of the sum, once the op is done: nobody sees the undivided sum, and the host
// does not wait at issue. Integers divide as NCCL does: truncated.
std::function<void()> GlooCommunicator::averaged(const Reduction& r, const at::Tensor& result) const {
  if (r.kind != Reduction::Kind::Avg) return nullptr;
  return [result, size = info_.size] {
    if (at::isIntegralType(result.scalar_type(), /*includeBool=*/false)) {
      result.div_(size, "trunc");
    } else {
      result.div_(size);
    }
  };
}

std::unique_ptr<InFlight> GlooCommunicator::allReduce(at::Tensor& tensor, const Reduction& reduction) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = glooOpFor(reduction, tensor);
  return track(gloo()->allreduce(tensors, options), /*hasFuture=*/true, averaged(reduction, tensor));
}

std::unique_ptr<InFlight> GlooCommunicator::broadcast(at::Tensor& tensor, int root) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  return track(gloo()->broadcast(tensors, options));
}

std::unique_ptr<InFlight> GlooCommunicator::reduce(at::Tensor& tensor, int root, const Reduction& reduction) {
  bool isRoot = info_.rank == root;
  // NCCL leaves a non-root's buffer as it was: a PREMUL_SUM scales a copy there.
  at::Tensor source = reduction.kind == Reduction::Kind::PreMulSum && !isRoot ? tensor.clone() : tensor;
  std::vector<at::Tensor> tensors{source};
  c10d::ReduceOptions options;
  options.rootRank = root;
  options.reduceOp = glooOpFor(reduction, source);
  return track(gloo()->reduce(tensors, options), /*hasFuture=*/true, isRoot ? averaged(reduction, tensor) : nullptr);
}

std::unique_ptr<InFlight> GlooCommunicator::allGather(at::Tensor& output, at::Tensor& input) {
  return track(gloo()->_allgather_base(output, input));
}

std::unique_ptr<InFlight> GlooCommunicator::reduceScatter(at::Tensor& output, at::Tensor& input,
                                                          const Reduction& reduction) {
  c10d::ReduceScatterOptions options;
  // The input stays as the job gave it.
  at::Tensor source = reduction.kind == Reduction::Kind::PreMulSum ? input.clone() : input;
  options.reduceOp = glooOpFor(reduction, source);
  // Gloo gives no future for the flat reduce-scatter.
  return track(gloo()->_reduce_scatter_base(output, source, options), /*hasFuture=*/false,
               averaged(reduction, output));
}

std::unique_ptr<InFlight> GlooCommunicator::allToAll(at::Tensor& output, at::Tensor& input,
                                                     const std::vector<int64_t>& outputSplits,
                                                     const std::vector<int64_t>& inputSplits) {
  // Gloo takes the split sizes by reference and may consume them: it gets copies.
  std::vector<int64_t> outSplits = outputSplits, inSplits = inputSplits;
  return track(gloo()->alltoall_base(output, input, outSplits, inSplits));
}

std::unique_ptr<InFlight> GlooCommunicator::gather(std::vector<at::Tensor>& outputs, at::Tensor& input, int root) {
  std::vector<std::vector<at::Tensor>> outputLists;
  if (info_.rank == root) outputLists.push_back(outputs);
  std::vector<at::Tensor> inputs{input};
  c10d::GatherOptions options;
  options.rootRank = root;
  return track(gloo()->gather(outputLists, inputs, options));
}

std::unique_ptr<InFlight> GlooCommunicator::scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) {
  std::vector<at::Tensor> outputs{output};
  std::vector<std::vector<at::Tensor>> inputLists;
  if (info_.rank == root) inputLists.push_back(inputs);
  c10d::ScatterOptions options;
  options.rootRank = root;
  return track(gloo()->scatter(outputs, inputLists, options));
}

std::unique_ptr<InFlight> GlooCommunicator::allToAll(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs) {
#if NCCL_MIGRATE_TORCH_HAS_GLOO_ALLTOALL
  return track(gloo()->alltoall(outputs, inputs));
#else
  // Older torch's Gloo (2.11) has only the flat all-to-all: the inputs go as one buffer split
  // per peer, and each peer's part is copied out once it arrived.
  std::vector<at::Tensor> flatInputs;
  std::vector<int64_t> inSplits, outSplits;
  for (const at::Tensor& in : inputs) {
    flatInputs.push_back(in.reshape(-1));
    inSplits.push_back(in.numel());
  }
  int64_t received = 0;
  for (const at::Tensor& out : outputs) {
    outSplits.push_back(out.numel());
    received += out.numel();
  }
  at::Tensor flatIn = at::cat(flatInputs);
  at::Tensor flatOut = at::empty({received}, outputs.at(0).options());
  // Gloo takes the split sizes by reference and may consume them: it gets copies.
  std::vector<int64_t> outSplitsArg = outSplits, inSplitsArg = inSplits;
  auto copyOut = [outputs, flatOut, outSplits] {
    int64_t offset = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
      outputs[i].copy_(flatOut.narrow(0, offset, outSplits[i]).view(outputs[i].sizes()));
      offset += outSplits[i];
    }
  };
  return track(gloo()->alltoall_base(flatOut, flatIn, outSplitsArg, inSplitsArg), /*hasFuture=*/true, copyOut);
#endif
}

std::unique_ptr<InFlight> GlooCommunicator::send(at::Tensor& tensor, int peer) {
  std::vector<at::Tensor> tensors{tensor};
  return track(gloo()->send(tensors, peer, /*tag=*/0), /*hasFuture=*/false);
}

std::unique_ptr<InFlight> GlooCommunicator::recv(at::Tensor& tensor, int peer) {
  std::vector<at::Tensor> tensors{tensor};
  return track(gloo()->recv(tensors, peer, /*tag=*/0), /*hasFuture=*/false);
}

// Gloo ops never block each other at issue, so a batch is issued op by op and completes as a set.
void GlooCommunicator::beginBatch() {
  TORCH_CHECK(!batching_, "a coalescing batch is already open on communicator ", info_.key);
  batching_ = true;
}

void GlooCommunicator::copyAfterBatch(const at::Tensor& to, const at::Tensor& from) {
  TORCH_CHECK(batching_, "copyAfterBatch outside a batch on communicator ", info_.key);
  afterBatch_.push_back([to, from] { to.copy_(from); });
}

std::unique_ptr<InFlight> GlooCommunicator::endBatch() {
  TORCH_CHECK(batching_, "endCoalescing without startCoalescing on communicator ", info_.key);
  batching_ = false;
  auto batch = std::make_unique<InFlightSet>(std::exchange(batch_, {}));
  if (afterBatch_.empty()) return batch;
  return std::make_unique<ThenInFlight>(std::move(batch), [copies = std::exchange(afterBatch_, {})] {
    for (const auto& copy : copies) copy();
  });
}

void GlooCommunicator::abort() {
  c10::intrusive_ptr<c10d::Backend> gloo;
  {
    std::lock_guard<std::mutex> lock(abortSignal_->mutex);
    // Once: a group's abort may meet another's (the engine aborts off its lock, on threads of
    // their own), and only the first may take gloo_.
    if (abortSignal_->aborted) return;
    abortSignal_->aborted = true;  // pending ops fail now
    gloo = std::move(gloo_);  // under the lock that gloo() copies it under
  }
  abortSignal_->changed.notify_all();
  if (!gloo) return;
  // Gloo's abort and its teardown wait for an op blocked on a peer that may never answer; the
  // caller (the watchdog, shrink, reconfigure) must not, so they finish on their own thread.
  // Its teardown joins Gloo's workers, which let go of the last ops there: inside a section, so
  // that an exit starting meanwhile waits for it (ExitGate). The thread lets go of the backend
  // only after every op call that took a copy before the abort has returned (InCall), so that the
  // teardown is always this thread's, never a job thread's.
  std::thread([gloo = std::move(gloo), signal = abortSignal_]() mutable {
    try {
      gloo->abort();
    } catch (...) {
      // abort must not throw; the communicator is unusable either way.
    }
    {
      std::unique_lock<std::mutex> lock(signal->mutex);
      signal->changed.wait(lock, [&] { return signal->callsHoldingGloo == 0; });
    }
    ExitGate::release(std::move(gloo));
  }).detach();
}

}  // namespace nccl_migrate::backends
