// GlooCommunicator: ops are forwarded to torch's Gloo backend; its Work is our InFlight.
#include "gloo_communicator.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace nccl_migrate::backends {
namespace {

class GlooInFlight final : public InFlight {
 public:
  explicit GlooInFlight(c10::intrusive_ptr<c10d::Work> work) : work_(std::move(work)) {}
  bool isDone() override { return work_->isCompleted(); }
  void wait(std::chrono::milliseconds timeout) override { work_->wait(timeout); }
  void onDone(std::function<void(std::exception_ptr)> callback) override {
    work_->getFuture()->addCallback([callback = std::move(callback)](c10::ivalue::Future& future) {
      callback(future.hasError() ? future.exception_ptr() : nullptr);
    });
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
};

}  // namespace

GlooCommunicator::GlooCommunicator(CommunicatorInfo info, c10::intrusive_ptr<c10d::Backend> gloo)
    : info_(std::move(info)), gloo_(std::move(gloo)) {}

std::unique_ptr<InFlight> GlooCommunicator::allReduce(at::Tensor& tensor, const c10d::ReduceOp& op) {
  TORCH_CHECK(gloo_, "communicator ", info_.key, " was aborted");
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  return std::make_unique<GlooInFlight>(gloo_->allreduce(tensors, options));
}

void GlooCommunicator::abort() {
  if (!gloo_) return;
  gloo_->abort();
  gloo_.reset();
}

}  // namespace nccl_migrate::backends
