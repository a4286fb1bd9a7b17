// The simulated-device suites' shared helpers: see sim_backend.h.
#include "sim_backend.h"

#include <cstring>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace nccl_migrate::sim {
namespace {

std::string toText(const at::Tensor& t) {
  std::ostringstream out;
  out << t.to(at::kDouble).reshape(-1);
  return out.str();
}

}  // namespace

c10::Device simDevice(int rank) { return c10::Device(c10::kCPU, static_cast<c10::DeviceIndex>(rank)); }

backends::PolicyMaker legacy() {
  return [](int rank, int size) { return backends::makeLegacyPolicy(rank, size); };
}
backends::PolicyMaker rewritten(bool lazyInit) {
  return [lazyInit](int rank, int size) { return backends::makeRewrittenPolicy(rank, size, lazyInit); };
}
backends::PolicyMaker rewrittenLazyP2P() {
  return [](int rank, int size) { return backends::makeRewrittenLazyP2PPolicy(rank, size, false); };
}

c10::intrusive_ptr<backends::MigrateBackend> simBackend(RankContext& ctx, const backends::PolicyMaker& policy,
                                                        std::chrono::milliseconds timeout, Faults faults,
                                                        backends::DeviceCommOptions comms,
                                                        std::shared_ptr<backends::EngineServices> services,
                                                        c10::intrusive_ptr<c10d::Store> transfers) {
  backends::GroupOptions options{"0", "default_pg", timeout, {}, simDevice(ctx.rank)};
  options.deviceComms = comms;
  backends::applyNcclEnvironment(options);  // as every creation path does
  auto seams = simulatedSeams(transfers ? transfers : ctx.store, faults);
  backends::FactoryMaker factory = [seams](const c10::intrusive_ptr<c10d::Store>& store,
                                           const backends::GroupOptions& o) {
    return backends::makeCommunicatorFactory(store, nullptr, o.groupName, o.connectTimeout(), seams, c10::kCPU,
                                             o.deviceComms);
  };
  return c10::make_intrusive<backends::MigrateBackend>(ctx.store, ctx.rank, ctx.size, options, policy, factory,
                                                       std::move(services));
}

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

void expectEqual(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  if (!at::equal(actual.to(at::kDouble), expected.to(at::kDouble))) {
    throw std::runtime_error(what + ": got " + toText(actual) + ", expected " + toText(expected));
  }
}

c10d::AllreduceOptions allreduceWith(c10d::ReduceOp op) {
  c10d::AllreduceOptions o;
  o.reduceOp = op;
  return o;
}

ncclUniqueId sharedUniqueId(RankContext& ctx, backends::nccl::NcclApi& api) {
  ncclUniqueId id;
  if (ctx.rank == 0) {
    check(api.getUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    ctx.store->set("unique id", std::vector<uint8_t>(bytes, bytes + sizeof(id)));
  } else {
    std::vector<uint8_t> bytes = ctx.store->get("unique id");
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  return id;
}

}  // namespace nccl_migrate::sim
