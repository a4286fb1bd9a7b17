// Requests the policies share: the whole-group communicator on one device.
#pragma once

#include <numeric>

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

}  // namespace nccl_migrate::backends
