// NcclCommunicator: see nccl_communicator.h.
#include "nccl_communicator.h"

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

namespace nccl_migrate::backends {

struct NcclCommunicator::BatchDone {
  std::shared_ptr<at::cuda::CUDAEvent> event;  // set by endBatch
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

// Completion of an op on the communicator's stream, observed through a CUDA event.
class NcclInFlight final : public InFlight {
 public:
  NcclInFlight(std::shared_ptr<at::cuda::CUDAEvent> done, c10::Device device, ncclComm_t comm, nccl::CallSite site)
      : done_(std::move(done)), device_(device), comm_(comm), site_(site) {}

  bool isDone() override { return done_->query(); }

  std::exception_ptr failure() override {
    try {
      nccl::check(nccl::asyncError(comm_, site_), "NCCL asynchronous error", site_);
    } catch (...) {
      return std::current_exception();
    }
    return nullptr;
  }

  // Makes the caller's stream wait for the op (torch's stream semantics), then watches the host
  // side until the op finished, NCCL reported an error, or the timeout passed.
  void wait(std::chrono::milliseconds timeout) override {
    c10::cuda::CUDAGuard guard(device_);
    done_->block(c10::cuda::getCurrentCUDAStream(device_.index()));
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done_->query()) {
      nccl::check(nccl::asyncError(comm_, site_), "NCCL asynchronous error", site_);
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("timed out after " + std::to_string(timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  // CUDA results are ready in stream order: once the caller's stream waits on the op, a
  // device-aware future records its own events on that stream.
  void onDone(std::function<void(std::exception_ptr)> callback) override {
    c10::cuda::CUDAGuard guard(device_);
    done_->block(c10::cuda::getCurrentCUDAStream(device_.index()));
    callback(nullptr);
  }

 private:
  std::shared_ptr<at::cuda::CUDAEvent> done_;
  c10::Device device_;
  ncclComm_t comm_;
  nccl::CallSite site_;
};

class BatchMemberInFlight final : public InFlight {
 public:
  explicit BatchMemberInFlight(std::shared_ptr<NcclCommunicator::BatchDone> batch) : batch_(std::move(batch)) {}
  bool isDone() override { return batch_->event && batch_->event->query(); }
  std::exception_ptr failure() override { return nullptr; }
  void wait(std::chrono::milliseconds) override {
    TORCH_CHECK(false, "an op inside a coalescing batch completes with the batch: wait on endCoalescing's work");
  }
  void onDone(std::function<void(std::exception_ptr)>) override {}

 private:
  std::shared_ptr<NcclCommunicator::BatchDone> batch_;
};

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

}  // namespace

NcclCommunicator::NcclCommunicator(CommunicatorInfo info, std::string groupName, ncclComm_t comm,
                                   c10::cuda::CUDAStream stream)
    : info_(std::move(info)), groupName_(std::move(groupName)), comm_(comm), stream_(stream) {}

NcclCommunicator::~NcclCommunicator() { nccl::destroyQuietly(comm_); }

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(const c10::intrusive_ptr<c10d::Store>& store,
                                                           const std::string& storePrefix, CommunicatorInfo info,
                                                           const std::string& groupName) {
  nccl::CallSite site{"communicator init", groupName, info.rank};
  c10::cuda::CUDAGuard guard(info.device);
  ncclUniqueId id;
  std::string key = storePrefix + "/nccl_unique_id";
  if (info.rank == 0) {
    id = nccl::newUniqueId(site);
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    store->set(key, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
  } else {
    std::vector<uint8_t> bytes = store->get(key);
    TORCH_CHECK(bytes.size() == sizeof(id), "store key ", key, " holds ", bytes.size(), " bytes, not an NCCL unique id");
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  auto started = std::chrono::steady_clock::now();
  size_t freeBefore = nccl::freeDeviceMemory(site);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  std::string commName = groupName + ":" + info.key;
  config.commName = commName.c_str();
  ncclComm_t comm = nccl::initRank(info.size, id, info.rank, config, site);
  size_t freeAfter = nccl::freeDeviceMemory(site);
  info.creationTime = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
  // Process-wide difference: exact when nothing else allocates during init, as in a fresh group.
  if (freeBefore >= freeAfter) info.deviceMemoryBytes = freeBefore - freeAfter;
  info.implementation = "nccl";
  auto stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, info.device.index());
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(info), groupName, comm, stream));
}

ncclComm_t NcclCommunicator::comm(std::string_view op) const {
  TORCH_CHECK(comm_, op, " on communicator ", info_.key, " of group '", groupName_, "': the communicator was aborted");
  return comm_;
}

void NcclCommunicator::orderAfterCaller() {
  at::cuda::CUDAEvent ready;
  ready.record(c10::cuda::getCurrentCUDAStream(info_.device.index()));
  ready.block(stream_);
}

std::unique_ptr<InFlight> NcclCommunicator::launch(std::string_view op, const std::vector<at::Tensor>& keepAlive,
                                                   const std::function<void(ncclComm_t, cudaStream_t)>& issue) {
  ncclComm_t handle = comm(op);
  c10::cuda::CUDAGuard guard(info_.device);
  if (!batch_) orderAfterCaller();
  issue(handle, stream_.stream());
  for (const at::Tensor& t : keepAlive) {
    if (t.defined() && t.is_cuda()) c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream_);
  }
  if (batch_) return std::make_unique<BatchMemberInFlight>(batch_);
  auto done = std::make_shared<at::cuda::CUDAEvent>();
  done->record(stream_);
  return std::make_unique<NcclInFlight>(done, info_.device, handle, site(op));
}

void NcclCommunicator::withNcclOp(const c10d::ReduceOp& op, const at::Tensor& like,
                                  const std::function<void(ncclRedOp_t)>& issue) {
  if (op != c10d::ReduceOp::PREMUL_SUM) return issue(ncclOpOf(op));
  auto supplement = c10::static_intrusive_pointer_cast<c10d::PreMulSumSupplement>(op.supplement_);
  TORCH_CHECK(supplement, "PREMUL_SUM needs a factor");
  double factor = supplement->tensor_factor.defined() ? supplement->tensor_factor.item<double>() : supplement->double_factor;
  // The scalar has the tensor's own type, on the host, read when the op is enqueued.
  at::Tensor scalar = at::full({}, factor, like.options().device(at::kCPU));
  ncclRedOp_t premul = nccl::createPreMulSum(scalar.data_ptr(), ncclTypeOf(like.scalar_type()), comm("allreduce"),
                                             site("allreduce"));
  try {
    issue(premul);
  } catch (...) {
    nccl::destroyRedOpQuietly(premul, comm_);
    throw;
  }
  nccl::destroyRedOpQuietly(premul, comm_);  // allowed once the last call using it is enqueued
}

std::unique_ptr<InFlight> NcclCommunicator::allReduce(at::Tensor& tensor, const c10d::ReduceOp& op) {
  return launch("allreduce", {tensor}, [&](ncclComm_t c, cudaStream_t s) {
    withNcclOp(op, tensor, [&](ncclRedOp_t r) {
      nccl::allReduce(tensor.data_ptr(), tensor.data_ptr(), countOf(tensor), ncclTypeOf(tensor.scalar_type()), r, c, s,
                      site("allreduce"));
    });
  });
}

std::unique_ptr<InFlight> NcclCommunicator::broadcast(at::Tensor& tensor, int root) {
  return launch("broadcast", {tensor}, [&](ncclComm_t c, cudaStream_t s) {
    nccl::broadcast(tensor.data_ptr(), countOf(tensor), ncclTypeOf(tensor.scalar_type()), root, c, s, site("broadcast"));
  });
}

std::unique_ptr<InFlight> NcclCommunicator::reduce(at::Tensor& tensor, int root, const c10d::ReduceOp& op) {
  return launch("reduce", {tensor}, [&](ncclComm_t c, cudaStream_t s) {
    withNcclOp(op, tensor, [&](ncclRedOp_t r) {
      nccl::reduce(tensor.data_ptr(), countOf(tensor), ncclTypeOf(tensor.scalar_type()), r, root, c, s, site("reduce"));
    });
  });
}

std::unique_ptr<InFlight> NcclCommunicator::allGatherInto(at::Tensor& output, at::Tensor& input) {
  return launch("allgather", {output, input}, [&](ncclComm_t c, cudaStream_t s) {
    nccl::allGather(input.data_ptr(), output.data_ptr(), countOf(input), ncclTypeOf(input.scalar_type()), c, s,
                    site("allgather"));
  });
}

std::unique_ptr<InFlight> NcclCommunicator::allGather(std::vector<at::Tensor>& outputs, at::Tensor& input) {
  at::Tensor flat = at::empty({static_cast<int64_t>(countOf(input)) * info_.size}, input.options());
  std::vector<at::Tensor> keep{flat, input};
  keep.insert(keep.end(), outputs.begin(), outputs.end());
  return launch("allgather", keep, [&](ncclComm_t c, cudaStream_t s) {
    nccl::allGather(input.data_ptr(), flat.data_ptr(), countOf(input), ncclTypeOf(input.scalar_type()), c, s,
                    site("allgather"));
    c10::cuda::CUDAStreamGuard onCommStream(stream_);
    for (int i = 0; i < info_.size; ++i) {
      outputs[i].copy_(flat.narrow(0, i * input.numel(), input.numel()).view(outputs[i].sizes()), /*non_blocking=*/true);
    }
  });
}

std::unique_ptr<InFlight> NcclCommunicator::reduceScatterFrom(at::Tensor& output, at::Tensor& input,
                                                              const c10d::ReduceOp& op) {
  return launch("reduce_scatter", {output, input}, [&](ncclComm_t c, cudaStream_t s) {
    withNcclOp(op, input, [&](ncclRedOp_t r) {
      nccl::reduceScatter(input.data_ptr(), output.data_ptr(), countOf(output), ncclTypeOf(output.scalar_type()), r, c, s,
                          site("reduce_scatter"));
    });
  });
}

std::unique_ptr<InFlight> NcclCommunicator::reduceScatter(at::Tensor& output, std::vector<at::Tensor>& inputs,
                                                          const c10d::ReduceOp& op) {
  at::Tensor flat = at::cat(inputs).reshape(-1);  // on the caller's stream, before the op is ordered after it
  at::Tensor out = output.reshape(-1);
  return reduceScatterFrom(out, flat, op);
}

std::unique_ptr<InFlight> NcclCommunicator::allToAllSingle(at::Tensor& output, at::Tensor& input,
                                                           const std::vector<int64_t>& outputSplits,
                                                           const std::vector<int64_t>& inputSplits) {
  SplitLayout in = layoutOf(input, inputSplits, info_.size), out = layoutOf(output, outputSplits, info_.size);
  return launch("all_to_all", {output, input}, [&](ncclComm_t c, cudaStream_t s) {
    ncclDataType_t type = ncclTypeOf(input.scalar_type());
    nccl::groupStart(site("all_to_all"));
    for (int peer = 0; peer < info_.size; ++peer) {
      if (in.counts[peer]) nccl::send(bytesAt(input, in.offsets[peer]), in.counts[peer], type, peer, c, s, site("all_to_all"));
      if (out.counts[peer]) nccl::recv(bytesAt(output, out.offsets[peer]), out.counts[peer], type, peer, c, s, site("all_to_all"));
    }
    nccl::groupEnd(site("all_to_all"));
  });
}

std::unique_ptr<InFlight> NcclCommunicator::allToAll(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs) {
  std::vector<at::Tensor> keep = outputs;
  keep.insert(keep.end(), inputs.begin(), inputs.end());
  return launch("all_to_all", keep, [&](ncclComm_t c, cudaStream_t s) {
    nccl::groupStart(site("all_to_all"));
    for (int peer = 0; peer < info_.size; ++peer) {
      nccl::send(inputs[peer].data_ptr(), countOf(inputs[peer]), ncclTypeOf(inputs[peer].scalar_type()), peer, c, s,
                 site("all_to_all"));
      nccl::recv(outputs[peer].data_ptr(), countOf(outputs[peer]), ncclTypeOf(outputs[peer].scalar_type()), peer, c, s,
                 site("all_to_all"));
    }
    nccl::groupEnd(site("all_to_all"));
  });
}

std::unique_ptr<InFlight> NcclCommunicator::gather(std::vector<at::Tensor>& outputs, at::Tensor& input, int root) {
  std::vector<at::Tensor> keep = outputs;
  keep.push_back(input);
  return launch("gather", keep, [&](ncclComm_t c, cudaStream_t s) {
    ncclDataType_t type = ncclTypeOf(input.scalar_type());
    nccl::groupStart(site("gather"));
    if (info_.rank == root) {
      for (int peer = 0; peer < info_.size; ++peer) {
        if (peer == root) continue;
        nccl::recv(outputs[peer].data_ptr(), countOf(outputs[peer]), type, peer, c, s, site("gather"));
      }
    } else {
      nccl::send(input.data_ptr(), countOf(input), type, root, c, s, site("gather"));
    }
    nccl::groupEnd(site("gather"));
    if (info_.rank == root) {
      c10::cuda::CUDAStreamGuard onCommStream(stream_);
      outputs[root].copy_(input, /*non_blocking=*/true);
    }
  });
}

std::unique_ptr<InFlight> NcclCommunicator::scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) {
  std::vector<at::Tensor> keep = inputs;
  keep.push_back(output);
  return launch("scatter", keep, [&](ncclComm_t c, cudaStream_t s) {
    ncclDataType_t type = ncclTypeOf(output.scalar_type());
    nccl::groupStart(site("scatter"));
    if (info_.rank == root) {
      for (int peer = 0; peer < info_.size; ++peer) {
        if (peer == root) continue;
        nccl::send(inputs[peer].data_ptr(), countOf(inputs[peer]), type, peer, c, s, site("scatter"));
      }
    } else {
      nccl::recv(output.data_ptr(), countOf(output), type, root, c, s, site("scatter"));
    }
    nccl::groupEnd(site("scatter"));
    if (info_.rank == root) {
      c10::cuda::CUDAStreamGuard onCommStream(stream_);
      output.copy_(inputs[root], /*non_blocking=*/true);
    }
  });
}

std::unique_ptr<InFlight> NcclCommunicator::send(at::Tensor& tensor, int peer) {
  return launch("send", {tensor}, [&](ncclComm_t c, cudaStream_t s) {
    nccl::send(tensor.data_ptr(), countOf(tensor), ncclTypeOf(tensor.scalar_type()), peer, c, s, site("send"));
  });
}

std::unique_ptr<InFlight> NcclCommunicator::recv(at::Tensor& tensor, int peer) {
  return launch("recv", {tensor}, [&](ncclComm_t c, cudaStream_t s) {
    nccl::recv(tensor.data_ptr(), countOf(tensor), ncclTypeOf(tensor.scalar_type()), peer, c, s, site("recv"));
  });
}

// An all-reduce of one element, as torch's NCCL backends do it.
std::unique_ptr<InFlight> NcclCommunicator::barrier() {
  c10::cuda::CUDAGuard guard(info_.device);
  at::Tensor token = at::zeros({1}, at::TensorOptions().device(info_.device).dtype(at::kFloat));
  return allReduce(token, c10d::ReduceOp(c10d::ReduceOp::SUM));
}

void NcclCommunicator::beginBatch() {
  TORCH_CHECK(!batch_, "a coalescing batch is already open on communicator ", info_.key);
  c10::cuda::CUDAGuard guard(info_.device);
  orderAfterCaller();
  nccl::groupStart(site("coalescing"));
  batch_ = std::make_shared<BatchDone>();
}

std::unique_ptr<InFlight> NcclCommunicator::endBatch() {
  TORCH_CHECK(batch_, "endCoalescing without startCoalescing on communicator ", info_.key);
  c10::cuda::CUDAGuard guard(info_.device);
  auto batch = std::exchange(batch_, nullptr);
  nccl::groupEnd(site("coalescing"));
  batch->event = std::make_shared<at::cuda::CUDAEvent>();
  batch->event->record(stream_);
  return std::make_unique<NcclInFlight>(batch->event, info_.device, comm("coalescing"), site("coalescing"));
}

void NcclCommunicator::abort() {
  nccl::abortQuietly(comm_);
  comm_ = nullptr;
}

}  // namespace nccl_migrate::backends
