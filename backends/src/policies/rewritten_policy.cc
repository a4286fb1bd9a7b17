// Rewritten (nccl2) policy: one communicator per group, bound to a single device.
#include <c10/util/Exception.h>

#include "nccl_migrate/backends/communicator_policy.h"
#include "policy_requests.h"

namespace nccl_migrate::backends {
namespace {

class RewrittenPolicy final : public CommunicatorPolicy {
 public:
  RewrittenPolicy(int groupRank, int groupSize, bool lazyInit)
      : groupRank_(groupRank), groupSize_(groupSize), lazyInit_(lazyInit) {}

  std::string backendName() const override { return "nccl2"; }

  std::vector<CommunicatorRequest> atGroupCreation(std::optional<c10::Device> device) override {
    if (!device) return {};
    bound_ = device;
    if (lazyInit_) return {};
    return {wholeGroupRequest(*bound_, groupRank_, groupSize_)};
  }

  CommunicatorRequest forCollective(c10::Device device) override {
    if (!bound_) bound_ = device;
    // torch's nccl2 wording, so users and their log scrapers see the same text.
    TORCH_CHECK(*bound_ == device, "ProcessGroupNCCL is bound to device ", bound_->str(),
                " but an operation was issued on ", device.str());
    return wholeGroupRequest(*bound_, groupRank_, groupSize_);
  }

  std::optional<c10::Device> boundDevice() const override { return bound_; }

 private:
  int groupRank_;
  int groupSize_;
  bool lazyInit_;
  std::optional<c10::Device> bound_;
};

}  // namespace

std::unique_ptr<CommunicatorPolicy> makeRewrittenPolicy(int groupRank, int groupSize, bool lazyInit) {
  return std::make_unique<RewrittenPolicy>(groupRank, groupSize, lazyInit);
}

}  // namespace nccl_migrate::backends
