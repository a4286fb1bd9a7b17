// The job's ATen ops as stream work on the simulated device. ATen runs a CUDA tensor's kernels
// on the current CUDA stream, in that stream's order, and returns before they ran; on the
// simulated device the "device" is the CPU, where ATen runs every op at once on the host. While
// an AtenOnCurrentStream lives on a thread whose current simulated stream is a worker stream (a
// job stream), the ATen ops that thread calls run as that stream's work instead, so the
// backend's own copies, concatenations and conversions are ordered on the job's stream as on a
// GPU, and an op of a communicator stream that does not wait for them reads what they had not
// yet written. Only for tests: it covers the thread's every ATen call, the test's own too.
#pragma once

#include <c10/core/impl/LocalDispatchKeySet.h>

namespace nccl_migrate::sim {

class AtenOnCurrentStream {
 public:
  AtenOnCurrentStream();

 private:
  c10::impl::IncludeDispatchKeyGuard include_;
};

}  // namespace nccl_migrate::sim
