// Rewritten (nccl2) policy: one communicator per group, bound to a single device; and its
// nccl-lazy variant, which adds lazy per-peer-pair communicators for non-batched send/recv.
#include <c10/util/Exception.h>

#include "nccl_migrate/backends/communicator_policy.h"
#include "policy_requests.h"

namespace nccl_migrate::backends {
namespace {

class RewrittenPolicy : public CommunicatorPolicy {
 public:
  RewrittenPolicy(int groupRank, int groupSize, bool lazyInit)
      : groupRank_(groupRank), groupSize_(groupSize), lazyInit_(lazyInit) {}

  std::string backendName() const override { return "nccl2"; }
  std::string policyName() const override { return "rewritten"; }

  std::vector<CommunicatorRequest> atGroupCreation(std::optional<c10::Device> device) override {
    if (!device) return {};
    if (bound_) checkBound(*device);  // torch connects every group again; it may not move
    bound_ = device;
    if (lazyInit_) return {};
    return {wholeGroupRequest(*bound_, groupRank_, groupSize_)};
  }

  CommunicatorRequest forCollective(c10::Device device) override {
    if (!bound_) bound_ = device;
    checkBound(device);
    return wholeGroupRequest(*bound_, groupRank_, groupSize_);
  }

  // Send/recv share the group's one communicator; the peer only has to exist.
  CommunicatorRequest forPeer(c10::Device device, int peer) override {
    TORCH_CHECK_VALUE(peer >= 0 && peer < groupSize_, "invalid peer rank ", peer, " (self=", groupRank_, ", size=",
                      groupSize_, ")");
    return forCollective(device);
  }

  std::optional<c10::Device> boundDevice() const override { return bound_; }

 protected:
  int groupRank_;
  int groupSize_;

 private:
  // torch's nccl2 wording, so users and their log scrapers see the same text.
  void checkBound(const c10::Device& device) const {
    TORCH_CHECK(isBoundDevice(*bound_, device), "ProcessGroupNCCL is bound to device ", bound_->str(),
                " but an operation was issued on ", device.str());
  }

  bool lazyInit_;
  std::optional<c10::Device> bound_;
};

class RewrittenLazyP2PPolicy final : public RewrittenPolicy {
 public:
  using RewrittenPolicy::RewrittenPolicy;

  std::string backendName() const override { return "nccl-lazy"; }
  std::string policyName() const override { return "rewritten-lazy-p2p"; }

  CommunicatorRequest forPeer(c10::Device device, int peer) override {
    // The device binding still applies, and the pair lives on the bound device.
    return peerPairRequest(forCollective(device).device, groupRank_, groupSize_, peer);
  }
};

}  // namespace

std::unique_ptr<CommunicatorPolicy> makeRewrittenPolicy(int groupRank, int groupSize, bool lazyInit) {
  return std::make_unique<RewrittenPolicy>(groupRank, groupSize, lazyInit);
}

std::unique_ptr<CommunicatorPolicy> makeRewrittenLazyP2PPolicy(int groupRank, int groupSize, bool lazyInit) {
  return std::make_unique<RewrittenLazyP2PPolicy>(groupRank, groupSize, lazyInit);
}

}  // namespace nccl_migrate::backends
