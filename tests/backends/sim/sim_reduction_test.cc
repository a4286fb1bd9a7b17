// The reduction NCCL's kernels compute, in the element type: each case's expected value is
// worked out in its comment, step by step as NCCL rounds (sim_reduction.cc cites the kernels).
// Where a case's ranks are three, every order of the ranks gives the same value, so the case does
// not depend on where NCCL's ring starts a chunk. Summing in double and rounding once gives
// another value in each case marked "double:".
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include <ATen/ATen.h>

#include "sim_reduction.h"

namespace nccl_migrate::sim {
namespace {

// One element per rank, of `type`.
std::vector<at::Tensor> ranks(std::vector<double> values, at::ScalarType type) {
  std::vector<at::Tensor> parts;
  for (double v : values) parts.push_back(at::full({1}, v, at::TensorOptions().dtype(type)));
  return parts;
}

double only(const at::Tensor& t) { return t.to(at::kDouble).item<double>(); }

// fp16 sums in half (__hadd), rounding each step. 2048 + 2050 = 4098: above 4096 half steps by
// 4, a tie between 4096 and 4100, to even: 4096; + 0.5 = 4096.5 -> 4096. Starting with 0.5:
// 2048.5 -> 2048 (steps of 2), + 2050 = 4098 -> 4096; or 2050.5 -> 2050, + 2048 -> 4096.
// double: 4098.5 -> 4100.
TEST(NcclReduction, Fp16SumRoundsEachStep) {
  at::Tensor sum = reducedInElementType(ranks({0.5, 2048, 2050}, at::kHalf), ncclSum);
  EXPECT_EQ(sum.scalar_type(), at::kHalf);
  EXPECT_EQ(only(sum), 4096.0);
}

// bf16 sums in bfloat16 (__hadd), rounding each step: steps of 4 in [512, 1024), of 8 above
// 1024. 512 + 516 = 1028, a tie between 1024 and 1032: 1024; + 1 -> 1024. 1 + 512 = 513 -> 512,
// + 516 -> 1024; 1 + 516 = 517 -> 516, + 512 -> 1024. double: 1029 -> 1032.
TEST(NcclReduction, Bf16SumRoundsEachStep) {
  EXPECT_EQ(only(reducedInElementType(ranks({1, 512, 516}, at::kBFloat16), ncclSum)), 1024.0);
}

// fp16 avg of 3 ranks is a PREMUL_SUM by __float2half(float(1/3)) = 1365/4096 = 0.333251953125.
// 1 * s = 0.333251953125, 2 * s = 0.66650390625 (both exact). 0.333251953125 + 0.66650390625 =
// 0.999755859375 = 2047.5 steps of 2^-11: to even, 1.0; + 0.66650390625 = 1.66650390625 =
// 1706.5 steps of 2^-10: 1706 -> 1.666015625. The other order: 0.6665... + 0.6665... =
// 1.3330078125 (exact), + 0.333251953125 = 1706.25 steps -> 1.666015625.
// double: 5 / 3 = 1.6667 -> 1.6669921875.
TEST(NcclReduction, Fp16AvgMultipliesEachRankThenSums) {
  EXPECT_EQ(only(reducedInElementType(ranks({1, 2, 2}, at::kHalf), ncclAvg)), 1.666015625);
}

// bf16 avg of 3: s = __float2bfloat16(float(1/3)) = 0.333984375 (171/512). 1 * s = 0.333984375,
// 2 * s = 0.66796875 (exact). 0.66796875 + 0.66796875 = 1.3359375 (exact, 171 steps of 2^-7),
// + 0.333984375 = 1.669921875 = 213.75 steps -> 214 -> 1.671875; 0.333984375 + 0.66796875 =
// 1.001953125 = 128.25 steps -> 1.0, + 0.66796875 = 1.66796875 = 213.5 steps, to even: 214 ->
// 1.671875. double: 5 / 3 -> 1.6640625.
TEST(NcclReduction, Bf16AvgMultipliesEachRankThenSums) {
  EXPECT_EQ(only(reducedInElementType(ranks({1, 2, 2}, at::kBFloat16), ncclAvg)), 1.671875);
}

// Two ranks: avg's pre-multiplication by 0.5 rounds the smallest fp16 subnormal 2^-24 to 2^-25,
// a tie between 0 and 2^-24: to even, 0; 0 + 0 = 0. double: (2^-24 + 2^-24) / 2 = 2^-24.
TEST(NcclReduction, Fp16AvgOfTwoRoundsEachRanksHalf) {
  double tiny = std::ldexp(1.0, -24);
  EXPECT_EQ(only(reducedInElementType(ranks({tiny, tiny}, at::kHalf), ncclAvg)), 0.0);
}

// A PREMUL_SUM's scalar is stored in the element type and each product rounded to it: fp16
// scalar 0.1 is 1638 / 16384 = 0.0999755859375. 5 * that = 0.4998779296875 = 2047.5 steps of
// 2^-12: to even, 0.5. 0.0999755859375 + 0.5 = 0.5999755859375 = 1228.75 steps of 2^-11 -> 1229
// -> 0.60009765625. double: 6 * 0.0999755859375 = 0.599853515625 = 1228.5 steps: to even,
// 0.599609375.
TEST(NcclReduction, PreMulSumRoundsEachProductInTheElementType) {
  at::Tensor r = reducedInElementType(ranks({1, 5}, at::kHalf), ncclSum, 0.0999755859375);
  EXPECT_EQ(only(r), 0.60009765625);
}

// fp8 (e4m3) sums in half and converts back each step: steps of 0.5 in [4, 8), of 1 in
// [8, 16). 4 + 4.5 = 8.5, a tie: to even, 8; + 0.125 -> 8. 0.125 + 4 = 4.125 -> 4, + 4.5 -> 8;
// 0.125 + 4.5 = 4.625 -> 4.5, + 4 -> 8. double: 8.625 -> 9.
TEST(NcclReduction, Fp8SumRoundsEachStep) {
  EXPECT_EQ(only(reducedInElementType(ranks({0.125, 4, 4.5}, at::kFloat8_e4m3fn), ncclSum)), 8.0);
}

// fp8's conversion back saturates (__NV_SATFINITE): 448 + 448 = 896 in half -> 448, e4m3's
// largest finite value.
TEST(NcclReduction, Fp8SumSaturates) {
  EXPECT_EQ(only(reducedInElementType(ranks({448, 448}, at::kFloat8_e4m3fn), ncclSum)), 448.0);
}

// fminf / fmaxf: a NaN loses to a number. double (at::minimum): NaN.
TEST(NcclReduction, FloatMinAndMaxIgnoreNaN) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(only(reducedInElementType(ranks({nan, 2}, at::kFloat), ncclMin)), 2.0);
  EXPECT_EQ(only(reducedInElementType(ranks({2, nan}, at::kHalf), ncclMax)), 2.0);
  EXPECT_TRUE(std::isnan(only(reducedInElementType(ranks({nan, nan}, at::kFloat), ncclMin))));
}

// Integer avg: the sum wraps in the element type, then divides toward zero. int8 100 + 100 =
// 200, wrapped: -56; / 2 = -28. double (long): 200 / 2 = 100.
TEST(NcclReduction, IntegerAvgWrapsBeforeItDivides) {
  EXPECT_EQ(only(reducedInElementType(ranks({100, 100}, at::kChar), ncclAvg)), -28.0);
  EXPECT_EQ(only(reducedInElementType(ranks({-7, 0}, at::kInt), ncclAvg)), -3.0);  // toward zero
}

// Sums and products of integers wrap as the GPU's do: uint8 200 + 100 = 300 -> 44; int8 16 * 16
// = 256 -> 0.
TEST(NcclReduction, IntegerSumAndProdWrap) {
  EXPECT_EQ(only(reducedInElementType(ranks({200, 100}, at::kByte), ncclSum)), 44.0);
  EXPECT_EQ(only(reducedInElementType(ranks({16, 16}, at::kChar), ncclProd)), 0.0);
  EXPECT_EQ(only(reducedInElementType(ranks({-3, 5, 1}, at::kLong), ncclMin)), -3.0);
}

// What rounding once would also give stays the same: fp32 and fp64 sums of exact values, fp16
// products, and each element of a longer tensor on its own.
TEST(NcclReduction, ExactCasesAgreeWithPlainArithmetic) {
  EXPECT_EQ(only(reducedInElementType(ranks({1.5, 2.25, 3}, at::kFloat), ncclSum)), 6.75);
  EXPECT_EQ(only(reducedInElementType(ranks({1.5, 2.25, 3}, at::kDouble), ncclAvg)), 2.25);
  EXPECT_EQ(only(reducedInElementType(ranks({3, -2}, at::kHalf), ncclProd)), -6.0);
  std::vector<at::Tensor> parts{at::arange(4, at::kFloat), at::arange(4, at::kFloat) * 2};
  at::Tensor r = reducedInElementType(parts, ncclMax);
  EXPECT_TRUE(at::equal(r, at::arange(4, at::kFloat) * 2));
}

// fp32 avg of three ranks' small integers (the simulated suites' inputs) lands on the exact
// quotient: s = float(1/3) = 11184811 * 2^-25; e.g. 3 * s = 33554433 * 2^-25 rounds to 1.0, and
// 1.0 + 1.0 + 2 * s (0.6666667) lands on 2.0 after its ties to even.
TEST(NcclReduction, Fp32AvgOfSmallIntegersOverThreeRanksIsExact) {
  std::vector<at::Tensor> parts{at::tensor({1.f, 2.f, 3.f}), at::tensor({2.f, 3.f, 4.f}), at::tensor({3.f, 4.f, 5.f})};
  EXPECT_TRUE(at::equal(reducedInElementType(parts, ncclAvg), at::tensor({2.f, 3.f, 4.f})));
}

TEST(NcclReduction, AnOpNcclDoesNotKnowIsRefusedByNumber) {
  try {
    reducedInElementType(ranks({1, 2}, at::kFloat), static_cast<ncclRedOp_t>(ncclNumOps + 3));
    FAIL() << "an unknown op was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("reduce op " + std::to_string(ncclNumOps + 3) + " unknown"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace nccl_migrate::sim
