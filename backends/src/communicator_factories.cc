// The per-group factory: NCCL communicators for the devices the NCCL seams serve (CUDA in
// production), Gloo communicators through torch's Gloo for the CPU.
#include "nccl_migrate/backends/communicator_factories.h"

#include <algorithm>
#include <map>

#include <c10/util/Exception.h>

#include "common/member_meeting.h"
#include "cpu/gloo_communicator.h"
#if NCCL_MIGRATE_HAVE_NCCL
#include "nccl/nccl_communicator.h"
#else
namespace nccl_migrate::backends {
struct NcclSeams {};
}  // namespace nccl_migrate::backends
#endif

namespace nccl_migrate::backends {
namespace {

class DeviceCommunicatorFactory final : public CommunicatorFactory {
 public:
  DeviceCommunicatorFactory(c10::intrusive_ptr<c10d::Store> store, GlooBackendMaker makeGloo, std::string groupName,
                            std::chrono::milliseconds timeout, std::shared_ptr<const NcclSeams> seams,
                            c10::DeviceType seamsDevice, DeviceCommOptions deviceOptions)
      : store_(std::move(store)),
        makeGloo_(std::move(makeGloo)),
        groupName_(std::move(groupName)),
        timeout_(timeout),
        seams_(std::move(seams)),
        seamsDevice_(seamsDevice),
        deviceOptions_(deviceOptions) {}

  std::unique_ptr<Communicator> create(const CommunicatorRequest& request) override {
    CommunicatorInfo info = describe(request);
    // Every member names the same rendezvous, whatever its device; a key created again (after
    // abort or shutdown) gets a fresh namespace.
    std::string prefix =
        "nccl_migrate/" + request.rendezvousKey + "/" + std::to_string(generation_[request.rendezvousKey]++);
    if (seams_ && request.device.type() == seamsDevice_) return ncclCommunicator(prefix, std::move(info), request);
    if (request.device.is_cpu()) return glooCommunicator(prefix, std::move(info));
    TORCH_CHECK(request.device.is_cuda(), "nccl_migrate backends run on cpu and cuda devices, not ",
                request.device.str());
    TORCH_CHECK(false, "this nccl_migrate build has no NCCL: rebuild with the CUDA toolkit and torch's NCCL wheel");
  }

 private:
  std::unique_ptr<Communicator> glooCommunicator(const std::string& prefix, CommunicatorInfo info) {
    TORCH_CHECK(makeGloo_, "no Gloo maker: CPU communicators are created through the nccl_migrate Python package");
    auto started = std::chrono::steady_clock::now();
    meetMembers(store_, prefix, info, groupName_, timeout_);  // Gloo's connect would fail in its own words
#if NCCL_MIGRATE_TORCH_HAS_GLOO_SET_TIMEOUT
    // Gloo bounds its connect by five times its context's timeout (a peer that posted its address
    // and died is waited for that long), so the context is made with a fifth of the budget and
    // then given the group's timeout, which its collectives run under.
    auto gloo = makeGloo_(store_, prefix, info.rank, info.size, glooConnectContextTimeout(timeout_));
    gloo->setTimeout(timeout_);
#else
    auto gloo = makeGloo_(store_, prefix, info.rank, info.size, timeout_);  // its timeout stays as made
#endif
    // Gloo's connect returns on each member once its own pairs answered, perhaps while a peer still
    // reads the last handshake; a member that then tears down at once (a job that creates its
    // group and destroys it) cuts that peer's connect short ("Connection closed by peer"). NCCL's
    // init returns on every member together, so a creation ends when every member has connected.
    meetMembers(store_, prefix + "/connected", info, groupName_, timeout_);
    info.creationTime = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
    info.implementation = "gloo";
    return std::make_unique<GlooCommunicator>(std::move(info), std::move(gloo), timeout_);
  }

  std::unique_ptr<Communicator> ncclCommunicator(const std::string& prefix, CommunicatorInfo info,
                                                 const CommunicatorRequest& request) {
#if NCCL_MIGRATE_HAVE_NCCL
    return NcclCommunicator::create(store_, prefix, std::move(info), groupName_, request.futureOrder, deviceOptions_,
                                    *seams_, timeout_);
#else
    (void)prefix, (void)info, (void)request;
    TORCH_CHECK(false, "this nccl_migrate build has no NCCL");
#endif
  }

  CommunicatorInfo describe(const CommunicatorRequest& request) const {
    CommunicatorInfo info;
    info.key = request.key;
    info.purpose = request.purpose;
    info.device = request.device;
    info.groupRanks = request.groupRanks;
    auto me = std::find(request.groupRanks.begin(), request.groupRanks.end(), request.myGroupRank);
    TORCH_CHECK(me != request.groupRanks.end(), "rank ", request.myGroupRank, " is not a member of communicator ", request.key);
    info.rank = static_cast<int>(me - request.groupRanks.begin());
    info.size = static_cast<int>(request.groupRanks.size());
    info.createdAt = std::chrono::system_clock::now();
    return info;
  }

  c10::intrusive_ptr<c10d::Store> store_;
  GlooBackendMaker makeGloo_;
  std::string groupName_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<const NcclSeams> seams_;
  c10::DeviceType seamsDevice_;
  DeviceCommOptions deviceOptions_;
  std::map<std::string, int> generation_;
};

std::shared_ptr<const NcclSeams> productionSeams() {
#if NCCL_MIGRATE_HAVE_NCCL
  static auto seams = std::make_shared<const NcclSeams>(NcclSeams{nccl::libraryNcclApi(), nccl::cudaRuntime()});
  return seams;
#else
  return nullptr;
#endif
}

}  // namespace

std::shared_ptr<CommunicatorFactory> makeCommunicatorFactory(c10::intrusive_ptr<c10d::Store> store,
                                                             GlooBackendMaker makeGloo, std::string groupName,
                                                             std::chrono::milliseconds timeout,
                                                             DeviceCommOptions deviceOptions) {
  return makeCommunicatorFactory(std::move(store), std::move(makeGloo), std::move(groupName), timeout,
                                 productionSeams(), c10::kCUDA, deviceOptions);
}

std::shared_ptr<CommunicatorFactory> makeCommunicatorFactory(c10::intrusive_ptr<c10d::Store> store,
                                                             GlooBackendMaker makeGloo, std::string groupName,
                                                             std::chrono::milliseconds timeout,
                                                             std::shared_ptr<const NcclSeams> seams,
                                                             c10::DeviceType seamsDevice,
                                                             DeviceCommOptions deviceOptions) {
  return std::make_shared<DeviceCommunicatorFactory>(std::move(store), std::move(makeGloo), std::move(groupName),
                                                     timeout, std::move(seams), seamsDevice, deviceOptions);
}

bool ncclCompiled() { return NCCL_MIGRATE_HAVE_NCCL != 0; }

std::string ncclBuildVersion() {
#if NCCL_MIGRATE_HAVE_NCCL
  return nccl::versionString(NCCL_VERSION_CODE);
#else
  return "";
#endif
}

}  // namespace nccl_migrate::backends
