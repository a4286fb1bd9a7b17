// defaultDeviceIndex: see group_device.h.
#include "nccl_migrate/shim/group_device.h"

#include <charconv>

namespace nccl_migrate::shim {

Outcome<std::optional<int>> defaultDeviceIndex(const std::optional<std::string>& localRank, int globalRank,
                                               int deviceCount) {
  if (deviceCount <= 0) return Outcome<std::optional<int>>::success(std::nullopt);
  int rank = globalRank;
  if (localRank) {
    const char* begin = localRank->data();
    const char* end = begin + localRank->size();
    auto [last, error] = std::from_chars(begin, end, rank);
    if (localRank->empty() || error != std::errc() || last != end || rank < 0) {
      return Outcome<std::optional<int>>::failure(
          "LOCAL_RANK='" + *localRank +
          "' is not a node-local rank (a non-negative integer): set it as torchrun does, or unset it to bind by the "
          "global rank");
    }
  }
  return Outcome<std::optional<int>>::success(rank % deviceCount);
}

}  // namespace nccl_migrate::shim
