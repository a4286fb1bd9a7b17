// A communicator policy decides when communicators exist and which one an op runs on. Policies
// are pure logic over keys: the engine creates and caches what they name, so the engine never
// branches on which behaviour it implements.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

class CommunicatorPolicy {
 public:
  virtual ~CommunicatorPolicy() = default;

  // The name torch's backend of this behaviour reports (getBackendName): "nccl", "nccl2", ...
  virtual std::string backendName() const = 0;
  // Short policy name for introspection: "legacy", "rewritten", "rewritten-lazy-p2p".
  virtual std::string policyName() const = 0;

  // Communicators to create when the group is created (eager policies); empty for lazy ones.
  // `boundDevice` is the group's device when known at creation.
  virtual std::vector<CommunicatorRequest> atGroupCreation(std::optional<c10::Device> boundDevice) = 0;

  // The communicator a collective (or a batch of coalesced ops) on `device` runs on. Throws,
  // with torch's wording where torch has one, when the policy forbids the device.
  virtual CommunicatorRequest forCollective(c10::Device device) = 0;

  // The communicator a send or recv with group rank `peer`, outside a batch, runs on.
  virtual CommunicatorRequest forPeer(c10::Device device, int peer) = 0;

  // The device the group is bound to, once it is.
  virtual std::optional<c10::Device> boundDevice() const = 0;
};

// Legacy (ProcessGroupNCCL): lazy; one communicator per device the group is used on and one
// 2-rank communicator per peer pair for non-batched send/recv.
std::unique_ptr<CommunicatorPolicy> makeLegacyPolicy(int groupRank, int groupSize);

// Rewritten (nccl2): exactly one communicator, bound to one device, created eagerly when the
// device is known at group creation unless `lazyInit`; send/recv run on it too.
std::unique_ptr<CommunicatorPolicy> makeRewrittenPolicy(int groupRank, int groupSize, bool lazyInit);

// nccl-lazy: rewritten, plus a lazily created 2-rank communicator per peer pair for
// non-batched send/recv.
std::unique_ptr<CommunicatorPolicy> makeRewrittenLazyP2PPolicy(int groupRank, int groupSize, bool lazyInit);

}  // namespace nccl_migrate::backends
