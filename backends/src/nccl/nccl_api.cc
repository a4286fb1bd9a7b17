// NCCL and CUDA calls with errors turned into exceptions that say who called and why it failed.
#include "nccl_api.h"

// The CUDA toolkit ships an nccl.h of its own; the build must have picked torch's.
static_assert(NCCL_MAJOR == NCCL_MIGRATE_EXPECTED_NCCL_MAJOR && NCCL_MINOR == NCCL_MIGRATE_EXPECTED_NCCL_MINOR,
              "compiled against a different nccl.h than the NCCL torch loads; check the include order");

namespace nccl_migrate::backends::nccl {
namespace {

std::string where(const CallSite& site) {
  return std::string(site.op) + " in group '" + std::string(site.group) + "' on rank " + std::to_string(site.rank);
}

}  // namespace

void check(ncclResult_t result, std::string_view call, const CallSite& site) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  throw NcclError(result, std::string(call) + " failed during " + where(site) + ": " + ncclGetErrorString(result) +
                              " (NCCL result " + std::to_string(static_cast<int>(result)) +
                              "; set NCCL_DEBUG=INFO for NCCL's own diagnosis)");
}

void checkCuda(cudaError_t error, std::string_view call, const CallSite& site) {
  if (error == cudaSuccess) return;
  throw NcclError(ncclUnhandledCudaError,
                  std::string(call) + " failed during " + where(site) + ": " + cudaGetErrorString(error));
}

ncclUniqueId newUniqueId(const CallSite& site) {
  ncclUniqueId id;
  check(ncclGetUniqueId(&id), "ncclGetUniqueId", site);
  return id;
}

ncclComm_t initRank(int nranks, const ncclUniqueId& id, int rank, ncclConfig_t& config, const CallSite& site) {
  ncclComm_t comm = nullptr;
  check(ncclCommInitRankConfig(&comm, nranks, id, rank, &config), "ncclCommInitRankConfig", site);
  return comm;
}

ncclResult_t asyncError(ncclComm_t comm, const CallSite& site) {
  ncclResult_t state = ncclSuccess;
  check(ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError", site);
  return state;
}

size_t freeDeviceMemory(const CallSite& site) {
  size_t freeBytes = 0, totalBytes = 0;
  checkCuda(cudaMemGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo", site);
  return freeBytes;
}

void allReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
               cudaStream_t stream, const CallSite& site) {
  check(ncclAllReduce(send, recv, count, type, op, comm, stream), "ncclAllReduce", site);
}

void broadcast(void* buffer, size_t count, ncclDataType_t type, int root, ncclComm_t comm, cudaStream_t stream,
               const CallSite& site) {
  check(ncclBroadcast(buffer, buffer, count, type, root, comm, stream), "ncclBroadcast", site);
}

void reduce(void* buffer, size_t count, ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t comm,
            cudaStream_t stream, const CallSite& site) {
  check(ncclReduce(buffer, buffer, count, type, op, root, comm, stream), "ncclReduce", site);
}

void allGather(const void* send, void* recv, size_t sendCount, ncclDataType_t type, ncclComm_t comm,
               cudaStream_t stream, const CallSite& site) {
  check(ncclAllGather(send, recv, sendCount, type, comm, stream), "ncclAllGather", site);
}

void reduceScatter(const void* send, void* recv, size_t recvCount, ncclDataType_t type, ncclRedOp_t op,
                   ncclComm_t comm, cudaStream_t stream, const CallSite& site) {
  check(ncclReduceScatter(send, recv, recvCount, type, op, comm, stream), "ncclReduceScatter", site);
}

void send(const void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream,
          const CallSite& site) {
  check(ncclSend(buffer, count, type, peer, comm, stream), "ncclSend", site);
}

void recv(void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream,
          const CallSite& site) {
  check(ncclRecv(buffer, count, type, peer, comm, stream), "ncclRecv", site);
}

void groupStart(const CallSite& site) { check(ncclGroupStart(), "ncclGroupStart", site); }

void groupEnd(const CallSite& site) { check(ncclGroupEnd(), "ncclGroupEnd", site); }

ncclRedOp_t createPreMulSum(const void* scalar, ncclDataType_t type, ncclComm_t comm, const CallSite& site) {
  ncclRedOp_t op;
  check(ncclRedOpCreatePreMulSum(&op, const_cast<void*>(scalar), type, ncclScalarHostImmediate, comm),
        "ncclRedOpCreatePreMulSum", site);
  return op;
}

void destroyRedOpQuietly(ncclRedOp_t op, ncclComm_t comm) noexcept { (void)ncclRedOpDestroy(op, comm); }

void abortQuietly(ncclComm_t comm) noexcept {
  if (comm) (void)ncclCommAbort(comm);
}

void destroyQuietly(ncclComm_t comm) noexcept {
  if (!comm) return;
  (void)ncclCommDestroy(comm);
}

std::string versionString(int code) {
  // NCCL >= 2.9 encodes versions as major*10000 + minor*100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string((code / 100) % 100) + "." + std::to_string(code % 100);
}

}  // namespace nccl_migrate::backends::nccl
