// Argument checks (see tensor_checks.h).
#include "tensor_checks.h"

#include <algorithm>

#include <ATen/ops/view_as_real.h>
#include <c10/util/Exception.h>

#include "nccl_migrate/backends/torch_compat.h"  // PreMulSumSupplement on older torch

namespace nccl_migrate::backends::checks {
namespace {

bool ncclCarries(at::ScalarType type) {
  switch (type) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16: case at::kChar: case at::kByte:
    case at::kBool: case at::kInt: case at::kLong: case at::kFloat8_e4m3fn: case at::kFloat8_e5m2:
    case at::kComplexFloat: case at::kComplexDouble: case at::kComplexHalf:
      return true;
    default:
      return false;
  }
}

const char* opName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

}  // namespace

void usableTensor(const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.defined(), "an undefined tensor was passed to a collective");
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "Tensors must be dense (got a ", t.layout(), " tensor)");
  TORCH_CHECK_VALUE(t.is_contiguous(t.suggest_memory_format()), "Tensors must be contiguous");
  TORCH_CHECK_VALUE(ncclCarries(t.scalar_type()), "NCCL has no data type for ", t.scalar_type(),
                    "; cast the tensor to a supported type (float, half, bfloat16, double, int8, uint8, int32, "
                    "int64, bool)");
}

const at::Tensor& singleTensor(const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "Only single tensor supported (got ", tensors.size(),
                    "): one process uses one device per process group");
  usableTensor(tensors[0]);
  return tensors[0];
}

void sameDevice(const at::Tensor& expected, const at::Tensor& t) {
  TORCH_CHECK_VALUE(expected.device() == t.device(), "Expected tensor on ", expected.device(), " but found tensor on ",
                    t.device());
}

void rootRank(int64_t root, int size) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, "Invalid root rank ", root, " for a group of size ", size);
}

namespace {

// One tensor per rank, each usable and of `like`'s type and device.
void oneTensorPerRank(const std::vector<at::Tensor>& list, const at::Tensor& like, int size, std::string_view op) {
  TORCH_CHECK_VALUE(static_cast<int>(list.size()) == size, op, " expects ", size, " tensors (one per rank), got ",
                    list.size());
  for (const at::Tensor& t : list) {
    usableTensor(t);
    sameDevice(like, t);
    TORCH_CHECK_VALUE(t.scalar_type() == like.scalar_type(), op, ": all tensors must have the same type, got ",
                      t.scalar_type(), " and ", like.scalar_type());
  }
}

}  // namespace

void tensorListLike(const std::vector<at::Tensor>& list, const at::Tensor& like, int size, std::string_view op) {
  oneTensorPerRank(list, like, size, op);
  for (const at::Tensor& t : list) {
    TORCH_CHECK_VALUE(t.numel() == like.numel(), op, ": all tensors must have the same number of elements, got ",
                      t.numel(), " and ", like.numel());
  }
}

void perRankList(const std::vector<at::Tensor>& list, const at::Tensor& like, int size, int myRank, std::string_view op) {
  oneTensorPerRank(list, like, size, op);
  TORCH_CHECK_VALUE(list[myRank].numel() == like.numel(), op, ": this rank's entry (", myRank, ") holds ",
                    list[myRank].numel(), " elements but its tensor holds ", like.numel());
}

bool even(const std::vector<at::Tensor>& list, const at::Tensor& like) {
  return std::all_of(list.begin(), list.end(), [&](const at::Tensor& t) { return t.numel() == like.numel(); });
}

void flatOutputOfGather(const at::Tensor& output, const at::Tensor& input, int size) {
  usableTensor(output);
  sameDevice(input, output);
  TORCH_CHECK_VALUE(output.scalar_type() == input.scalar_type(), "output tensor must have the same type as input tensor");
  TORCH_CHECK_VALUE(output.numel() == input.numel() * size,
                    "output tensor size must be equal to world_size times input tensor size");
}

void flatInputOfReduceScatter(const at::Tensor& output, const at::Tensor& input, int size) {
  usableTensor(input);
  sameDevice(output, input);
  TORCH_CHECK_VALUE(output.scalar_type() == input.scalar_type(), "input tensor must be the same type as the output tensor.");
  TORCH_CHECK_VALUE(input.numel() == output.numel() * size,
                    "input tensor must be the same size as output size times world size");
}

void splitSizes(const std::vector<int64_t>& splits, const at::Tensor& t, int size, std::string_view which) {
  if (splits.empty()) {
    TORCH_CHECK_VALUE(t.dim() > 0 && t.size(0) % size == 0, "Tensor's dim 0 does not divide equally across group size");
    return;
  }
  TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == size, which, " split sizes must have one entry per rank (",
                    size, "), got ", splits.size());
  int64_t total = 0;
  for (int64_t s : splits) {
    TORCH_CHECK_VALUE(s >= 0, which, " split sizes must not be negative, got ", s);
    total += s;
  }
  TORCH_CHECK_VALUE(t.dim() > 0 && total == t.size(0), which, " split sizes add up to ", total,
                    " but the tensor's first dimension is ", t.dim() ? t.size(0) : 0);
}

namespace {

// The reduce op NCCL runs for `t`'s type.
c10d::ReduceOp ncclEquivalent(const c10d::ReduceOp& op, const at::Tensor& t, std::string_view collective) {
  if (op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR) {
    TORCH_CHECK_VALUE(false, "Cannot use ReduceOp.", opName(op), " with NCCL");
  }
  if (t.is_complex()) {
    TORCH_CHECK_VALUE(op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::AVG || op == c10d::ReduceOp::PREMUL_SUM,
                      collective, " does not support ", opName(op), " on complex tensors");
  }
  if (t.scalar_type() != at::kBool) return op;
  // NCCL has no bool: it reduces bytes, where logical or is MAX and logical and is MIN.
  if (op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::MAX) return c10d::ReduceOp(c10d::ReduceOp::MAX);
  if (op == c10d::ReduceOp::PRODUCT || op == c10d::ReduceOp::MIN) return c10d::ReduceOp(c10d::ReduceOp::MIN);
  TORCH_CHECK_VALUE(false, "Cannot use ReduceOp.", opName(op), " with boolean inputs");
}

Reduction::Kind kindOf(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return Reduction::Kind::Sum;
    case c10d::ReduceOp::PRODUCT: return Reduction::Kind::Product;
    case c10d::ReduceOp::MIN: return Reduction::Kind::Min;
    case c10d::ReduceOp::MAX: return Reduction::Kind::Max;
    case c10d::ReduceOp::AVG: return Reduction::Kind::Avg;
    case c10d::ReduceOp::PREMUL_SUM: return Reduction::Kind::PreMulSum;
    default: TORCH_CHECK_VALUE(false, "reduce op ", static_cast<int>(op.op_), " has no NCCL equivalent");
  }
}

}  // namespace

Reduction reductionFor(const c10d::ReduceOp& op, const at::Tensor& t, std::string_view collective) {
  Reduction r{kindOf(ncclEquivalent(op, t, collective))};
  if (r.kind != Reduction::Kind::PreMulSum) return r;
  auto supplement = c10::static_intrusive_pointer_cast<c10d::PreMulSumSupplement>(op.supplement_);
  TORCH_CHECK_VALUE(supplement, collective, ": PREMUL_SUM needs a factor (build the op with "
                    "torch.distributed._make_nccl_premul_sum)");
  at::Tensor carried = asCarried(t);
  if (supplement->tensor_factor.defined()) {
    r.tensorFactor = supplement->tensor_factor.to(carried.options()).reshape({});
  } else {
    r.scalarFactor = supplement->double_factor;
  }
  return r;
}

at::Tensor asCarried(const at::Tensor& t) {
  if (t.scalar_type() == at::kBool) return t.view(at::kByte);
  if (t.is_complex()) return at::view_as_real(t);
  return t;
}

}  // namespace nccl_migrate::backends::checks
