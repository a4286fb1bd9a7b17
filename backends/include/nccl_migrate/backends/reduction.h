// The reduction an op runs, as the engine lowered it once for every transport: torch's reduce
// op mapped to what NCCL computes for the tensor's type, with a PREMUL_SUM factor taken out of
// torch's supplement.
#pragma once

#include <optional>

#include <ATen/core/Tensor.h>

namespace nccl_migrate::backends {

struct Reduction {
  enum class Kind { Sum, Product, Min, Max, Avg, PreMulSum };
  Kind kind = Kind::Sum;
  // PreMulSum only, exactly one set. A tensor factor stays where the job put it, converted to
  // the op's type on the op's device (reading it on the host would sync a GPU, and is illegal
  // under graph capture); a double factor is a host scalar.
  at::Tensor tensorFactor;
  std::optional<double> scalarFactor;
};

}  // namespace nccl_migrate::backends
