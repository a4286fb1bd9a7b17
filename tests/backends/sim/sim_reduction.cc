// reducedInElementType: see sim_reduction.h. Sources are NVIDIA/nccl at tags v2.28.9-1 /
// v2.30.7-1, "file:line / line" giving the line at each tag, for the GPUs NCCL's fp8 reductions
// need (compute capability 9.0 and up), on which fp16 and bf16 use their native instructions.
//
// What NCCL computes (src/device/reduce_kernel.h):
// - sum and prod: one operation per step in the element type, rounded to it: FuncSum<T> is
//   a + b in T (315 / 338); fp16 __hadd / __hmul (401 / 426), bf16 __hadd / __hmul (424 / 451);
//   fp8 converts both to half, adds or multiplies in half, and converts back to fp8 with
//   saturation to the largest finite value (__nv_fp8_e4m3(__half), 442 / 472). Integers wrap.
// - min and max of floats: fminf / fmaxf (397 / 422), __hmin / __hmax for fp16 and bf16 (415,
//   430 / 440, 457) and for fp8 through half: a NaN loses to a number. Integers compare with a
//   sign mask (329 / 355): plain signed or unsigned order.
// - PREMUL_SUM: each rank's element is first multiplied by the scalar in the element type and
//   rounded (Apply_PreOp<FuncPreMulSum>, 657, 668 / 707, 718), then summed as sum does
//   (Apply_Reduce<FuncPreMulSum> dispatches to FuncSum, 648 / 697).
// - avg (src/enqueue.cc, hostToDevRedOp, 2285-2325 / 2526-2567): floats are a PREMUL_SUM by
//   1/nRanks stored in the element type (fp16 __float2half(float(1.0/n)), bf16 likewise, fp32
//   float(1.0/n), fp64 1.0/n, fp8 __nv_cvt_float_to_fp8(float(1.0/n), __NV_SATFINITE)); integers
//   are FuncSumPostDiv (775 / 937): the sum wrapped in the element type, then divided by nRanks
//   rounding toward zero.
// The order: a ring folds each chunk starting at a rank that depends on the chunk; the simulation
// folds in rank order. Two ranks' results never depend on it (every step is commutative).
// Not modelled: NVLS's multimem reductions, which accumulate fp16 and bf16 in fp32 (".acc::f32",
// reduce_kernel.h 843-846 / 1111-1114), as the simulation never runs NVLS.
#include "sim_reduction.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include <c10/util/Exception.h>

namespace nccl_migrate::sim {
namespace {

// A binary floating-point format: significand bits (with the implicit one), the exponent of its
// smallest normal number, its largest finite value, and what a finite value beyond that becomes.
struct FloatFormat {
  int precision;
  int minExponent;
  double largest;
  bool saturates;  // fp8's conversions in NCCL saturate (__NV_SATFINITE); others overflow to inf
};

constexpr FloatFormat kHalf{11, -14, 65504.0, false};
constexpr FloatFormat kBFloat16{8, -126, 3.38953138925153547590470800371487866880e38, false};
constexpr FloatFormat kFloat{24, -126, 3.40282346638528859811704183484516925440e38, false};
constexpr FloatFormat kE4M3{4, -6, 448.0, true};
constexpr FloatFormat kE5M2{3, -14, 57344.0, true};

// `v` rounded to the nearest value of `format`, ties to even, as the GPU's conversions round.
// Exact inputs only: every sum or product of two values of these formats is exact in double (or
// rounds there without making a tie the format's rounding could see), so rounding once here is
// rounding the exact result.
double roundTo(const FloatFormat& format, double v) {
  if (std::isnan(v)) return v;
  if (std::isinf(v)) return format.saturates ? std::copysign(format.largest, v) : v;
  if (v == 0.0) return v;
  int exponent = 0;
  std::frexp(v, &exponent);  // |v| = m * 2^exponent, m in [0.5, 1)
  int leading = std::max(exponent - 1, format.minExponent);
  double quantum = std::ldexp(1.0, leading - (format.precision - 1));
  double rounded = std::nearbyint(v / quantum) * quantum;  // the default mode: ties to even
  if (std::fabs(rounded) > format.largest) {
    return format.saturates ? std::copysign(format.largest, v) : std::copysign(INFINITY, v);
  }
  return rounded;
}

// How one floating type's steps round: fp8 computes in half and converts back.
struct FloatSteps {
  std::optional<FloatFormat> format;  // none: double, whose operations round themselves
  bool throughHalf = false;
  double round(double v) const {
    if (!format) return v;
    return throughHalf ? roundTo(*format, roundTo(kHalf, v)) : roundTo(*format, v);
  }
};

FloatSteps stepsOf(at::ScalarType type) {
  switch (type) {
    case at::kHalf: return {kHalf};
    case at::kBFloat16: return {kBFloat16};
    case at::kFloat: return {kFloat};
    case at::kDouble: return {std::nullopt};
    case at::kFloat8_e4m3fn: return {kE4M3, true};
    case at::kFloat8_e5m2: return {kE5M2, true};
    default: TORCH_CHECK(false, "simulated NCCL: no floating reduction for ", c10::toString(type));
  }
}

// The scalar NCCL stores for avg, in the element type (hostToDevRedOp).
double averagingScalar(at::ScalarType type, size_t nRanks) {
  if (type == at::kDouble) return 1.0 / static_cast<double>(nRanks);
  double asFloat = static_cast<float>(1.0 / static_cast<double>(nRanks));
  if (type == at::kFloat) return asFloat;
  const FloatFormat& format = type == at::kHalf       ? kHalf
                              : type == at::kBFloat16 ? kBFloat16
                              : type == at::kFloat8_e4m3fn ? kE4M3
                                                           : kE5M2;
  return roundTo(format, asFloat);
}

// fminf / fmaxf and __hmin / __hmax: a NaN loses to a number.
double minIgnoringNaN(double a, double b) { return std::isnan(a) ? b : std::isnan(b) ? a : std::fmin(a, b); }
double maxIgnoringNaN(double a, double b) { return std::isnan(a) ? b : std::isnan(b) ? a : std::fmax(a, b); }

at::Tensor reducedFloating(const std::vector<at::Tensor>& parts, ncclRedOp_t redOp,
                           std::optional<double> preMulFactor) {
  at::ScalarType type = parts[0].scalar_type();
  FloatSteps steps = stepsOf(type);
  std::optional<double> scale;
  if (preMulFactor) scale = steps.round(*preMulFactor);
  if (!preMulFactor && redOp == ncclAvg) scale = averagingScalar(type, parts.size());
  auto step = [&](double acc, double x) {
    if (scale) return steps.round(acc + x);
    switch (redOp) {
      case ncclSum: return steps.round(acc + x);
      case ncclProd: return steps.round(acc * x);
      case ncclMin: return minIgnoringNaN(acc, x);
      case ncclMax: return maxIgnoringNaN(acc, x);
      default: TORCH_CHECK(false, "simulated NCCL: reduce op ", static_cast<int>(redOp), " unknown");
    }
  };
  std::vector<at::Tensor> wide;
  for (const at::Tensor& p : parts) wide.push_back(p.to(at::kDouble).contiguous());  // exact
  at::Tensor out = at::empty_like(wide[0]);
  double* result = out.data_ptr<double>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    double acc = 0.0;
    for (size_t r = 0; r < wide.size(); ++r) {
      double x = wide[r].data_ptr<double>()[i];
      if (scale) x = steps.round(x * *scale);  // the pre-op on each rank's element
      acc = r == 0 ? x : step(acc, x);
    }
    result[i] = acc;
  }
  return out.to(type);  // every value is already one of the type's: the conversion is exact
}

// An integer of `type`'s width and sign, wrapped as the GPU's arithmetic wraps.
int64_t wrapTo(at::ScalarType type, uint64_t bits) {
  switch (type) {
    case at::kChar: return static_cast<int8_t>(static_cast<uint8_t>(bits));
    case at::kByte: return static_cast<uint8_t>(bits);
    case at::kInt: return static_cast<int32_t>(static_cast<uint32_t>(bits));
    case at::kLong: return static_cast<int64_t>(bits);
    default: TORCH_CHECK(false, "simulated NCCL: no integer reduction for ", c10::toString(type));
  }
}

at::Tensor reducedIntegral(const std::vector<at::Tensor>& parts, ncclRedOp_t redOp,
                           std::optional<double> preMulFactor) {
  at::ScalarType type = parts[0].scalar_type();
  wrapTo(type, 0);  // refuses a type NCCL has no reduction for, before any arithmetic
  std::optional<int64_t> scale;
  if (preMulFactor) scale = wrapTo(type, static_cast<uint64_t>(static_cast<int64_t>(*preMulFactor)));
  auto step = [&](int64_t acc, int64_t x) -> int64_t {
    if (scale || redOp == ncclAvg) return wrapTo(type, uint64_t(acc) + uint64_t(x));
    switch (redOp) {
      case ncclSum: return wrapTo(type, uint64_t(acc) + uint64_t(x));
      case ncclProd: return wrapTo(type, uint64_t(acc) * uint64_t(x));
      case ncclMin: return std::min(acc, x);
      case ncclMax: return std::max(acc, x);
      default: TORCH_CHECK(false, "simulated NCCL: reduce op ", static_cast<int>(redOp), " unknown");
    }
  };
  std::vector<at::Tensor> wide;
  for (const at::Tensor& p : parts) wide.push_back(p.to(at::kLong).contiguous());  // exact
  at::Tensor out = at::empty_like(wide[0]);
  int64_t* result = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t acc = 0;
    for (size_t r = 0; r < wide.size(); ++r) {
      int64_t x = wide[r].data_ptr<int64_t>()[i];
      if (scale) x = wrapTo(type, uint64_t(x) * uint64_t(*scale));
      acc = r == 0 ? x : step(acc, x);
    }
    // FuncSumPostDiv: the wrapped sum divided by nRanks, toward zero (C++'s division).
    if (!scale && redOp == ncclAvg) acc /= static_cast<int64_t>(wide.size());
    result[i] = acc;
  }
  return out.to(type);
}

}  // namespace

at::Tensor reducedInElementType(const std::vector<at::Tensor>& parts, ncclRedOp_t redOp,
                                std::optional<double> preMulFactor) {
  TORCH_CHECK(!parts.empty(), "simulated NCCL: a reduction of no contributions");
  bool known = redOp == ncclSum || redOp == ncclProd || redOp == ncclMin || redOp == ncclMax || redOp == ncclAvg;
  TORCH_CHECK(preMulFactor || known, "simulated NCCL: reduce op ", static_cast<int>(redOp), " unknown");
  if (at::isFloatingType(parts[0].scalar_type())) return reducedFloating(parts, redOp, preMulFactor);
  return reducedIntegral(parts, redOp, preMulFactor);
}

}  // namespace nccl_migrate::sim
