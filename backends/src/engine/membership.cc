// Membership changes of a group: shrink (drop ranks, typically dead ones, and go on with the
// survivors) and reconfigure (re-form the group over the ranks whose handles are given). Both
// keep torch nccl2's preconditions and error texts, so fault-tolerance code written against
// torch's backend behaves the same on ours. Neither needs the excluded ranks: only survivors
// rendezvous, each time in a fresh namespace of the group's store.
#include <algorithm>
#include <set>
#include <thread>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "engine_internals.h"
#include "engine_work.h"
#include "nccl_migrate/backends/migrate_backend.h"

namespace nccl_migrate::backends {
namespace {

constexpr int kShrinkDefault = 0;  // NCCL_SHRINK_DEFAULT, dist.SHRINK_DEFAULT
constexpr int kShrinkAbort = 1;    // NCCL_SHRINK_ABORT, dist.SHRINK_ABORT

#if NCCL_MIGRATE_TORCH_HAS_RECONFIGURE
// The global rank a handle names: handles are "<backend>:<global rank>:<host>:<pid>:<n>".
uint64_t globalRankOf(const std::string& handle) {
  size_t first = handle.find(':');
  size_t second = first == std::string::npos ? first : handle.find(':', first + 1);
  TORCH_CHECK_VALUE(second != std::string::npos && second > first + 1,
                    "'", handle, "' is not a reconfigure handle of an nccl_migrate backend; get each member's ",
                    "handle with get_reconfigure_handle() on its own group");
  try {
    return std::stoull(handle.substr(first + 1, second - first - 1));
  } catch (const std::exception&) {
    TORCH_CHECK_VALUE(false, "'", handle, "' is not a reconfigure handle of an nccl_migrate backend");
  }
}

// Members in rank order: a list assigns ranks by position; for a set the backend chooses, and
// orders by global rank so that every member derives the same assignment.
std::vector<std::string> membersInRankOrder(const c10d::ReconfigureOptions& opts) {
  if (const auto* list = std::get_if<std::vector<c10d::ReconfigureHandle>>(&opts.handles)) return *list;
  const auto& set = std::get<std::unordered_set<c10d::ReconfigureHandle>>(opts.handles);
  std::vector<std::string> members(set.begin(), set.end());
  std::sort(members.begin(), members.end(), [](const std::string& a, const std::string& b) {
    return std::make_pair(globalRankOf(a), a) < std::make_pair(globalRankOf(b), b);
  });
  return members;
}
#endif  // NCCL_MIGRATE_TORCH_HAS_RECONFIGURE

}  // namespace

// The survivors meet through the group's store. When the process hosting it died (rank 0 of a
// job that rendezvoused with env:// or tcp://), no child can connect: say so before the parent
// is touched, instead of failing inside the child's connect with the socket's own words.
void MigrateBackend::requireReachableStore() const {
  try {
    store_->check({"nccl_migrate/shrink/reachable"});
  } catch (const std::exception& e) {
    C10_THROW_ERROR(DistStoreError,
                    "shrink of group '" + options_.groupName + "' needs the group's store to connect the survivors, "
                    "and the store cannot be reached (" + messageOf(std::current_exception()) +
                    "): the process hosting it is gone (with env:// or tcp:// rendezvous, rank 0 hosts it). Host the "
                    "store outside the ranks (torchrun's agent does) so a group can be shrunk after any rank's death, "
                    "or re-form the job with init_process_group on a new store.");
  }
}

c10::intrusive_ptr<c10d::Backend> MigrateBackend::shrink(const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
                                                         const c10::intrusive_ptr<c10d::Backend::Options>& optsOverride) {
  TORCH_CHECK_VALUE(!ranksToExclude.empty(), "ranks_to_exclude cannot be empty");
  TORCH_CHECK_VALUE(shrinkFlags == kShrinkDefault || shrinkFlags == kShrinkAbort, "Invalid NCCL shrink flags: ",
                    shrinkFlags, " (use 0, SHRINK_DEFAULT, or 1, SHRINK_ABORT)");
  std::set<int64_t> excluded;
  for (int64_t r : ranksToExclude) {
    TORCH_CHECK_VALUE(r >= 0 && r < size_, "Invalid rank ", r, " for shrink (group '", options_.groupName, "' has ",
                      size_, " ranks)");
    TORCH_CHECK_VALUE(excluded.insert(r).second, "Duplicate shrink rank ", r);
  }
  TORCH_CHECK_VALUE(static_cast<int>(excluded.size()) < size_, "Cannot exclude all ranks from an NCCL communicator");
  TORCH_CHECK(!excluded.count(rank_), "An excluded rank must not call ProcessGroupNCCL::shrink");
  if (batch_ && aborted_) {
    // A batch the job could not end: a member raised on the aborted group, and torch's
    // coalescing manager does not end a batch whose body raised. It can never launch: dropped.
    abandonBatch(std::make_exception_ptr(std::runtime_error("the group was aborted inside this batch")));
  }
  TORCH_CHECK(!batch_, "shrink inside a coalescing batch of group '", options_.groupName, "'; end the batch first");
  TORCH_CHECK(store_, "group '", options_.groupName, "' was destroyed; shrink a live group");
  requireReachableStore();

  if (shrinkFlags == kShrinkAbort) {
    abort();  // outstanding ops of the parent fail now; the parent is not used again
  } else {
    // The watchdog settles an op within one poll of its completion; give it that long before
    // calling an op pending.
    for (int polls = 0; unsettled_->load() > 0 && polls < 5; ++polls) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    int64_t pending = unsettled_->load();
    TORCH_CHECK(pending == 0, "NCCL communicator cannot shrink while work is pending (", pending, " op(s) of group '",
                options_.groupName, "' have not completed; wait for them, or pass SHRINK_ABORT to abort them)");
  }

  std::vector<int> survivors;
  for (int r = 0; r < size_; ++r) {
    if (!excluded.count(r)) survivors.push_back(r);
  }
  GroupOptions child = options_;
  child.groupName = options_.groupName + ":shrunk" + std::to_string(shrinkCount_);
  if (optsOverride) {
    if (!optsOverride->group_name.empty()) child.groupName = optsOverride->group_name;
    child.timeout = optsOverride->timeout;
  }
  child.globalRanks.clear();
  for (int r : survivors) child.globalRanks.push_back(options_.globalRanks.empty() ? r : options_.globalRanks.at(r));
  child.boundDevice = policy_->boundDevice();
  child.enableReconfigure = false;
  // Survivors reach shrink up to one timeout apart: one sees its dead peer's socket close at
  // once, another only when its watchdog's timeout passes. torch's shrink (ncclCommShrink) waits
  // for every survivor; ours waits twice the timeout, so a survivor still inside its timed-out
  // op is met, and one that never comes still fails the shrink.
  child.connectTimeoutOverride = 2 * child.timeout;
  auto store = c10::make_intrusive<c10d::PrefixStore>("nccl_migrate/shrink/" + std::to_string(shrinkCount_++), store_);
  int childRank = static_cast<int>(std::find(survivors.begin(), survivors.end(), rank_) - survivors.begin());
  // Like torch's shrink, the child connects at once (only survivors take part).
  return c10::make_intrusive<MigrateBackend>(store, childRank, static_cast<int>(survivors.size()), std::move(child),
                                             makePolicy_, makeFactory_, services_);
}

// A torch without the reconfigure API (2.11) also keeps rank_ and size_ const: compiled out there.
#if NCCL_MIGRATE_TORCH_HAS_RECONFIGURE
c10d::ReconfigureHandle MigrateBackend::get_reconfigure_handle() const {
  return backendName_ + ":" + std::to_string(globalRank()) + ":" + instanceTag_;
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::reconfigure(const c10d::ReconfigureOptions& opts) {
  std::vector<std::string> members = membersInRankOrder(opts);
  TORCH_CHECK_VALUE(!members.empty(), "reconfigure needs one handle per member; none were given");
  const std::string mine = get_reconfigure_handle();
  std::set<std::string> seen;
  std::vector<uint64_t> globalRanks;
  int newRank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    TORCH_CHECK_VALUE(seen.insert(members[i]).second, "handle '", members[i], "' is given to reconfigure twice");
    globalRanks.push_back(globalRankOf(members[i]));
    if (members[i] == mine) newRank = static_cast<int>(i);
  }
  TORCH_CHECK_VALUE(newRank >= 0, "this rank's handle '", mine, "' is not among the ", members.size(),
                    " handles given to reconfigure; every member passes the same handles, its own included");
  TORCH_CHECK_VALUE(!usedReconfigureUuids_.count(opts.uuid), "reconfigure uuid ", opts.uuid,
                    " was already used on group '", options_.groupName, "'; pass a fresh uuid every time");
  TORCH_CHECK(!batch_, "reconfigure inside a coalescing batch of group '", options_.groupName, "'");
  TORCH_CHECK(store_, "group '", options_.groupName, "' was destroyed; reconfigure a live group");
  usedReconfigureUuids_.insert(opts.uuid);

  // The current generation goes first: its pending ops fail instead of hanging on old peers,
  // and those failures, which settle from now on, are not reported (EngineWork::settle).
  {
    std::lock_guard<std::mutex> lock(generationMutex_);
    ++generation_;
  }
  dropCommunicators();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    rank_ = newRank;
    size_ = static_cast<int>(members.size());
    options_.globalRanks = globalRanks;
    aborted_ = false;
    awaitingReconfigure_ = false;
    error_ = static_cast<int>(c10d::ErrorType::SUCCESS);
  }
  policy_ = makePolicy_(rank_, size_);
  GroupOptions connect = options_;
  if (opts.timeout) connect.timeout = *opts.timeout;
  factory_ = makeFactory_(
      c10::make_intrusive<c10d::PrefixStore>("nccl_migrate/reconfigure/" + std::to_string(opts.uuid), store_), connect);
  registerWithFlightRecorder();
  try {
    connectEagerly();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    awaitingReconfigure_ = true;  // half-formed: only another reconfigure may use the group
    TORCH_CHECK(false, "reconfigure of group '", options_.groupName, "' (uuid ", opts.uuid, ", ", members.size(),
                " members) failed: ", e.what());
  }
  auto self = c10::intrusive_ptr<MigrateBackend>::reclaim_copy(this);
  return c10::make_intrusive<EngineWork>(
      rank_, EngineWork::Identity{c10d::OpType::UNKNOWN, 0, describeOp("reconfigure", 0), {}},
      std::make_unique<FinishedInFlight>(), std::vector<at::Tensor>{}, options_.timeout,
      c10::weak_intrusive_ptr<MigrateBackend>(self));
}
#endif  // NCCL_MIGRATE_TORCH_HAS_RECONFIGURE

}  // namespace nccl_migrate::backends
