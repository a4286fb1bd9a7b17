// GlooCommunicator: ops are forwarded to torch's Gloo backend; its Work is our InFlight.
#include "gloo_communicator.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "common/in_flight_sets.h"

namespace nccl_migrate::backends {

// Shared by a communicator and its in-flight ops. Gloo's own abort does not interrupt an op
// blocked on a peer that never joins, so abort() fails the pending ops here instead.
struct AbortSignal {
  std::mutex mutex;
  std::condition_variable changed;
  std::atomic<bool> aborted{false};
  std::string key;
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
    // thread. Were that thread's reference the last, it would free the op's tensors there, and
    // freeing a tensor Python owns takes the GIL, which ends the process (std::terminate) when
    // it happens during interpreter shutdown (seen with torch 2.11). Such ops are rare and
    // their memory goes with the process anyway: keep them.
    if (work_ && !work_->isCompleted()) new c10::intrusive_ptr<c10d::Work>(std::move(work_));
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
    if (hasFuture_) {
      work_->getFuture()->addCallback([callback = std::move(callback)](c10::ivalue::Future& future) {
        callback(future.hasError() ? future.exception_ptr() : nullptr);
      });
      return;
    }
    // Gloo gives no future for send, recv and the flat reduce-scatter: a thread waits in Gloo
    // (bounded by its timeout) and completes ours, so get_future() works for every op, as on NCCL.
    std::thread([work = work_, callback = std::move(callback)] {
      std::exception_ptr error;
      try {
        work->wait();
      } catch (...) {
        error = std::current_exception();
      }
      callback(error);
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

// A member of a batch: the batch's set answers for it.
class BatchMemberInFlight final : public InFlight {
 public:
  bool isDone() override { return false; }
  std::exception_ptr failure() override { return nullptr; }
  void wait(std::chrono::milliseconds) override {
    TORCH_CHECK(false, "an op inside a coalescing batch completes with the batch: wait on endCoalescing's work");
  }
  void onDone(std::function<void(std::exception_ptr)>) override {}
};

c10d::ReduceOp sumOp() { return c10d::ReduceOp(c10d::ReduceOp::SUM); }

bool composedFromSum(const c10d::ReduceOp& op) {
  return op == c10d::ReduceOp::AVG || op == c10d::ReduceOp::PREMUL_SUM;
}

double premulFactor(const c10d::ReduceOp& op) {
  auto supplement = c10::static_intrusive_pointer_cast<c10d::PreMulSumSupplement>(op.supplement_);
  TORCH_CHECK(supplement, "PREMUL_SUM needs a factor");
  return supplement->tensor_factor.defined() ? supplement->tensor_factor.item<double>() : supplement->double_factor;
}

}  // namespace

GlooCommunicator::GlooCommunicator(CommunicatorInfo info, c10::intrusive_ptr<c10d::Backend> gloo)
    : info_(std::move(info)), gloo_(std::move(gloo)), abortSignal_(std::make_shared<AbortSignal>()) {
  abortSignal_->key = info_.key;
}

GlooCommunicator::~GlooCommunicator() = default;

c10d::Backend& GlooCommunicator::gloo() {
  TORCH_CHECK(gloo_, "communicator ", info_.key, " was aborted");
  return *gloo_;
}

std::unique_ptr<InFlight> GlooCommunicator::track(c10::intrusive_ptr<c10d::Work> work, bool hasFuture) {
  auto op = std::make_unique<GlooInFlight>(std::move(work), abortSignal_, hasFuture);
  if (!batching_) return op;
  batch_.push_back(std::move(op));
  return std::make_unique<BatchMemberInFlight>();
}

std::unique_ptr<InFlight> GlooCommunicator::allReduce(at::Tensor& tensor, const c10d::ReduceOp& op) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = asGlooSum(op, tensor);
  return summed(gloo().allreduce(tensors, options), op, &tensor);
}

// Gloo has neither AVG nor PREMUL_SUM; both are a SUM, with the factor applied to the input
// first (PREMUL_SUM, here) or the result divided afterwards (AVG, in summed()).
c10d::ReduceOp GlooCommunicator::asGlooSum(const c10d::ReduceOp& op, at::Tensor& input) {
  if (op == c10d::ReduceOp::PREMUL_SUM) input.mul_(premulFactor(op));
  return composedFromSum(op) ? sumOp() : op;
}

std::unique_ptr<InFlight> GlooCommunicator::summed(c10::intrusive_ptr<c10d::Work> work, const c10d::ReduceOp& op,
                                                   at::Tensor* result, bool hasFuture) {
  if (op != c10d::ReduceOp::AVG) return track(std::move(work), hasFuture);
  // Synchronous, so nobody can see the undivided sum. Integers divide as NCCL does: truncated.
  work->wait();
  if (result && at::isIntegralType(result->scalar_type(), /*includeBool=*/false)) {
    result->div_(info_.size, "trunc");
  } else if (result) {
    result->div_(info_.size);
  }
  return std::make_unique<FinishedInFlight>();
}

std::unique_ptr<InFlight> GlooCommunicator::broadcast(at::Tensor& tensor, int root) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  return track(gloo().broadcast(tensors, options));
}

std::unique_ptr<InFlight> GlooCommunicator::reduce(at::Tensor& tensor, int root, const c10d::ReduceOp& op) {
  // NCCL leaves a non-root's buffer as it was: a PREMUL_SUM scales a copy there.
  at::Tensor source = op == c10d::ReduceOp::PREMUL_SUM && info_.rank != root ? tensor.clone() : tensor;
  std::vector<at::Tensor> tensors{source};
  c10d::ReduceOptions options;
  options.rootRank = root;
  options.reduceOp = asGlooSum(op, source);
  return summed(gloo().reduce(tensors, options), op, info_.rank == root ? &tensor : nullptr);
}

std::unique_ptr<InFlight> GlooCommunicator::allGather(std::vector<at::Tensor>& outputs, at::Tensor& input) {
  std::vector<std::vector<at::Tensor>> outputLists{outputs};
  std::vector<at::Tensor> inputs{input};
  return track(gloo().allgather(outputLists, inputs));
}

std::unique_ptr<InFlight> GlooCommunicator::allGatherInto(at::Tensor& output, at::Tensor& input) {
  return track(gloo()._allgather_base(output, input));
}

std::unique_ptr<InFlight> GlooCommunicator::reduceScatter(at::Tensor& output, std::vector<at::Tensor>& inputs,
                                                          const c10d::ReduceOp& op) {
  // Gloo's list form reduce-scatter is a stack of flat buffers; the flat form is all we need.
  at::Tensor flat = at::cat(inputs).reshape(-1);
  at::Tensor out = output.reshape(-1);  // a view: results land in output
  return reduceScatterFrom(out, flat, op);
}

std::unique_ptr<InFlight> GlooCommunicator::reduceScatterFrom(at::Tensor& output, at::Tensor& input,
                                                              const c10d::ReduceOp& op) {
  c10d::ReduceScatterOptions options;
  at::Tensor source = op == c10d::ReduceOp::PREMUL_SUM ? input.clone() : input;  // the input stays as given
  options.reduceOp = asGlooSum(op, source);
  return summed(gloo()._reduce_scatter_base(output, source, options), op, &output, /*hasFuture=*/false);
}

std::unique_ptr<InFlight> GlooCommunicator::allToAll(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs) {
#if NCCL_MIGRATE_TORCH_HAS_GLOO_ALLTOALL
  return track(gloo().alltoall(outputs, inputs));
#else
  // Older torch's Gloo (2.11) has only the flat all-to-all: the inputs go as one buffer split
  // per peer, and each peer's part is copied out once it arrived (synchronously, as AVG in
  // summed() is).
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
  gloo().alltoall_base(flatOut, flatIn, outSplitsArg, inSplitsArg)->wait();
  int64_t offset = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].copy_(flatOut.narrow(0, offset, outSplits[i]).view(outputs[i].sizes()));
    offset += outSplits[i];
  }
  return std::make_unique<FinishedInFlight>();
#endif
}

std::unique_ptr<InFlight> GlooCommunicator::allToAllSingle(at::Tensor& output, at::Tensor& input,
                                                           const std::vector<int64_t>& outputSplits,
                                                           const std::vector<int64_t>& inputSplits) {
  std::vector<int64_t> outSplits = outputSplits, inSplits = inputSplits;
  return track(gloo().alltoall_base(output, input, outSplits, inSplits));
}

std::unique_ptr<InFlight> GlooCommunicator::gather(std::vector<at::Tensor>& outputs, at::Tensor& input, int root) {
  std::vector<std::vector<at::Tensor>> outputLists;
  if (info_.rank == root) outputLists.push_back(outputs);
  std::vector<at::Tensor> inputs{input};
  c10d::GatherOptions options;
  options.rootRank = root;
  return track(gloo().gather(outputLists, inputs, options));
}

std::unique_ptr<InFlight> GlooCommunicator::scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) {
  std::vector<at::Tensor> outputs{output};
  std::vector<std::vector<at::Tensor>> inputLists;
  if (info_.rank == root) inputLists.push_back(inputs);
  c10d::ScatterOptions options;
  options.rootRank = root;
  return track(gloo().scatter(outputs, inputLists, options));
}

std::unique_ptr<InFlight> GlooCommunicator::send(at::Tensor& tensor, int peer) {
  std::vector<at::Tensor> tensors{tensor};
  return track(gloo().send(tensors, peer, /*tag=*/0), /*hasFuture=*/false);
}

std::unique_ptr<InFlight> GlooCommunicator::recv(at::Tensor& tensor, int peer) {
  std::vector<at::Tensor> tensors{tensor};
  return track(gloo().recv(tensors, peer, /*tag=*/0), /*hasFuture=*/false);
}

std::unique_ptr<InFlight> GlooCommunicator::barrier() { return track(gloo().barrier(c10d::BarrierOptions())); }

// Gloo ops never block each other at issue, so a batch is issued op by op and completes as a set.
void GlooCommunicator::beginBatch() {
  TORCH_CHECK(!batching_, "a coalescing batch is already open on communicator ", info_.key);
  batching_ = true;
}

std::unique_ptr<InFlight> GlooCommunicator::endBatch() {
  TORCH_CHECK(batching_, "endCoalescing without startCoalescing on communicator ", info_.key);
  batching_ = false;
  return std::make_unique<InFlightSet>(std::exchange(batch_, {}));
}

void GlooCommunicator::abort() {
  {
    std::lock_guard<std::mutex> lock(abortSignal_->mutex);
    abortSignal_->aborted = true;  // pending ops fail now
  }
  abortSignal_->changed.notify_all();
  if (!gloo_) return;
  // Gloo's abort and its teardown wait for an op blocked on a peer that may never answer; the
  // caller (the watchdog, shrink, reconfigure) must not, so they finish on their own thread.
  std::thread([gloo = std::move(gloo_)]() mutable {
    try {
      gloo->abort();
    } catch (...) {
      // abort must not throw; the communicator is unusable either way.
    }
    gloo.reset();
  }).detach();
}

}  // namespace nccl_migrate::backends
