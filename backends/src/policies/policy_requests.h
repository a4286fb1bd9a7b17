// Requests the policies share: the whole-group communicator on a device, and the 2-rank
// communicator of a peer pair.
#pragma once

#include <algorithm>
#include <numeric>

#include <c10/util/Exception.h>

#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

inline CommunicatorRequest wholeGroupRequest(c10::Device device, int groupRank, int groupSize) {
  CommunicatorRequest request;
  request.key = device.str();
  request.purpose = "collective";
  request.device = device;
  request.groupRanks.resize(groupSize);
  std::iota(request.groupRanks.begin(), request.groupRanks.end(), 0);
  request.myGroupRank = groupRank;
  return request;
}

// Both ranks of a pair compute the same key ("cuda:0/p2p:1:3"); the lower rank is rank 0.
inline CommunicatorRequest peerPairRequest(c10::Device device, int groupRank, int groupSize, int peer) {
  TORCH_CHECK_VALUE(peer >= 0 && peer < groupSize, "invalid peer rank ", peer, " (self=", groupRank, ", size=",
                    groupSize, ")");
  TORCH_CHECK_VALUE(peer != groupRank, "invalid peer rank ", peer, ": a rank cannot send to or receive from itself");
  int lo = std::min(groupRank, peer), hi = std::max(groupRank, peer);
  CommunicatorRequest request;
  request.key = device.str() + "/p2p:" + std::to_string(lo) + ":" + std::to_string(hi);
  request.purpose = "p2p";
  request.device = device;
  request.groupRanks = {lo, hi};
  request.myGroupRank = groupRank;
  return request;
}

}  // namespace nccl_migrate::backends
