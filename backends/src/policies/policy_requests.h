// Requests the policies share: the whole-group communicator on a device, and the 2-rank
// communicator of a peer pair.
#pragma once

#include <algorithm>
#include <numeric>

#include <c10/util/Exception.h>

#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

// Whether an op's device is the group's device. A CPU tensor's device carries no index, so it
// is the CPU device a world was bound to with device_id=cpu:N.
inline bool isBoundDevice(const c10::Device& bound, const c10::Device& device) {
  return bound.type() == device.type() && (!bound.has_index() || !device.has_index() || bound.index() == device.index());
}

inline CommunicatorRequest wholeGroupRequest(c10::Device device, int groupRank, int groupSize) {
  CommunicatorRequest request;
  request.key = device.str();
  request.rendezvousKey = "collective";
  request.purpose = "collective";
  request.device = device;
  request.groupRanks.resize(groupSize);
  std::iota(request.groupRanks.begin(), request.groupRanks.end(), 0);
  request.myGroupRank = groupRank;
  return request;
}

// Both ranks of a pair compute the same rendezvous key ("p2p:1:3", whatever devices they are
// on); the lower rank is rank 0.
inline CommunicatorRequest peerPairRequest(c10::Device device, int groupRank, int groupSize, int peer) {
  TORCH_CHECK_VALUE(peer >= 0 && peer < groupSize, "invalid peer rank ", peer, " (self=", groupRank, ", size=",
                    groupSize, ")");
  TORCH_CHECK_VALUE(peer != groupRank, "invalid peer rank ", peer, ": a rank cannot send to or receive from itself");
  int lo = std::min(groupRank, peer), hi = std::max(groupRank, peer);
  CommunicatorRequest request;
  request.rendezvousKey = "p2p:" + std::to_string(lo) + ":" + std::to_string(hi);
  request.key = device.str() + "/" + request.rendezvousKey;
  request.purpose = "p2p";
  request.device = device;
  request.groupRanks = {lo, hi};
  request.myGroupRank = groupRank;
  return request;
}

}  // namespace nccl_migrate::backends
