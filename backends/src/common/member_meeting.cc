// meetMembers: see member_meeting.h.
#include "member_meeting.h"

#include <vector>

#include <c10/util/Exception.h>

namespace nccl_migrate::backends {

void meetMembers(c10d::Store& store, const std::string& prefix, const CommunicatorInfo& info,
                 const std::string& groupName, std::chrono::milliseconds timeout) {
  // The prefix is used once (the factory numbers every creation of a key), so keys left from
  // an earlier meeting are never mistaken for members arriving now.
  std::vector<std::string> keys;
  for (int r = 0; r < info.size; ++r) keys.push_back(prefix + "/member/" + std::to_string(r));
  try {
    store.set(keys.at(info.rank), std::vector<uint8_t>{1});
    store.wait(keys, timeout);
  } catch (const c10::Error&) {  // a wait that timed out (FileStore says so in a plain c10::Error), or a store
                                  // whose host is gone
    std::string missing;
    try {
      for (int r = 0; r < info.size; ++r) {
        int groupRank = r < static_cast<int>(info.groupRanks.size()) ? info.groupRanks[r] : r;
        if (!store.check({keys[r]})) missing += (missing.empty() ? "" : ", ") + std::to_string(groupRank);
      }
    } catch (const c10::Error& unreachable) {
      C10_THROW_ERROR(DistBackendError, "communicator " + info.key + " of group '" + groupName +
                                            "' could not meet its members: the group's store cannot be reached (" +
                                            unreachable.what_without_backtrace() + ")");
    }
    if (missing.empty()) return;  // the last of them came as the wait ran out: they all met
    C10_THROW_ERROR(DistBackendError, "communicator " + info.key + " of group '" + groupName + "': group rank(s) " +
                                          missing + " did not arrive within " + std::to_string(timeout.count()) +
                                          " ms to create it (dead, or not running this op)");
  }
}

}  // namespace nccl_migrate::backends
