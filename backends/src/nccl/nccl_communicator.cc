// NcclCommunicator: see nccl_communicator.h.
#include "nccl_communicator.h"

#include <chrono>
#include <cstring>

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

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
  std::vector<std::function<void()>> afterLaunch;
  bool captured = false;
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

ncclRedOp_t ncclOpOf(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ncclSum;
    case c10d::ReduceOp::PRODUCT: return ncclProd;
    case c10d::ReduceOp::MIN: return ncclMin;
    case c10d::ReduceOp::MAX: return ncclMax;
    case c10d::ReduceOp::AVG: return ncclAvg;
    default: TORCH_CHECK_VALUE(false, "reduce op ", static_cast<int>(op.op_), " has no NCCL equivalent");
  }
}

size_t countOf(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

// Allocations on the communicator's device; a CPU device index only names a simulated device.
at::TensorOptions onDevice(c10::Device device) {
  return at::TensorOptions().device(device.is_cpu() ? c10::Device(c10::kCPU) : device);
}

// The reduction an op runs. A PREMUL_SUM tensor factor stays on the device, converted in the
// caller's stream: reading it on the host would sync, and is illegal under graph capture.
struct Reduction {
  c10d::ReduceOp op;
  at::Tensor deviceFactor;  // on the device, read by NCCL when the op runs
  at::Tensor hostScalar;    // on the host, read by NCCL when the op is enqueued
};

Reduction reductionFor(const c10d::ReduceOp& op, const at::Tensor& like) {
  if (op != c10d::ReduceOp::PREMUL_SUM) return {op};
  auto supplement = c10::static_intrusive_pointer_cast<c10d::PreMulSumSupplement>(op.supplement_);
  TORCH_CHECK(supplement, "PREMUL_SUM needs a factor");
  if (supplement->tensor_factor.defined()) {
    return {op, supplement->tensor_factor.to(like.options()).reshape({})};
  }
  return {op, {}, at::full({}, supplement->double_factor, like.options().device(c10::kCPU))};
}

// Runs `issue` with the NCCL reduce op of `r`, creating a PREMUL_SUM op for the call and
// destroying it once the call is enqueued (NCCL allows that), also when the call throws.
void withNcclOp(nccl::NcclApi& api, ncclComm_t comm, const Reduction& r, ncclDataType_t type,
                const nccl::CallSite& site, const std::function<void(ncclRedOp_t)>& issue) {
  if (r.op != c10d::ReduceOp::PREMUL_SUM) return issue(ncclOpOf(r.op));
  ncclRedOp_t premul;
  if (r.deviceFactor.defined()) {
    nccl::check(api, api.redOpCreatePreMulSum(&premul, r.deviceFactor.data_ptr(), type, ncclScalarDevice, comm),
                "ncclRedOpCreatePreMulSum", site);
  } else {
    nccl::check(api, api.redOpCreatePreMulSum(&premul, r.hostScalar.data_ptr(), type, ncclScalarHostImmediate, comm),
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

char* bytesAt(const at::Tensor& t, size_t elements) {
  return static_cast<char*>(t.data_ptr()) + elements * t.element_size();
}

std::vector<at::Tensor> joined(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

NcclCommunicator::NcclCommunicator(CommunicatorInfo info, std::string groupName, FutureOrder futureOrder,
                                   NcclSeams seams, std::shared_ptr<nccl::CommHandle> handle, nccl::StreamRef stream)
    : info_(std::move(info)),
      groupName_(std::move(groupName)),
      futureOrder_(futureOrder),
      seams_(std::move(seams)),
      handle_(std::move(handle)),
      stream_(stream) {}

// Ops in flight keep the handle: the NCCL communicator is destroyed when the last of them is done.
NcclCommunicator::~NcclCommunicator() = default;

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(const c10::intrusive_ptr<c10d::Store>& store,
                                                           const std::string& storePrefix, CommunicatorInfo info,
                                                           const std::string& groupName, FutureOrder futureOrder,
                                                           const DeviceCommOptions& options, NcclSeams seams) {
  nccl::CallSite site{"communicator init", groupName, info.rank};
  nccl::NcclApi& api = *seams.api;
  TORCH_CHECK(info.device.is_cpu() || info.device.has_index(), "communicator ", info.key, " of group '", groupName,
              "' names no device index (", info.device.str(), "): bind the group with device_id or call "
              "torch.cuda.set_device first");
  auto current = seams.runtime->makeCurrent(info.device);
  TORCH_CHECK(!seams.runtime->capturing(seams.runtime->currentStream(info.device)), "group '", groupName,
              "' would create its communicator ", info.key, " during CUDA graph capture, which cannot run NCCL's "
              "init: run one op of the group (or create it eagerly) before capturing");
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
  nccl::check(api, api.commInitRankConfig(&comm, info.size, id, info.rank, &config), "ncclCommInitRankConfig", site);
  auto handle = std::make_shared<nccl::CommHandle>(seams.api, comm, groupName, info.rank, info.key,
                                                   /*nonblocking=*/config.blocking == 0, store->getTimeout());
  // ncclInProgress (nonblocking mode): no op may be issued before the communicator is ready.
  handle->waitUntilReady(store->getTimeout());
  std::optional<size_t> freeAfter = seams.runtime->freeMemory(info.device);
  info.creationTime = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
  // Process-wide difference: exact when nothing else allocates during init, as in a fresh group.
  if (freeBefore && freeAfter && *freeBefore >= *freeAfter) info.deviceMemoryBytes = *freeBefore - *freeAfter;
  info.implementation = "nccl";
  nccl::StreamRef stream = seams.runtime->newStream(info.device, options.highPriorityStream);
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(info), groupName, futureOrder,
                                                                std::move(seams), std::move(handle), stream));
}

std::unique_ptr<InFlight> NcclCommunicator::launch(Launch l) {
  nccl::DeviceRuntime& runtime = *seams_.runtime;
  auto current = runtime.makeCurrent(info_.device);
  nccl::StreamRef caller = runtime.currentStream(info_.device);
  bool captured = runtime.capturing(caller);
  // Every op, inside a batch too, waits for what the job queued before it: a batch's later ops
  // may read tensors the job wrote between them.
  auto ready = runtime.newEvent(info_.device);
  ready->record(caller);
  ready->block(stream_);
  handle_->use(l.op, [&](ncclComm_t comm) { l.issue(comm, stream_.forNccl()); });
  for (const at::Tensor& t : l.tensors) runtime.recordStream(t, stream_);
  if (batch_) {
    batch_->stash.insert(batch_->stash.end(), l.tensors.begin(), l.tensors.end());
    if (l.afterLaunch) batch_->afterLaunch.push_back(std::move(l.afterLaunch));
    batch_->captured = batch_->captured || captured;
    return nullptr;  // the batch's InFlight, from endBatch, covers this op
  }
  if (l.afterLaunch) l.afterLaunch();
  return finished(l.op, std::move(l.tensors), captured);
}

std::unique_ptr<InFlight> NcclCommunicator::finished(std::string_view op, std::vector<at::Tensor> stash,
                                                     bool captured) {
  auto end = seams_.runtime->newEvent(info_.device);
  end->record(stream_);
  return std::make_unique<NcclInFlight>(NcclInFlight::Parts{handle_, seams_.runtime, std::move(end), info_.device,
                                                            stream_, futureOrder_, std::move(stash), captured,
                                                            std::string(op)});
}

std::unique_ptr<InFlight> NcclCommunicator::allReduce(at::Tensor& tensor, const c10d::ReduceOp& op) {
  Reduction r = reductionFor(op, tensor);
  return launch({"allreduce", {tensor, r.deviceFactor}, [&, r](ncclComm_t c, cudaStream_t s) {
                   ncclDataType_t type = ncclTypeOf(tensor.scalar_type());
                   withNcclOp(*seams_.api, c, r, type, site("allreduce"), [&](ncclRedOp_t nop) {
                     nccl::check(*seams_.api,
                                 seams_.api->allReduce(tensor.data_ptr(), tensor.data_ptr(), countOf(tensor), type, nop,
                                                       c, s),
                                 "ncclAllReduce", site("allreduce"));
                   });
                 }});
}

std::unique_ptr<InFlight> NcclCommunicator::broadcast(at::Tensor& tensor, int root) {
  return launch({"broadcast", {tensor}, [&](ncclComm_t c, cudaStream_t s) {
                   nccl::check(*seams_.api,
                               seams_.api->broadcast(tensor.data_ptr(), tensor.data_ptr(), countOf(tensor),
                                                     ncclTypeOf(tensor.scalar_type()), root, c, s),
                               "ncclBroadcast", site("broadcast"));
                 }});
}

std::unique_ptr<InFlight> NcclCommunicator::reduce(at::Tensor& tensor, int root, const c10d::ReduceOp& op) {
  Reduction r = reductionFor(op, tensor);
  return launch({"reduce", {tensor, r.deviceFactor}, [&, r](ncclComm_t c, cudaStream_t s) {
                   ncclDataType_t type = ncclTypeOf(tensor.scalar_type());
                   withNcclOp(*seams_.api, c, r, type, site("reduce"), [&](ncclRedOp_t nop) {
                     nccl::check(*seams_.api,
                                 seams_.api->reduce(tensor.data_ptr(), tensor.data_ptr(), countOf(tensor), type, nop,
                                                    root, c, s),
                                 "ncclReduce", site("reduce"));
                   });
                 }});
}

std::unique_ptr<InFlight> NcclCommunicator::allGatherInto(at::Tensor& output, at::Tensor& input) {
  return launch({"allgather", {output, input}, [&](ncclComm_t c, cudaStream_t s) {
                   nccl::check(*seams_.api,
                               seams_.api->allGather(input.data_ptr(), output.data_ptr(), countOf(input),
                                                     ncclTypeOf(input.scalar_type()), c, s),
                               "ncclAllGather", site("allgather"));
                 }});
}

std::unique_ptr<InFlight> NcclCommunicator::allGather(std::vector<at::Tensor>& outputs, at::Tensor& input) {
  at::Tensor flat = at::empty({static_cast<int64_t>(countOf(input)) * info_.size}, input.options());
  // The copies out of the staging buffer follow the gather's launch: at the group's end in a batch.
  auto copyOut = [this, flat, outputs, n = input.numel()] {
    for (int i = 0; i < info_.size; ++i) {
      seams_.runtime->copy(outputs[i], flat.narrow(0, i * n, n).view(outputs[i].sizes()), stream_);
    }
  };
  return launch({"allgather", joined({flat, input}, outputs),
                 [&](ncclComm_t c, cudaStream_t s) {
                   nccl::check(*seams_.api,
                               seams_.api->allGather(input.data_ptr(), flat.data_ptr(), countOf(input),
                                                     ncclTypeOf(input.scalar_type()), c, s),
                               "ncclAllGather", site("allgather"));
                 },
                 copyOut});
}

std::unique_ptr<InFlight> NcclCommunicator::reduceScatterFrom(at::Tensor& output, at::Tensor& input,
                                                              const c10d::ReduceOp& op) {
  Reduction r = reductionFor(op, input);
  return launch({"reduce_scatter", {output, input, r.deviceFactor}, [&, r](ncclComm_t c, cudaStream_t s) {
                   ncclDataType_t type = ncclTypeOf(output.scalar_type());
                   withNcclOp(*seams_.api, c, r, type, site("reduce_scatter"), [&](ncclRedOp_t nop) {
                     nccl::check(*seams_.api,
                                 seams_.api->reduceScatter(input.data_ptr(), output.data_ptr(), countOf(output), type,
                                                           nop, c, s),
                                 "ncclReduceScatter", site("reduce_scatter"));
                   });
                 }});
}

std::unique_ptr<InFlight> NcclCommunicator::reduceScatter(at::Tensor& output, std::vector<at::Tensor>& inputs,
                                                          const c10d::ReduceOp& op) {
  // On the caller's stream, which the op then waits for; the op keeps the result alive.
  at::Tensor flat = at::cat(inputs).reshape(-1);
  at::Tensor out = output.reshape(-1);
  return reduceScatterFrom(out, flat, op);
}

std::unique_ptr<InFlight> NcclCommunicator::allToAllSingle(at::Tensor& output, at::Tensor& input,
                                                           const std::vector<int64_t>& outputSplits,
                                                           const std::vector<int64_t>& inputSplits) {
  SplitLayout in = layoutOf(input, inputSplits, info_.size), out = layoutOf(output, outputSplits, info_.size);
  return launch({"all_to_all", {output, input}, [&](ncclComm_t c, cudaStream_t s) {
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
                 }});
}

std::unique_ptr<InFlight> NcclCommunicator::allToAll(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs) {
  return launch({"all_to_all", joined(outputs, inputs), [&](ncclComm_t c, cudaStream_t s) {
                   nccl::NcclApi& api = *seams_.api;
                   nccl::GroupGuard group(api, site("all_to_all"));
                   for (int peer = 0; peer < info_.size; ++peer) {
                     nccl::check(api,
                                 api.send(inputs[peer].data_ptr(), countOf(inputs[peer]),
                                          ncclTypeOf(inputs[peer].scalar_type()), peer, c, s),
                                 "ncclSend", site("all_to_all"));
                     nccl::check(api,
                                 api.recv(outputs[peer].data_ptr(), countOf(outputs[peer]),
                                          ncclTypeOf(outputs[peer].scalar_type()), peer, c, s),
                                 "ncclRecv", site("all_to_all"));
                   }
                   group.end();
                 }});
}

std::unique_ptr<InFlight> NcclCommunicator::gather(std::vector<at::Tensor>& outputs, at::Tensor& input, int root) {
  bool isRoot = info_.rank == root;
  std::function<void()> keepOwn;
  if (isRoot) keepOwn = [this, own = outputs[root], input] { seams_.runtime->copy(own, input, stream_); };
  return launch({"gather", joined(outputs, {input}),
                 [&](ncclComm_t c, cudaStream_t s) {
                   nccl::NcclApi& api = *seams_.api;
                   ncclDataType_t type = ncclTypeOf(input.scalar_type());
                   nccl::GroupGuard group(api, site("gather"));
                   if (isRoot) {
                     for (int peer = 0; peer < info_.size; ++peer) {
                       if (peer == root) continue;
                       nccl::check(api, api.recv(outputs[peer].data_ptr(), countOf(outputs[peer]), type, peer, c, s),
                                   "ncclRecv", site("gather"));
                     }
                   } else {
                     nccl::check(api, api.send(input.data_ptr(), countOf(input), type, root, c, s), "ncclSend",
                                 site("gather"));
                   }
                   group.end();
                 },
                 keepOwn});
}

std::unique_ptr<InFlight> NcclCommunicator::scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) {
  bool isRoot = info_.rank == root;
  std::function<void()> keepOwn;
  if (isRoot) keepOwn = [this, output, own = inputs[root]] { seams_.runtime->copy(output, own, stream_); };
  return launch({"scatter", joined(inputs, {output}),
                 [&](ncclComm_t c, cudaStream_t s) {
                   nccl::NcclApi& api = *seams_.api;
                   ncclDataType_t type = ncclTypeOf(output.scalar_type());
                   nccl::GroupGuard group(api, site("scatter"));
                   if (isRoot) {
                     for (int peer = 0; peer < info_.size; ++peer) {
                       if (peer == root) continue;
                       nccl::check(api, api.send(inputs[peer].data_ptr(), countOf(inputs[peer]), type, peer, c, s),
                                   "ncclSend", site("scatter"));
                     }
                   } else {
                     nccl::check(api, api.recv(output.data_ptr(), countOf(output), type, root, c, s), "ncclRecv",
                                 site("scatter"));
                   }
                   group.end();
                 },
                 keepOwn});
}

std::unique_ptr<InFlight> NcclCommunicator::send(at::Tensor& tensor, int peer) {
  return launch({"send", {tensor}, [&](ncclComm_t c, cudaStream_t s) {
                   nccl::check(*seams_.api,
                               seams_.api->send(tensor.data_ptr(), countOf(tensor), ncclTypeOf(tensor.scalar_type()),
                                                peer, c, s),
                               "ncclSend", site("send"));
                 }});
}

std::unique_ptr<InFlight> NcclCommunicator::recv(at::Tensor& tensor, int peer) {
  return launch({"recv", {tensor}, [&](ncclComm_t c, cudaStream_t s) {
                   nccl::check(*seams_.api,
                               seams_.api->recv(tensor.data_ptr(), countOf(tensor), ncclTypeOf(tensor.scalar_type()),
                                                peer, c, s),
                               "ncclRecv", site("recv"));
                 }});
}

// An all-reduce of one element, as torch's NCCL backends do it; the op keeps the token alive.
std::unique_ptr<InFlight> NcclCommunicator::barrier() {
  auto current = seams_.runtime->makeCurrent(info_.device);
  at::Tensor token = at::zeros({1}, onDevice(info_.device).dtype(at::kFloat));
  return allReduce(token, c10d::ReduceOp(c10d::ReduceOp::SUM));
}

void NcclCommunicator::beginBatch() {
  TORCH_CHECK(!batch_, "a coalescing batch is already open on communicator ", info_.key);
  batch_ = std::make_unique<OpenBatch>(handle_, site("coalescing"));
}

std::unique_ptr<InFlight> NcclCommunicator::endBatch() {
  TORCH_CHECK(batch_, "endCoalescing without startCoalescing on communicator ", info_.key);
  auto current = seams_.runtime->makeCurrent(info_.device);
  std::unique_ptr<OpenBatch> batch = std::move(batch_);
  handle_->use("coalescing", [&](ncclComm_t) { batch->group->end(); });  // the batch launches here
  for (auto& copy : batch->afterLaunch) copy();
  return finished("coalescing", std::move(batch->stash), batch->captured);
}

void NcclCommunicator::abort() { handle_->abort(); }

}  // namespace nccl_migrate::backends
