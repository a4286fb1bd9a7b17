// A libtorch extension written for torch < 2.15: the casts return null on the nccl2 backend.
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

int64_t commSplitCount(const c10::intrusive_ptr<c10d::Backend>& backend) {
  auto nccl = c10::dynamic_intrusive_pointer_cast<c10d::ProcessGroupNCCL>(backend);
  if (!nccl) return 0;
  return nccl->getCommSplitCounter();
}
