// Argument checks every behaviour shares, with torch's NCCL backends' wording where torch has
// one, so errors read the same whichever backend a job runs on. Each throws a c10 error whose
// Python type is what torch raises (ValueError for bad arguments, RuntimeError otherwise).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "nccl_migrate/backends/reduction.h"

namespace nccl_migrate::backends::checks {

// Exactly one tensor, dense, contiguous, of a type NCCL carries.
const at::Tensor& singleTensor(const std::vector<at::Tensor>& tensors);
void usableTensor(const at::Tensor& t);
void sameDevice(const at::Tensor& expected, const at::Tensor& t);
void rootRank(int64_t root, int size);
// outputs.size() == size, each like `input` (type, numel, device).
void tensorListLike(const std::vector<at::Tensor>& list, const at::Tensor& like, int size, std::string_view op);
// One tensor per rank, each of `like`'s type and device; sizes may differ between ranks (uneven
// all_gather and reduce_scatter lists), but this rank's own entry holds as many elements as `like`.
void perRankList(const std::vector<at::Tensor>& list, const at::Tensor& like, int size, int myRank, std::string_view op);
// Whether every tensor of `list` holds as many elements as `like`.
bool even(const std::vector<at::Tensor>& list, const at::Tensor& like);
void flatOutputOfGather(const at::Tensor& output, const at::Tensor& input, int size);
void flatInputOfReduceScatter(const at::Tensor& output, const at::Tensor& input, int size);
void splitSizes(const std::vector<int64_t>& splits, const at::Tensor& t, int size, std::string_view which);

// The reduction NCCL would run for this tensor's type (bool SUM is a logical or: MAX), lowered
// for the transports, or a ValueError naming the op when NCCL has none.
Reduction reductionFor(const c10d::ReduceOp& op, const at::Tensor& t, std::string_view collective);
// What the communicator sees of `t`: bool as uint8 and complex as real pairs (views of t).
at::Tensor asCarried(const at::Tensor& t);

}  // namespace nccl_migrate::backends::checks
