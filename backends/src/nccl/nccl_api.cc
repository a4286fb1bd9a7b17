// check(), GroupGuard and versionString: the parts of the NCCL seam that do not depend on which
// implementation is behind it.
#include "nccl_api.h"

namespace nccl_migrate::backends::nccl {
namespace {

std::string where(const CallSite& site) {
  return std::string(site.op) + " in group '" + std::string(site.group) + "' on rank " + std::to_string(site.rank);
}

thread_local InProgressScope* innermostScope = nullptr;

}  // namespace

InProgressScope::InProgressScope() : outer_(innermostScope) { innermostScope = this; }
InProgressScope::~InProgressScope() { innermostScope = outer_; }

void check(NcclApi& api, ncclResult_t result, std::string_view call, const CallSite& site) {
  if (result == ncclSuccess) return;
  if (result == ncclInProgress && innermostScope) {
    innermostScope->seen_ = true;
    return;
  }
  if (result == ncclInProgress) {
    throw NcclError(result, std::string(call) + " answered ncclInProgress (NCCL's nonblocking mode) during " +
                                where(site) + ", where nothing waits for NCCL to finish it; report this as a bug "
                                "of the toolkit, and set NCCL_COMM_BLOCKING=1 meanwhile");
  }
  throw NcclError(result, std::string(call) + " failed during " + where(site) + ": " + api.errorString(result) +
                              " (NCCL result " + std::to_string(static_cast<int>(result)) +
                              "; set NCCL_DEBUG=INFO for NCCL's own diagnosis)");
}

GroupGuard::GroupGuard(NcclApi& api, const CallSite& site) : api_(api), site_(site) {
  check(api_, api_.groupStart(), "ncclGroupStart", site_);
}

GroupGuard::~GroupGuard() {
  // Unwinding: close the group so the thread's later calls are not deferred; the error that
  // brought us here is the one to report.
  if (open_) (void)api_.groupEnd();
}

void GroupGuard::end() {
  open_ = false;
  check(api_, api_.groupEnd(), "ncclGroupEnd", site_);
}

std::string versionString(int code) {
  // NCCL >= 2.9 encodes versions as major*10000 + minor*100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string((code / 100) % 100) + "." + std::to_string(code % 100);
}

}  // namespace nccl_migrate::backends::nccl
