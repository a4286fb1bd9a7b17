// NcclApi over the libnccl this build linked (torch's nvidia-nccl wheel): each call is NCCL's own.
#include "nccl_api.h"

// The CUDA toolkit ships an nccl.h of its own; the build must have picked torch's.
static_assert(NCCL_MAJOR == NCCL_MIGRATE_EXPECTED_NCCL_MAJOR && NCCL_MINOR == NCCL_MIGRATE_EXPECTED_NCCL_MINOR,
              "compiled against a different nccl.h than the NCCL torch loads; check the include order");

namespace nccl_migrate::backends::nccl {
namespace {

class LibraryNcclApi final : public NcclApi {
 public:
  const char* errorString(ncclResult_t result) override { return ncclGetErrorString(result); }
  ncclResult_t getUniqueId(ncclUniqueId* id) override { return ncclGetUniqueId(id); }
  ncclResult_t commInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                  ncclConfig_t* config) override {
    return ncclCommInitRankConfig(comm, nranks, id, rank, config);
  }
  ncclResult_t commGetAsyncError(ncclComm_t comm, ncclResult_t* state) override {
    return ncclCommGetAsyncError(comm, state);
  }
  ncclResult_t commAbort(ncclComm_t comm) override { return ncclCommAbort(comm); }
  ncclResult_t commDestroy(ncclComm_t comm) override { return ncclCommDestroy(comm); }
  ncclResult_t allReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                         ncclComm_t comm, cudaStream_t stream) override {
    return ncclAllReduce(send, recv, count, type, op, comm, stream);
  }
  ncclResult_t broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                         cudaStream_t stream) override {
    return ncclBroadcast(send, recv, count, type, root, comm, stream);
  }
  ncclResult_t reduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                      ncclComm_t comm, cudaStream_t stream) override {
    return ncclReduce(send, recv, count, type, op, root, comm, stream);
  }
  ncclResult_t allGather(const void* send, void* recv, size_t sendCount, ncclDataType_t type, ncclComm_t comm,
                         cudaStream_t stream) override {
    return ncclAllGather(send, recv, sendCount, type, comm, stream);
  }
  ncclResult_t reduceScatter(const void* send, void* recv, size_t recvCount, ncclDataType_t type, ncclRedOp_t op,
                             ncclComm_t comm, cudaStream_t stream) override {
    return ncclReduceScatter(send, recv, recvCount, type, op, comm, stream);
  }
  ncclResult_t send(const void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                    cudaStream_t stream) override {
    return ncclSend(buffer, count, type, peer, comm, stream);
  }
  ncclResult_t recv(void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                    cudaStream_t stream) override {
    return ncclRecv(buffer, count, type, peer, comm, stream);
  }
  ncclResult_t groupStart() override { return ncclGroupStart(); }
  ncclResult_t groupEnd() override { return ncclGroupEnd(); }
  ncclResult_t redOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type,
                                    ncclScalarResidence_t residence, ncclComm_t comm) override {
    return ncclRedOpCreatePreMulSum(op, scalar, type, residence, comm);
  }
  ncclResult_t redOpDestroy(ncclRedOp_t op, ncclComm_t comm) override { return ncclRedOpDestroy(op, comm); }
};

}  // namespace

std::shared_ptr<NcclApi> libraryNcclApi() {
  static auto api = std::make_shared<LibraryNcclApi>();
  return api;
}

}  // namespace nccl_migrate::backends::nccl
