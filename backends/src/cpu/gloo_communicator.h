// CPU communicator: one torch Gloo backend (its own context and connections) per communicator.
// Ops are forwarded to it; reductions Gloo lacks (AVG, PREMUL_SUM) are composed from SUM so the
// CPU path computes what NCCL computes, and host work that must follow an op (AVG's division,
// copies after a batch) runs before the op is seen done.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

struct AbortSignal;  // pending ops fail when the communicator is aborted

// The timeout to make a Gloo context with so that its full-mesh connect gives up within
// `connectBudget`: Gloo waits up to five times the context's timeout for a peer that posted its
// address and died before connecting (measured with torch 2.15's Gloo: 0.5 s gave 2.5 s, 2 s
// gave 10 s, 3 s gave 15 s). The caller then sets the group's timeout on the backend, which its
// collectives run under; its send and recv keep the connect's for waits given no timeout, so the
// communicator passes the group's to every wait.
std::chrono::milliseconds glooConnectContextTimeout(std::chrono::milliseconds connectBudget);

class GlooCommunicator final : public Communicator, public NativeListOps {
 public:
  // `opTimeout`: the group's timeout, which `gloo` was given after it connected.
  GlooCommunicator(CommunicatorInfo info, c10::intrusive_ptr<c10d::Backend> gloo, std::chrono::milliseconds opTimeout);
  ~GlooCommunicator() override;
  const CommunicatorInfo& info() const override { return info_; }

  std::unique_ptr<InFlight> allReduce(at::Tensor& tensor, const Reduction& reduction) override;
  std::unique_ptr<InFlight> broadcast(at::Tensor& tensor, int root) override;
  std::unique_ptr<InFlight> reduce(at::Tensor& tensor, int root, const Reduction& reduction) override;
  std::unique_ptr<InFlight> allGather(at::Tensor& output, at::Tensor& input) override;
  std::unique_ptr<InFlight> reduceScatter(at::Tensor& output, at::Tensor& input, const Reduction& reduction) override;
  std::unique_ptr<InFlight> allToAll(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& outputSplits,
                                     const std::vector<int64_t>& inputSplits) override;
  std::unique_ptr<InFlight> send(at::Tensor& tensor, int peer) override;
  std::unique_ptr<InFlight> recv(at::Tensor& tensor, int peer) override;
  void beginBatch() override;
  void copyAfterBatch(const at::Tensor& to, const at::Tensor& from) override;
  std::unique_ptr<InFlight> endBatch() override;
  void abort() override;

  NativeListOps* nativeListOps() override { return this; }
  std::unique_ptr<InFlight> gather(std::vector<at::Tensor>& outputs, at::Tensor& input, int root) override;
  std::unique_ptr<InFlight> scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) override;
  std::unique_ptr<InFlight> allToAll(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs) override;

 private:
  // The Gloo backend as an op's call uses it (see gloo_communicator.cc): the call's reference,
  // which an abort's teardown outlives.
  class InCall {
   public:
    InCall(c10::intrusive_ptr<c10d::Backend> gloo, std::shared_ptr<AbortSignal> signal);
    ~InCall();
    InCall(const InCall&) = delete;
    InCall& operator=(const InCall&) = delete;
    c10d::Backend* operator->() const { return gloo_.get(); }

   private:
    c10::intrusive_ptr<c10d::Backend> gloo_;
    std::shared_ptr<AbortSignal> signal_;
  };
  InCall gloo();
  // Wraps an issued Gloo op, with host work to follow it (`then`); inside a batch it joins the
  // batch.
  std::unique_ptr<InFlight> track(c10::intrusive_ptr<c10d::Work> work, bool hasFuture = true,
                                  std::function<void()> then = nullptr);
  // The reduction Gloo runs for `r`, premultiplying `input` for PREMUL_SUM.
  static c10d::ReduceOp glooOpFor(const Reduction& r, at::Tensor& input);
  // What follows the op for `r`: AVG's division of `result`; nothing for the others.
  std::function<void()> averaged(const Reduction& r, const at::Tensor& result) const;

  CommunicatorInfo info_;
  c10::intrusive_ptr<c10d::Backend> gloo_;
  bool batching_ = false;
  std::vector<std::unique_ptr<InFlight>> batch_;
  std::vector<std::function<void()>> afterBatch_;  // copyAfterBatch's copies, in order
  std::shared_ptr<AbortSignal> abortSignal_;
};

}  // namespace nccl_migrate::backends
