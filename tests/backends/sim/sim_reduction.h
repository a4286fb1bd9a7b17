// The values NCCL's kernels compute for a reduction, in the element type as NCCL computes them:
// every step rounds to the element's type (fp16 and bf16 add in half and bfloat16, fp8 in half
// and back), avg is a pre-multiplied sum for floats and a wrapped sum then a division for
// integers, min and max of floats ignore a NaN. Sources: sim_reduction.cc.
#pragma once

#include <optional>
#include <vector>

#include <ATen/ATen.h>
#include <nccl.h>

namespace nccl_migrate::sim {

// What NCCL writes for `redOp` over the ranks' contributions `parts` (one tensor per rank, rank
// order, equal shapes and types): the ranks' elements folded in rank order, each step in the
// element type. `preMulFactor` set: a PREMUL_SUM by that factor (stored in the element type as
// NCCL stores it), whatever `redOp` is. Throws c10::Error naming a type or op NCCL has no
// reduction for.
at::Tensor reducedInElementType(const std::vector<at::Tensor>& parts, ncclRedOp_t redOp,
                                std::optional<double> preMulFactor = std::nullopt);

}  // namespace nccl_migrate::sim
