// NcclCommunicator: ops run on the communicator's own stream, ordered after the caller's
// stream, and keep their tensors alive in the caching allocator until the stream is past them.
#include "nccl_communicator.h"

#include <chrono>
#include <thread>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

namespace nccl_migrate::backends {
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
    default: TORCH_CHECK(false, "reduce op ", static_cast<int>(op.op_), " is not supported by NCCL allreduce");
  }
}

// Completion of an op on the communicator's stream, observed through a CUDA event.
class NcclInFlight final : public InFlight {
 public:
  NcclInFlight(std::shared_ptr<at::cuda::CUDAEvent> done, c10::Device device, ncclComm_t comm, nccl::CallSite site)
      : done_(std::move(done)), device_(device), comm_(comm), site_(site) {}

  bool isDone() override { return done_->query(); }

  // Makes the caller's stream wait for the op (torch's non-blocking wait semantics), then
  // watches the host side until the op finished, NCCL reported an error, or the timeout passed.
  void wait(std::chrono::milliseconds timeout) override {
    c10::cuda::CUDAGuard guard(device_);
    done_->block(c10::cuda::getCurrentCUDAStream(device_.index()));
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done_->query()) {
      nccl::check(nccl::asyncError(comm_, site_), "NCCL asynchronous error", site_);
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("timed out after " + std::to_string(timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  void onDone(std::function<void(std::exception_ptr)> callback) override {
    std::exception_ptr error;
    try {
      wait(std::chrono::hours(24 * 365));
    } catch (...) {
      error = std::current_exception();
    }
    callback(error);
  }

 private:
  std::shared_ptr<at::cuda::CUDAEvent> done_;
  c10::Device device_;
  ncclComm_t comm_;
  nccl::CallSite site_;
};

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

std::unique_ptr<InFlight> NcclCommunicator::allReduce(at::Tensor& tensor, const c10d::ReduceOp& op) {
  TORCH_CHECK(comm_, "communicator ", info_.key, " was aborted");
  TORCH_CHECK(tensor.is_cuda(), "ProcessGroupNCCL requires CUDA tensors/devices");
  c10::cuda::CUDAGuard guard(info_.device);
  at::cuda::CUDAEvent ready;
  ready.record(c10::cuda::getCurrentCUDAStream(info_.device.index()));
  ready.block(stream_);
  nccl::allReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                  ncclTypeOf(tensor.scalar_type()), ncclOpOf(op), comm_, stream_.stream(), site("allreduce"));
  c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), stream_);
  auto done = std::make_shared<at::cuda::CUDAEvent>();
  done->record(stream_);
  return std::make_unique<NcclInFlight>(done, info_.device, comm_, site("allreduce"));
}

void NcclCommunicator::abort() {
  nccl::abortQuietly(comm_);
  comm_ = nullptr;
}

}  // namespace nccl_migrate::backends
