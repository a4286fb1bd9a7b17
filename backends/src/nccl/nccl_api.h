// The one thin layer through which every NCCL and CUDA runtime call goes. Calls that produce
// something return it ([[nodiscard]]); every failure becomes an NcclError carrying the NCCL
// result, the call, the op, the group and the rank. It is also the seam for unit tests.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace nccl_migrate::backends::nccl {

// Who made a call, for error messages.
struct CallSite {
  std::string_view op;     // "allreduce", "communicator init"
  std::string_view group;  // process group name
  int rank = -1;
};

class NcclError : public std::runtime_error {
 public:
  NcclError(ncclResult_t result, const std::string& message) : std::runtime_error(message), result_(result) {}
  ncclResult_t result() const { return result_; }

 private:
  ncclResult_t result_;
};

void check(ncclResult_t result, std::string_view call, const CallSite& site);
void checkCuda(cudaError_t error, std::string_view call, const CallSite& site);

[[nodiscard]] ncclUniqueId newUniqueId(const CallSite& site);
[[nodiscard]] ncclComm_t initRank(int nranks, const ncclUniqueId& id, int rank, ncclConfig_t& config,
                                  const CallSite& site);
[[nodiscard]] ncclResult_t asyncError(ncclComm_t comm, const CallSite& site);
// Free device memory of the current device, in bytes.
[[nodiscard]] size_t freeDeviceMemory(const CallSite& site);
void allReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
               cudaStream_t stream, const CallSite& site);
void broadcast(void* buffer, size_t count, ncclDataType_t type, int root, ncclComm_t comm, cudaStream_t stream,
               const CallSite& site);
void reduce(void* buffer, size_t count, ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t comm,
            cudaStream_t stream, const CallSite& site);
void allGather(const void* send, void* recv, size_t sendCount, ncclDataType_t type, ncclComm_t comm,
               cudaStream_t stream, const CallSite& site);
void reduceScatter(const void* send, void* recv, size_t recvCount, ncclDataType_t type, ncclRedOp_t op,
                   ncclComm_t comm, cudaStream_t stream, const CallSite& site);
void send(const void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream,
          const CallSite& site);
void recv(void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream,
          const CallSite& site);
void groupStart(const CallSite& site);
void groupEnd(const CallSite& site);
// A PREMUL_SUM op for one launch; `scalar` points to one host value of `type`.
[[nodiscard]] ncclRedOp_t createPreMulSum(const void* scalar, ncclDataType_t type, ncclComm_t comm,
                                          const CallSite& site);
void destroyRedOpQuietly(ncclRedOp_t op, ncclComm_t comm) noexcept;
// Teardown never throws: it runs in destructors and on error paths.
void abortQuietly(ncclComm_t comm) noexcept;
void destroyQuietly(ncclComm_t comm) noexcept;

std::string versionString(int code);  // 23007 -> "2.30.7"

}  // namespace nccl_migrate::backends::nccl
