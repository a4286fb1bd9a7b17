// NcclCommunicator: see nccl_communicator.h.
#include "nccl_communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include <ATen/ops/full.h>
#include <c10/util/Exception.h>

#include "common/in_flight_sets.h"
#include "common/member_meeting.h"
#include "nccl_in_flight.h"

namespace nccl_migrate::backends {

struct NcclCommunicator::OpenBatch {
  OpenBatch(std::shared_ptr<nccl::CommHandle> h, const nccl::CallSite& site) : handle(std::move(h)) {
    group = std::make_unique<nccl::GroupGuard>(handle->api(), site);
    handle->groupOpened();
  }
  // An abandoned batch (an op of it threw, or the group was aborted) closes its NCCL group first;
  // only then may a deferred abort free the communicator.
  ~OpenBatch() {
    group.reset();
    handle->groupClosed();
  }
  std::shared_ptr<nccl::CommHandle> handle;
  std::unique_ptr<nccl::GroupGuard> group;
  // Tensors of every op of the batch, temporaries included: NCCL reads them at the group's
  // end, so they live until the batch's work completes, as torch stashes coalesced tensors.
  std::vector<at::Tensor> stash;
  // The streams the job issued the batch's ops from. NCCL launches a larger communicator's
  // grouped calls only at the group's end, so the communicator's stream waits for each of them
  // once, there: that covers what the job queued between the batch's ops too, and a batch that
  // launches nothing but copies. (A one-rank communicator's ops also wait when called.)
  std::vector<nccl::StreamRef> callers;
  // Copies out of staging buffers (copyAfterBatch), run once the group has launched.
  std::vector<std::function<void()>> afterLaunch;
  bool captured = false;
  // A meeting before a collective of a new shape failed, or a call lost its peer: the batch's later ops
  // are not issued, and the batch fails with this.
  std::exception_ptr failure;
  // Sends and receives over directions NCCL has not connected yet, held back until the batch's
  // end: there the members meet once for all of them, and only then are they issued, so that
  // ncclGroupEnd never connects to a peer that is not coming. Meeting as each is issued could
  // deadlock: in a ring, every rank's first send would wait for a peer still at its own.
  // Holding them back reorders nothing NCCL orders: a group's calls all launch at its end, and
  // once one is held every later one is (launch), so each pair's sends and receives keep their
  // order.
  struct HeldOp {
    std::string op;
    std::function<void(ncclComm_t, cudaStream_t)> issue;
  };
  std::vector<HeldOp> heldBack;
  std::vector<std::pair<int, int>> heldDirections;
  // The shapes of the batch's collectives, in the order issued (NcclCommunicator::endBatch).
  std::vector<std::string> collectiveShapes;
};

namespace {

ncclDataType_t ncclTypeOf(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    case at::kBool: return ncclUint8;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kFloat8_e4m3fn: return ncclFloat8e4m3;
    case at::kFloat8_e5m2: return ncclFloat8e5m2;
    default: TORCH_CHECK(false, "NCCL has no data type for ", type);
  }
}

ncclRedOp_t builtinOpOf(Reduction::Kind kind) {
  switch (kind) {
    case Reduction::Kind::Sum: return ncclSum;
    case Reduction::Kind::Product: return ncclProd;
    case Reduction::Kind::Min: return ncclMin;
    case Reduction::Kind::Max: return ncclMax;
    case Reduction::Kind::Avg: return ncclAvg;
    case Reduction::Kind::PreMulSum: break;
  }
  TORCH_CHECK(false, "PREMUL_SUM is not one of NCCL's built-in reduce ops");
}

size_t countOf(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

// The reduction's part of a collective's shape (NCCL picks an algorithm per reduce op too).
std::string shapeOf(const Reduction& r) { return "op" + std::to_string(static_cast<int>(r.kind)); }

// Runs `issue` with the NCCL reduce op of `r`, creating a PREMUL_SUM op for the call and
// destroying it once the call is enqueued (NCCL allows that), also when the call throws. A
// tensor factor is read by NCCL on the device when the op runs; a scalar one at creation.
void withNcclOp(nccl::NcclApi& api, ncclComm_t comm, const Reduction& r, at::ScalarType type,
                const nccl::CallSite& site, const std::function<void(ncclRedOp_t)>& issue) {
  if (r.kind != Reduction::Kind::PreMulSum) return issue(builtinOpOf(r.kind));
  ncclRedOp_t premul;
  if (r.tensorFactor.defined()) {
    nccl::check(api, api.redOpCreatePreMulSum(&premul, r.tensorFactor.data_ptr(), ncclTypeOf(type), ncclScalarDevice,
                                              comm),
                "ncclRedOpCreatePreMulSum", site);
  } else {
    at::Tensor host = at::full({}, r.scalarFactor.value(), at::TensorOptions().dtype(type));
    nccl::check(api,
                api.redOpCreatePreMulSum(&premul, host.data_ptr(), ncclTypeOf(type), ncclScalarHostImmediate, comm),
                "ncclRedOpCreatePreMulSum", site);
  }
  struct Destroy {
    nccl::NcclApi& api;
    ncclRedOp_t op;
    ncclComm_t comm;
    ~Destroy() { (void)api.redOpDestroy(op, comm); }
  } destroy{api, premul, comm};
  issue(premul);
}

// Offsets and counts, in elements, of a split along the first dimension.
struct SplitLayout {
  std::vector<size_t> offsets, counts;
};

SplitLayout layoutOf(const at::Tensor& t, const std::vector<int64_t>& splits, int parts) {
  size_t rowElems = t.dim() == 0 || t.size(0) == 0 ? 0 : countOf(t) / static_cast<size_t>(t.size(0));
  SplitLayout layout;
  size_t offset = 0;
  for (int i = 0; i < parts; ++i) {
    size_t rows = splits.empty() ? static_cast<size_t>(t.dim() ? t.size(0) / parts : 0) : static_cast<size_t>(splits[i]);
    layout.offsets.push_back(offset);
    layout.counts.push_back(rows * rowElems);
    offset += rows * rowElems;
  }
  return layout;
}

// An NCCL call that fails with ncclSystemError or ncclRemoteError lost a peer: a socket to it
// failed, or the remote rank did (nccl.h's descriptions of the two; a connect on first use to a
// peer that died after the members met ends so). In nonblocking mode, a launch still
// ncclInProgress when the group's timeout ran out (CommHandle::use) waits on a peer that never
// connects. Such an op fails through its work, as any op a peer's failure ends (hooks, dump,
// the group aborted: which frees NCCL's launch). Other results are errors of the call itself,
// and stay exceptions of the call (the group goes on).
std::exception_ptr peerFailureOf(const nccl::NcclError& e) {
  if (e.result() != ncclSystemError && e.result() != ncclRemoteError && e.result() != ncclInProgress) return nullptr;
  try {
    C10_THROW_ERROR(DistBackendError, e.what());
  } catch (...) {
    return std::current_exception();
  }
}

char* bytesAt(const at::Tensor& t, size_t elements) {
  return static_cast<char*>(t.data_ptr()) + elements * t.element_size();
}

}  // namespace

NcclCommunicator::NcclCommunicator(CommunicatorInfo info, std::string groupName, FutureOrder futureOrder,
                                   NcclSeams seams, std::shared_ptr<nccl::CommHandle> handle, nccl::StreamRef stream,
                                   MeetingPlace meetingPlace)
    : info_(std::move(info)),
      groupName_(std::move(groupName)),
      futureOrder_(futureOrder),
      seams_(std::move(seams)),
      handle_(std::move(handle)),
      stream_(stream),
      meetingPlace_(std::move(meetingPlace)) {}

// Ops in flight keep the handle: the NCCL communicator is destroyed when the last of them is done.
NcclCommunicator::~NcclCommunicator() = default;

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(const c10::intrusive_ptr<c10d::Store>& store,
                                                           const std::string& storePrefix, CommunicatorInfo info,
                                                           const std::string& groupName, FutureOrder futureOrder,
                                                           const DeviceCommOptions& options, NcclSeams seams,
                                                           std::chrono::milliseconds timeout) {
  nccl::CallSite site{"communicator init", groupName, info.rank};
  nccl::NcclApi& api = *seams.api;
  TORCH_CHECK(info.device.is_cpu() || info.device.has_index(), "communicator ", info.key, " of group '", groupName,
              "' names no device index (", info.device.str(), "): bind the group with device_id or call "
              "torch.cuda.set_device first");
  auto current = seams.runtime->makeCurrent(info.device);
  TORCH_CHECK(!seams.runtime->capturing(seams.runtime->currentStream(info.device)), "group '", groupName,
              "' would create its communicator ", info.key, " during CUDA graph capture, which cannot run NCCL's "
              "init: run one op of the group (or create it eagerly) before capturing");
  meetMembers(store, storePrefix, info, groupName, timeout);
  ncclUniqueId id;
  std::string key = storePrefix + "/nccl_unique_id";
  if (info.rank == 0) {
    nccl::check(api, api.getUniqueId(&id), "ncclGetUniqueId", site);
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    store->set(key, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
  } else {
    std::vector<uint8_t> bytes = store->get(key);
    TORCH_CHECK(bytes.size() == sizeof(id), "store key ", key, " holds ", bytes.size(), " bytes, not an NCCL unique id");
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  auto started = std::chrono::steady_clock::now();
  std::optional<size_t> freeBefore = seams.runtime->freeMemory(info.device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  std::string commName = groupName + ":" + info.key;
  config.commName = commName.c_str();
  if (options.blocking) config.blocking = *options.blocking;
  if (options.maxCtas) config.maxCTAs = *options.maxCtas;
  if (options.minCtas) config.minCTAs = *options.minCtas;
  if (options.cgaClusterSize) config.cgaClusterSize = *options.cgaClusterSize;
  if (options.splitShare) config.splitShare = *options.splitShare;
  ncclComm_t comm = nullptr;
  std::shared_ptr<nccl::CommHandle> handle;
  try {
    // The mode is the one NCCL chose, told by its answer: NCCL applies NCCL_COMM_BLOCKING over
    // this config (envConfigOverride, src/init.cc 1647 / 1998) from wherever it read it (the
    // environment, its config files, an environment plugin; once per process: src/misc/param.cc).
    ncclResult_t made = api.commInitRankConfig(&comm, info.size, id, info.rank, &config);
    if (made != ncclInProgress) nccl::check(api, made, "ncclCommInitRankConfig", site);
    handle = std::make_shared<nccl::CommHandle>(seams.api, comm, groupName, info.rank, info.key,
                                                /*nonblocking=*/made == ncclInProgress, timeout);
    // No op may be issued before the communicator is ready; NCCL says when (in blocking mode, at once).
    handle->waitUntilReady(timeout);
  } catch (const nccl::NcclError& e) {
    // What init made is aborted, never destroyed (ncclCommDestroy would wait on the failed init).
    if (handle) {
      handle->abort();
    } else if (comm) {
      (void)api.commAbort(comm);
    }
    // The members met, so a system or remote error, or a nonblocking init that never became
    // ready, is a member that died or became unreachable since: a peer's failure, which the
    // engine reports as the failure of the op that needed the communicator.
    if (e.result() == ncclSystemError || e.result() == ncclRemoteError || e.result() == ncclInProgress) {
      C10_THROW_ERROR(DistBackendError, e.what());
    }
    throw;
  }
  std::optional<size_t> freeAfter = seams.runtime->freeMemory(info.device);
  info.creationTime = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
  // Process-wide difference: exact when nothing else allocates during init, as in a fresh group.
  if (freeBefore && freeAfter && *freeBefore >= *freeAfter) info.deviceMemoryBytes = *freeBefore - *freeAfter;
  info.implementation = "nccl";
  nccl::StreamRef stream = seams.runtime->newStream(info.device, options.highPriorityStream);
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(info), groupName, futureOrder,
                                                                std::move(seams), std::move(handle), stream,
                                                                MeetingPlace{store, storePrefix, timeout}));
}

std::unique_ptr<InFlight> NcclCommunicator::launch(Launch l) {
  // NCCL connects when an op first needs it, in the call that launches it (outside a batch: this
  // op's own), and waits there for its peers: they meet first, so that a peer that never comes
  // fails the op within the group's timeout, through a work like any failed op (hooks, dump,
  // the group aborted), instead of blocking this thread in NCCL before any work exists. In a
  // batch a collective of a new shape meets when issued: every member issues its collectives in
  // the same order, so waiting there cannot deadlock, as waiting for a p2p peer could.
  if (!batch_) {
    if (std::exception_ptr failed = meetBeforeConnecting(l.connects)) return std::make_unique<FinishedInFlight>(failed);
  } else if (!batch_->failure && !l.connects.collectiveShape.empty()) {
    batch_->failure = meetBeforeConnecting(Connections{l.connects.collectiveShape, {}});
  }
  if (batch_ && batch_->failure) return nullptr;  // the batch fails as a whole, at its end
  // Once one send or receive of a batch is held back, every later one is too: NCCL matches a
  // pair's sends and receives in the order they were issued, and an op over connected directions
  // issued now would overtake a held one over the same pair (an all_to_all spans many pairs).
  bool holdBack = batch_ && !l.connects.directions.empty() &&
                  (!batch_->heldBack.empty() || connectsNewDirections(l.connects));
  nccl::DeviceRuntime& runtime = *seams_.runtime;
  auto current = runtime.makeCurrent(info_.device);
  nccl::StreamRef caller = runtime.currentStream(info_.device);
  bool captured = runtime.capturing(caller);
  // Every op waits for what the job queued before it. Inside a batch NCCL launches a larger
  // communicator's calls at the group's end, where the batch waits for its callers; a one-rank
  // communicator's collective launches when it is called (launchesWhenCalled), so it waits now.
  if (!batch_ || launchesWhenCalled()) waitFor(caller);
  if (batch_) noteBatchCaller(caller);
  if (holdBack) {
    batch_->heldBack.push_back({std::string(l.op), l.issue});
    for (const auto& direction : l.connects.directions) {
      auto& held = batch_->heldDirections;
      if (std::find(held.begin(), held.end(), direction) == held.end()) held.push_back(direction);
    }
  } else {
    try {
      handle_->use(l.op, [&](ncclComm_t comm) { l.issue(comm, stream_.forNccl()); });
    } catch (const nccl::NcclError& e) {
      std::exception_ptr lost = peerFailureOf(e);
      if (!lost) throw;
      // In nonblocking mode NCCL's launch may still put kernels on the stream that use these
      // tensors: they stay until the communicator is freed.
      handle_->keepUntilFreed(std::make_shared<std::vector<at::Tensor>>(l.tensors));
      if (!batch_) return std::make_unique<FinishedInFlight>(lost);
      batch_->failure = lost;  // the batch's later ops are not issued; it fails at its end
      return nullptr;
    }
  }
  for (const at::Tensor& t : l.tensors) runtime.recordStream(t, stream_);
  if (batch_) {
    if (!l.connects.collectiveShape.empty()) batch_->collectiveShapes.push_back(l.connects.collectiveShape);
    batch_->stash.insert(batch_->stash.end(), l.tensors.begin(), l.tensors.end());
    batch_->captured = batch_->captured || captured;
    return nullptr;  // the batch's InFlight, from endBatch, covers this op
  }
  return finished(l.op, std::move(l.tensors), captured);
}

// NCCL connects a collective algorithm's channels the first time a launch uses that algorithm
// when it connects at run time (comm->runtimeConn = cuMemSupport && NCCL_RUNTIME_CONNECT, default
// 1: src/init.cc 57, 1269 / 61, 1552; ncclPrepareTasks marks comm->initAlgoChannels[algorithm],
// src/enqueue.cc 453-462 / 495-505, and groupLaunch runs ncclCollPreconnect, src/group.cc 144-199),
// so a later collective that picks another algorithm (ring, tree, PAT, NVLS, CollNet) connects
// again. A p2p direction connects the first time a send or receive uses it, whatever that
// setting (p2pTaskAppend in src/enqueue.cc marks connectSend / connectRecv, and groupLaunch runs
// ncclTransportP2pSetup). Both exchange with the peers through the bootstrap network, on the
// launching thread in blocking mode (v2.28.9 and v2.30.7). NCCL picks the algorithm from the
// collective's kind, reduction, element type and bytes (getAlgoInfo, with the communicator's
// topology), which the toolkit cannot foresee: so the members meet before the first collective
// of each shape (collectiveConnections), which covers the algorithm NCCL picks for it. The
// meetings are bounded: at most kMostCollectiveMeetings per communicator. Past the cap, and for
// a collective whose algorithm changes within its shape's byte bucket, NCCL's connect runs with
// no meeting before it: in nonblocking mode the group's timeout bounds it (the launch waits for
// NCCL within it, CommHandle::use, and an abort by the watchdog ends it sooner; the op fails as
// one that lost its peer), in blocking mode nothing bounds it, and a peer that never comes
// leaves the caller inside NCCL. Their store keys stay: a member cannot know
// that every other member has read a place's verdict without one more store write by each of
// them on the op's path, and a member whose caller stopped waiting for the store comes back to
// the met try when it issues that shape again, so deleting a place could strand it there; the
// cap bounds them instead, to kMostCollectiveMeetings places of one key per member and a
// verdict each (more only for tries a failed op left). Connecting everything at init
// instead (NCCL_RUNTIME_CONNECT=0) is a process-wide parameter, read once, that no ncclConfig_t
// field carries in 2.28.9 or 2.30.7: it would change torch's own communicators in the process
// too. A one-rank communicator connects nothing. The meeting waits for every member (a ring or
// tree connect waits for its neighbours only; waiting for all is stricter, and a collective
// needs them all anyway) and for the peer of each new direction.
std::exception_ptr NcclCommunicator::meetBeforeConnecting(const Connections& needs) {
  if (info_.size == 1) return nullptr;
  backends::Meeting meeting{communicatorNamed(info_, groupName_), "", {}, groupRankOf(info_, info_.rank)};
  std::vector<std::pair<int, int>> newDirections;
  std::string connect = meetingPlace_.prefix + "/connect/";
  bool collective = !needs.collectiveShape.empty() && !collectiveShapesMet_.count(needs.collectiveShape) &&
                    collectiveShapesMet_.size() < kMostCollectiveMeetings;
  if (collective) {
    meeting.purpose = "to connect it for its first collective of this shape (" + needs.collectiveShape + ")";
    meeting.places.push_back(backends::everyMemberAt(connect + "collectives/" + needs.collectiveShape, info_));
  }
  for (const auto& direction : needs.directions) {
    auto [from, to] = direction;
    if (from == to || directionsConnected_.count(direction)) continue;
    newDirections.push_back(direction);
    int peer = from == info_.rank ? to : from;
    meeting.places.push_back(backends::MeetingPlace{
        connect + "p2p/" + std::to_string(from) + "-" + std::to_string(to), std::to_string(info_.rank),
        {{std::to_string(peer), groupRankOf(info_, peer)}}});
  }
  if (meeting.places.empty()) return nullptr;
  if (!collective) meeting.purpose = "to connect it for their first send or receive between them";
  try {
    // The group's abort (a failure elsewhere, the watchdog) ends the wait: the op could not run.
    meet(meetingPlace_.store, std::move(meeting), meetingPlace_.timeout, [handle = handle_] { return handle->aborted(); });
  } catch (const std::exception&) {
    return std::current_exception();
  }
  if (collective) collectiveShapesMet_.insert(needs.collectiveShape);
  directionsConnected_.insert(newDirections.begin(), newDirections.end());
  return nullptr;
}

bool NcclCommunicator::connectsNewDirections(const Connections& needs) const {
  if (info_.size == 1) return false;
  return std::any_of(needs.directions.begin(), needs.directions.end(), [&](const std::pair<int, int>& direction) {
    return direction.first != direction.second && !directionsConnected_.count(direction);
  });
}

// NCCL picks a collective's algorithm in getAlgoInfo (src/enqueue.cc 1918, v2.28.9) from the
// collective's kind, its reduction and element type (which decide whether CollNet and NVLS may
// serve it: getCollNetSupport, nvlsSupport in ncclPrepareTasks, 382-384) and its bytes: the
// element size times ncclFuncMaxSendRecvCount (the count times the ranks for all_gather and
// reduce_scatter), whose estimated time per algorithm and protocol (ncclTopoGetAlgoTime,
// src/graph/tuning.cc 584: a latency plus bytes over a bandwidth) picks the fastest. The rest is
// fixed per communicator (topology, channels) or outside the toolkit's view: a tuner plugin,
// registered buffers or graph registration under capture (regBuff), the collectives grouped with
// it (numPipeOps). The bytes enter as ceil(log2(bytes)): NCCL's choice changes at byte thresholds,
// so sizes between two powers of two mostly pick one algorithm, and a job of many sizes meets
// once per power of two instead of once per size.
NcclCommunicator::Connections NcclCommunicator::collectiveConnections(std::string_view op, const at::Tensor& count,
                                                                      std::string_view reduction) const {
  if (count.numel() == 0) return {};
  bool perRank = op == "allgather" || op == "reduce_scatter";
  uint64_t bytes = static_cast<uint64_t>(count.numel()) * count.element_size() * (perRank ? info_.size : 1);
  int bucket = bytes <= 1 ? 0 : 64 - __builtin_clzll(bytes - 1);  // ceil(log2(bytes))
  return Connections{std::string(op) + ":" + c10::toString(count.scalar_type()) + ":2^" + std::to_string(bucket) +
                         (reduction.empty() ? "" : ":" + std::string(reduction)),
                     {}};
}

// NCCL's taskAppend issues a one-rank collective at once (ncclLaunchOneRank: a copy, a scaling
// kernel or nothing), group or not (src/enqueue.cc, v2.28.9 and v2.30.7). Its sends and receives
// still wait for the group's end; waiting early for them too costs one event and orders nothing
// wrongly, so the rule is by size alone.
bool NcclCommunicator::launchesWhenCalled() const { return info_.size == 1; }

void NcclCommunicator::waitFor(const nccl::StreamRef& caller) {
  auto ready = seams_.runtime->newEvent(info_.device);
  ready->record(caller);
  ready->block(stream_);
}

void NcclCommunicator::noteBatchCaller(const nccl::StreamRef& caller) {
  auto& callers = batch_->callers;
  if (std::find(callers.begin(), callers.end(), caller) == callers.end()) callers.push_back(caller);
}

std::unique_ptr<InFlight> NcclCommunicator::finished(std::string_view op, std::vector<at::Tensor> stash,
                                                     bool captured) {
  auto end = seams_.runtime->newEvent(info_.device);
  end->record(stream_);
  return std::make_unique<NcclInFlight>(NcclInFlight::Parts{handle_, seams_.runtime, std::move(end), info_.device,
                                                            stream_, futureOrder_, std::move(stash), captured,
                                                            std::string(op)});
}

std::unique_ptr<InFlight> NcclCommunicator::allReduce(at::Tensor& tensor, const Reduction& reduction) {
  return launch({"allreduce", {tensor, reduction.tensorFactor}, [&](ncclComm_t c, cudaStream_t s) {
                   withNcclOp(*seams_.api, c, reduction, tensor.scalar_type(), site("allreduce"), [&](ncclRedOp_t op) {
                     nccl::check(*seams_.api,
                                 seams_.api->allReduce(tensor.data_ptr(), tensor.data_ptr(), countOf(tensor),
                                                       ncclTypeOf(tensor.scalar_type()), op, c, s),
                                 "ncclAllReduce", site("allreduce"));
                   });
                 }, collectiveConnections("allreduce", tensor, shapeOf(reduction))});
}

std::unique_ptr<InFlight> NcclCommunicator::broadcast(at::Tensor& tensor, int root) {
  return launch({"broadcast", {tensor}, [&](ncclComm_t c, cudaStream_t s) {
                   nccl::check(*seams_.api,
                               seams_.api->broadcast(tensor.data_ptr(), tensor.data_ptr(), countOf(tensor),
                                                     ncclTypeOf(tensor.scalar_type()), root, c, s),
                               "ncclBroadcast", site("broadcast"));
                 }, collectiveConnections("broadcast", tensor)});
}

std::unique_ptr<InFlight> NcclCommunicator::reduce(at::Tensor& tensor, int root, const Reduction& reduction) {
  return launch({"reduce", {tensor, reduction.tensorFactor}, [&](ncclComm_t c, cudaStream_t s) {
                   withNcclOp(*seams_.api, c, reduction, tensor.scalar_type(), site("reduce"), [&](ncclRedOp_t op) {
                     nccl::check(*seams_.api,
                                 seams_.api->reduce(tensor.data_ptr(), tensor.data_ptr(), countOf(tensor),
                                                    ncclTypeOf(tensor.scalar_type()), op, root, c, s),
                                 "ncclReduce", site("reduce"));
                   });
                 }, collectiveConnections("reduce", tensor, shapeOf(reduction))});
}

std::unique_ptr<InFlight> NcclCommunicator::allGather(at::Tensor& output, at::Tensor& input) {
  return launch({"allgather", {output, input}, [&](ncclComm_t c, cudaStream_t s) {
                   nccl::check(*seams_.api,
                               seams_.api->allGather(input.data_ptr(), output.data_ptr(), countOf(input),
                                                     ncclTypeOf(input.scalar_type()), c, s),
                               "ncclAllGather", site("allgather"));
                 }, collectiveConnections("allgather", input)});
}

std::unique_ptr<InFlight> NcclCommunicator::reduceScatter(at::Tensor& output, at::Tensor& input,
                                                          const Reduction& reduction) {
  return launch({"reduce_scatter", {output, input, reduction.tensorFactor}, [&](ncclComm_t c, cudaStream_t s) {
                   withNcclOp(*seams_.api, c, reduction, output.scalar_type(), site("reduce_scatter"),
                              [&](ncclRedOp_t op) {
                                nccl::check(*seams_.api,
                                            seams_.api->reduceScatter(input.data_ptr(), output.data_ptr(),
                                                                      countOf(output), ncclTypeOf(output.scalar_type()),
                                                                      op, c, s),
                                            "ncclReduceScatter", site("reduce_scatter"));
                              });
                 }, collectiveConnections("reduce_scatter", output, shapeOf(reduction))});
}

std::unique_ptr<InFlight> NcclCommunicator::allToAll(at::Tensor& output, at::Tensor& input,
                                                     const std::vector<int64_t>& outputSplits,
                                                     const std::vector<int64_t>& inputSplits) {
  SplitLayout in = layoutOf(input, inputSplits, info_.size), out = layoutOf(output, outputSplits, info_.size);
  Connections connects;
  for (int peer = 0; peer < info_.size; ++peer) {
    if (in.counts[peer]) connects.directions.emplace_back(info_.rank, peer);
    if (out.counts[peer]) connects.directions.emplace_back(peer, info_.rank);
  }
  // By value: in a batch the call may be held back until the batch's end (OpenBatch::heldBack).
  return launch({"all_to_all", {output, input}, [this, in, out, input, output](ncclComm_t c, cudaStream_t s) {
                   nccl::NcclApi& api = *seams_.api;
                   ncclDataType_t type = ncclTypeOf(input.scalar_type());
                   nccl::GroupGuard group(api, site("all_to_all"));
                   for (int peer = 0; peer < info_.size; ++peer) {
                     if (in.counts[peer]) {
                       nccl::check(api, api.send(bytesAt(input, in.offsets[peer]), in.counts[peer], type, peer, c, s),
                                   "ncclSend", site("all_to_all"));
                     }
                     if (out.counts[peer]) {
                       nccl::check(api, api.recv(bytesAt(output, out.offsets[peer]), out.counts[peer], type, peer, c, s),
                                   "ncclRecv", site("all_to_all"));
                     }
                   }
                   group.end();
                 }, connects});
}

std::unique_ptr<InFlight> NcclCommunicator::send(at::Tensor& tensor, int peer) {
  return launch({"send", {tensor}, [this, tensor, peer](ncclComm_t c, cudaStream_t s) {  // by value: see allToAll
                   nccl::check(*seams_.api,
                               seams_.api->send(tensor.data_ptr(), countOf(tensor), ncclTypeOf(tensor.scalar_type()),
                                                peer, c, s),
                               "ncclSend", site("send"));
                 }, Connections{"", {{info_.rank, peer}}}});
}

std::unique_ptr<InFlight> NcclCommunicator::recv(at::Tensor& tensor, int peer) {
  return launch({"recv", {tensor}, [this, tensor, peer](ncclComm_t c, cudaStream_t s) {  // by value: see allToAll
                   nccl::check(*seams_.api,
                               seams_.api->recv(tensor.data_ptr(), countOf(tensor), ncclTypeOf(tensor.scalar_type()),
                                                peer, c, s),
                               "ncclRecv", site("recv"));
                 }, Connections{"", {{peer, info_.rank}}}});
}

void NcclCommunicator::beginBatch() {
  TORCH_CHECK(!batch_, "a coalescing batch is already open on communicator ", info_.key);
  batch_ = std::make_unique<OpenBatch>(handle_, site("coalescing"));
}

// On the communicator's stream once the batch's group has launched, so the copy reads what the
// batch's ops wrote; both tensors live until the batch's InFlight is done.
void NcclCommunicator::copyAfterBatch(const at::Tensor& to, const at::Tensor& from) {
  TORCH_CHECK(batch_, "copyAfterBatch outside a batch on communicator ", info_.key);
  auto current = seams_.runtime->makeCurrent(info_.device);
  noteBatchCaller(seams_.runtime->currentStream(info_.device));  // it may read what the job wrote
  batch_->stash.insert(batch_->stash.end(), {to, from});
  batch_->afterLaunch.push_back([this, to, from] {
    seams_.runtime->copy(to, from, stream_);
    seams_.runtime->recordStream(to, stream_);
    seams_.runtime->recordStream(from, stream_);
  });
}

std::unique_ptr<InFlight> NcclCommunicator::endBatch() {
  TORCH_CHECK(batch_, "endCoalescing without startCoalescing on communicator ", info_.key);
  auto current = seams_.runtime->makeCurrent(info_.device);
  std::unique_ptr<OpenBatch> batch = std::move(batch_);
  // The held-back sends and receives meet here: a peer that never comes fails the batch within
  // the timeout, and they are never issued.
  std::exception_ptr failure = batch->failure;
  // So do batches of several collectives: NCCL picks one algorithm for the collectives of a
  // group that share a kind, reduction and type, from their bytes together (ncclPrepareTasks,
  // getAlgoInfo on the aggregate, src/enqueue.cc 399 / v2.28.9), which may be one none of them
  // picks alone: the batch's shape is the sequence of its collectives' shapes.
  // (An aborted communicator meets no one: its calls below fail at once.)
  // Named by a 64-bit FNV-1a hash of the joined shapes, which every member computes alike
  // whatever its build (std::hash promises that only within one run of one program) and which
  // keeps the store key short however long the batch.
  std::string batchShape;
  if (batch->collectiveShapes.size() > 1) {
    uint64_t hash = 14695981039346656037ULL;  // FNV-1a's 64-bit offset basis and prime
    for (const auto& shape : batch->collectiveShapes) {
      for (unsigned char c : shape + ";") hash = (hash ^ c) * 1099511628211ULL;
    }
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
    batchShape = "batch" + std::to_string(batch->collectiveShapes.size()) + ":" + hex;
  }
  if (!failure && (!batch->heldBack.empty() || !batchShape.empty()) && !handle_->aborted()) {
    failure = meetBeforeConnecting(Connections{batchShape, batch->heldDirections});
  }
  // Whatever was issued launches as the group closes, failed batch or not (an NCCL group must
  // end, and peers may wait for its ops): after the job's writes, as a batch that succeeded.
  try {
    if (!failure) {
      for (const auto& held : batch->heldBack) {
        handle_->use(held.op, [&](ncclComm_t comm) { held.issue(comm, stream_.forNccl()); });
      }
    }
    for (const nccl::StreamRef& caller : batch->callers) waitFor(caller);
    handle_->use("coalescing", [&](ncclComm_t) { batch->group->end(); });  // the batch launches here
  } catch (const nccl::NcclError& e) {
    std::exception_ptr lost = peerFailureOf(e);
    if (!lost) throw;
    if (!failure) failure = lost;
  } catch (const c10::DistBackendError&) {
    // The group was aborted under the batch (the watchdog saw a failure on another thread):
    // a batch that had already failed fails with its own failure, which the abort's refusal
    // would hide, and through its work as any failed batch.
    if (!failure) throw;
  }
  if (failure) {
    // A failed batch's launched part may run until the group is aborted (in nonblocking mode
    // NCCL's launch may even start it later): its tensors stay until the communicator is freed.
    handle_->keepUntilFreed(std::make_shared<std::vector<at::Tensor>>(std::move(batch->stash)));
    return std::make_unique<FinishedInFlight>(failure);
  }
  for (auto& copy : batch->afterLaunch) copy();
  return finished("coalescing", std::move(batch->stash), batch->captured);
}

void NcclCommunicator::abort() { handle_->abort(); }

}  // namespace nccl_migrate::backends
