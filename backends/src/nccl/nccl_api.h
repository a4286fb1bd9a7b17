// The seam under the NCCL communicator: every NCCL call goes through NcclApi, an interface
// with NCCL's own signatures and results you must look at ([[nodiscard]]). The library
// implementation calls libnccl; tests put a simulated device or a mock in its place, so the
// communicator's logic runs in CI without a GPU. check() turns a failed result into an
// NcclError carrying the NCCL result, the call, the op, the group and the rank.
#pragma once

#include <cstddef>
#include <memory>
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

// Streams cross this seam as cudaStream_t; a simulated device passes its own handles in them.
class NcclApi {
 public:
  virtual ~NcclApi() = default;
  [[nodiscard]] virtual const char* errorString(ncclResult_t result) = 0;

  [[nodiscard]] virtual ncclResult_t getUniqueId(ncclUniqueId* id) = 0;
  [[nodiscard]] virtual ncclResult_t commInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                                        ncclConfig_t* config) = 0;
  [[nodiscard]] virtual ncclResult_t commGetAsyncError(ncclComm_t comm, ncclResult_t* state) = 0;
  // Both free the communicator: no call may name it afterwards.
  [[nodiscard]] virtual ncclResult_t commAbort(ncclComm_t comm) = 0;
  [[nodiscard]] virtual ncclResult_t commDestroy(ncclComm_t comm) = 0;

  [[nodiscard]] virtual ncclResult_t allReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) = 0;
  [[nodiscard]] virtual ncclResult_t broadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                                               int root, ncclComm_t comm, cudaStream_t stream) = 0;
  [[nodiscard]] virtual ncclResult_t reduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                                            ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) = 0;
  [[nodiscard]] virtual ncclResult_t allGather(const void* send, void* recv, size_t sendCount, ncclDataType_t type,
                                               ncclComm_t comm, cudaStream_t stream) = 0;
  [[nodiscard]] virtual ncclResult_t reduceScatter(const void* send, void* recv, size_t recvCount,
                                                   ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                                   cudaStream_t stream) = 0;
  [[nodiscard]] virtual ncclResult_t send(const void* buffer, size_t count, ncclDataType_t type, int peer,
                                          ncclComm_t comm, cudaStream_t stream) = 0;
  [[nodiscard]] virtual ncclResult_t recv(void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                                          cudaStream_t stream) = 0;
  [[nodiscard]] virtual ncclResult_t groupStart() = 0;
  [[nodiscard]] virtual ncclResult_t groupEnd() = 0;
  [[nodiscard]] virtual ncclResult_t redOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type,
                                                          ncclScalarResidence_t residence, ncclComm_t comm) = 0;
  [[nodiscard]] virtual ncclResult_t redOpDestroy(ncclRedOp_t op, ncclComm_t comm) = 0;
};

// The implementation over the libnccl this build linked.
std::shared_ptr<NcclApi> libraryNcclApi();

// ncclInProgress is NCCL's answer in its nonblocking mode: the call's work is launched on a
// thread of NCCL's own and is not on the stream yet (src/group.cc, ncclGroupEndInternal: ret =
// ncclInProgress, 738 / 857 in v2.28.9 / v2.30.7). Whether a communicator is in that mode is
// NCCL's decision: NCCL_COMM_BLOCKING may come from the environment, from NCCL's config files
// or from an environment plugin, and NCCL reads it once per process (src/misc/param.cc). So
// the answer itself says how to go on, never an expectation of the mode. Only a caller that
// then waits until NCCL finished may take it: it holds an InProgressScope on its thread while it
// calls NCCL (CommHandle::use, which then waits), and check() notes the answer there.
class InProgressScope {
 public:
  InProgressScope();
  ~InProgressScope();
  InProgressScope(const InProgressScope&) = delete;
  InProgressScope& operator=(const InProgressScope&) = delete;
  // Whether a call checked on this thread since the scope opened answered ncclInProgress.
  bool seen() const { return seen_; }

 private:
  friend void check(NcclApi&, ncclResult_t, std::string_view, const CallSite&);
  InProgressScope* outer_;
  bool seen_ = false;
};

// Throws NcclError unless `result` is ncclSuccess, or ncclInProgress inside an InProgressScope
// (noted there). Without a scope ncclInProgress is an error: taken as success, the caller would
// record the op's end before NCCL put the op on the stream, and complete it early.
void check(NcclApi& api, ncclResult_t result, std::string_view call, const CallSite& site);

// Calls between groupStart and groupEnd are deferred to groupEnd. The guard ends the group
// even when a call in between throws: a group left open would defer every later NCCL call of
// the thread forever.
class GroupGuard {
 public:
  GroupGuard(NcclApi& api, const CallSite& site);
  ~GroupGuard();
  // Ends the group and reports its result (the launch happens here).
  void end();
  GroupGuard(const GroupGuard&) = delete;
  GroupGuard& operator=(const GroupGuard&) = delete;

 private:
  NcclApi& api_;
  CallSite site_;
  bool open_ = true;
};

std::string versionString(int code);  // 23007 -> "2.30.7"

}  // namespace nccl_migrate::backends::nccl
