// Legacy (ProcessGroupNCCL) policy: communicators are created lazily, one per device the group
// is used on; a group eagerly connected to a device (device_id) gets that one up front.
// Non-batched send/recv get a 2-rank communicator per peer pair, as legacy torch does.
#include "nccl_migrate/backends/communicator_policy.h"
#include "policy_requests.h"

namespace nccl_migrate::backends {
namespace {

// Legacy futures complete in the communicator's stream order and leave the caller's stream alone.
CommunicatorRequest withLegacyFutures(CommunicatorRequest request) {
  request.futureOrder = FutureOrder::CommunicatorStream;
  return request;
}

class LegacyPolicy final : public CommunicatorPolicy {
 public:
  LegacyPolicy(int groupRank, int groupSize) : groupRank_(groupRank), groupSize_(groupSize) {}

  std::string backendName() const override { return "nccl"; }
  std::string policyName() const override { return "legacy"; }

  std::vector<CommunicatorRequest> atGroupCreation(std::optional<c10::Device> device) override {
    if (!device) return {};
    bound_ = device;
    return {withLegacyFutures(wholeGroupRequest(*device, groupRank_, groupSize_))};
  }

  CommunicatorRequest forCollective(c10::Device device) override {
    return withLegacyFutures(wholeGroupRequest(onBound(device), groupRank_, groupSize_));
  }

  CommunicatorRequest forPeer(c10::Device device, int peer) override {
    return withLegacyFutures(peerPairRequest(onBound(device), groupRank_, groupSize_, peer));
  }

  std::optional<c10::Device> boundDevice() const override { return bound_; }

 private:
  // The bound device, for an op on it (a CPU tensor names no index): one communicator, not two.
  c10::Device onBound(c10::Device device) const { return bound_ && isBoundDevice(*bound_, device) ? *bound_ : device; }

  int groupRank_;
  int groupSize_;
  std::optional<c10::Device> bound_;
};

}  // namespace

std::unique_ptr<CommunicatorPolicy> makeLegacyPolicy(int groupRank, int groupSize) {
  return std::make_unique<LegacyPolicy>(groupRank, groupSize);
}

}  // namespace nccl_migrate::backends
