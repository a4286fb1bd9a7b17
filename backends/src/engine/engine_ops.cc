// The c10d operations of MigrateBackend: argument checks, then one issue() call that names
// the op and runs it on the communicator the policy chose.
#include <numeric>

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>

#include "engine_internals.h"
#include "lowering.h"
#include "nccl_migrate/backends/migrate_backend.h"
#include "nccl_migrate/shim/group_device.h"
#include "nccl_migrate/shim/job_settings.h"
#include "tensor_checks.h"

namespace nccl_migrate::backends {
namespace {

// A group rank's position in a communicator's member list: its rank in that communicator.
int commRankOf(const CommunicatorRequest& request, int groupRank) {
  auto it = std::find(request.groupRanks.begin(), request.groupRanks.end(), groupRank);
  TORCH_CHECK(it != request.groupRanks.end(), "rank ", groupRank, " is not a member of communicator ", request.key);
  return static_cast<int>(it - request.groupRanks.begin());
}

std::vector<at::Tensor> carried(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors) out.push_back(checks::asCarried(t));
  return out;
}

// A per-rank list (group-rank order) in the communicator's rank order: entry i is for the
// communicator's rank i.
std::vector<at::Tensor> byCommRank(const CommunicatorRequest& request, const std::vector<at::Tensor>& perGroupRank) {
  if (perGroupRank.empty()) return {};
  std::vector<at::Tensor> out;
  out.reserve(request.groupRanks.size());
  for (int groupRank : request.groupRanks) out.push_back(perGroupRank.at(groupRank));
  return out;
}

}  // namespace

lowering::Target MigrateBackend::onto(Communicator& comm) const { return {comm, batch_ != nullptr}; }

// An op with its own timeout (torch's per-op options; unset, the group's applies).
MigrateBackend::Op MigrateBackend::timed(Op op, std::chrono::milliseconds timeout) {
  op.timeout = timeout;
  return op;
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::asOneBatch(size_t count, const IssueNth& issueNth) {
  // Inside a batch the job opened, the ops join it and complete with it: hand back the last
  // one's work, which settles when the job's batch does.
  if (batch_) {
    c10::intrusive_ptr<c10d::Work> last;
    for (size_t i = 0; i < count; ++i) last = issueNth(i);
    return last;
  }
  startCoalescing();
  try {
    for (size_t i = 0; i < count; ++i) issueNth(i);
  } catch (...) {
    abandonBatch(std::current_exception());  // later ops must not join a batch that never launches
    throw;
  }
  return endCoalescing();
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                         const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = checks::singleTensor(tensors);
  checks::rootRank(opts.rootRank, size_);
  int root = static_cast<int>(opts.rootRank);
  return issue(timed({"broadcast", c10d::OpType::BROADCAST, t.device(), {t}, {t}}, opts.timeout),
               policy_->forCollective(t.device()),
               [&](Communicator& c, const CommunicatorRequest& r) {
                 at::Tensor x = checks::asCarried(t);
                 return c.broadcast(x, commRankOf(r, root));
               });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = checks::singleTensor(tensors);
  Reduction reduction = checks::reductionFor(opts.reduceOp, t, "all_reduce");
  return issue(timed({"all_reduce", c10d::OpType::ALLREDUCE, t.device(), {t}, {t}}, opts.timeout),
               policy_->forCollective(t.device()),
               [&](Communicator& c, const CommunicatorRequest&) {
                 at::Tensor x = checks::asCarried(t);
                 return c.allReduce(x, reduction);
               });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                   const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "allreduce_coalesced needs at least one tensor");
  for (const at::Tensor& t : tensors) {
    checks::usableTensor(t);
    checks::sameDevice(tensors[0], t);
  }
  // One batch: the tensors travel in one launch, as in torch's NCCL backends.
  return asOneBatch(tensors.size(), [&](size_t i) {
    std::vector<at::Tensor> one{tensors[i]};
    c10d::AllreduceOptions single;
    single.reduceOp = opts.reduceOp;
    single.timeout = opts.timeout;
    return allreduce(one, single);
  });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const at::Tensor& t = checks::singleTensor(tensors);
  checks::rootRank(opts.rootRank, size_);
  Reduction reduction = checks::reductionFor(opts.reduceOp, t, "reduce");
  int root = static_cast<int>(opts.rootRank);
  return issue(timed({"reduce", c10d::OpType::REDUCE, t.device(), {t}, {t}}, opts.timeout),
               policy_->forCollective(t.device()),
               [&](Communicator& c, const CommunicatorRequest& r) {
                 at::Tensor x = checks::asCarried(t);
                 return c.reduce(x, commRankOf(r, root), reduction);
               });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = checks::singleTensor(inputs);
  TORCH_CHECK_VALUE(outputs.size() == 1, "Only single tensor / single list supported (got ", outputs.size(), " lists)");
  std::vector<at::Tensor>& outs = outputs[0];
  checks::perRankList(outs, in, size_, rank_, "all_gather");
  if (!checks::even(outs, in)) return allGatherUneven(outs, in);
  return issue(timed({"all_gather", c10d::OpType::ALLGATHER, in.device(), {in}, outs}, opts.timeout),
               policy_->forCollective(in.device()),
               [&](Communicator& c, const CommunicatorRequest&) {
                 return lowering::allGatherList(onto(c), carried(outs), checks::asCarried(in));
               });
}

// Uneven lists, as torch's NCCL backends run them: each rank broadcasts its input into every
// rank's entry for it, all in one batch. This rank's own entry is filled first, in the caller's
// order, and the batch reads it from there.
c10::intrusive_ptr<c10d::Work> MigrateBackend::allGatherUneven(std::vector<at::Tensor>& outputs, const at::Tensor& input) {
  outputs[rank_].view(-1).copy_(input.reshape(-1));
  return asOneBatch(outputs.size(), [&](size_t root) {
    std::vector<at::Tensor> one{outputs[root]};
    c10d::BroadcastOptions opts;
    opts.rootRank = static_cast<int64_t>(root);
    return broadcast(one, opts);
  });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::all_gather_single(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  checks::usableTensor(input);
  checks::flatOutputOfGather(output, input, size_);
  return issue(timed({"_all_gather_base", c10d::OpType::_ALLGATHER_BASE, input.device(), {input}, {output}},
                         opts.timeout),
               policy_->forCollective(input.device()), [&](Communicator& c, const CommunicatorRequest&) {
                 at::Tensor x = checks::asCarried(input), y = checks::asCarried(output);
                 return c.allGather(y, x);
               });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::all_gather_single_coalesced(std::vector<at::Tensor>& outputs,
                                                                           std::vector<at::Tensor>& inputs,
                                                                           const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "allgather_into_tensor_coalesced needs as many outputs as inputs, got ",
                    outputs.size(), " and ", inputs.size());
  return asOneBatch(inputs.size(), [&](size_t i) { return all_gather_single(outputs[i], inputs[i], opts); });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  const at::Tensor& in = checks::singleTensor(inputs);
  checks::rootRank(opts.rootRank, size_);
  int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(outputs.size() == 1, "gather: the root needs exactly one output list, got ", outputs.size());
    outs = outputs[0];
    checks::tensorListLike(outs, in, size_, "gather");
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                      "gather: only the root (rank ", root, ") takes output tensors");
  }
  return issue(timed({"gather", c10d::OpType::GATHER, in.device(), {in}, outs}, opts.timeout),
               policy_->forCollective(in.device()),
               [&](Communicator& c, const CommunicatorRequest& r) {
                 return lowering::gather(onto(c), byCommRank(r, carried(outs)), checks::asCarried(in),
                                         commRankOf(r, root));
               });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::gather_single(at::Tensor& output, at::Tensor& input,
                                                             const c10d::GatherOptions& opts) {
  std::vector<at::Tensor> inputs{input};
  std::vector<std::vector<at::Tensor>> outputs;
  if (rank_ == opts.rootRank) {
    checks::flatOutputOfGather(output, input, size_);
    outputs.push_back(output.reshape({size_, -1}).unbind(0));
    for (at::Tensor& view : outputs[0]) view = view.view(input.sizes());
  }
  return gather(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::scatter(std::vector<at::Tensor>& outputs,
                                                       std::vector<std::vector<at::Tensor>>& inputs,
                                                       const c10d::ScatterOptions& opts) {
  const at::Tensor& out = checks::singleTensor(outputs);
  checks::rootRank(opts.rootRank, size_);
  int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(inputs.size() == 1, "scatter: the root needs exactly one input list, got ", inputs.size());
    ins = inputs[0];
    checks::tensorListLike(ins, out, size_, "scatter");
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                      "scatter: only the root (rank ", root, ") takes input tensors");
  }
  return issue(timed({"scatter", c10d::OpType::SCATTER, out.device(), ins, {out}}, opts.timeout),
               policy_->forCollective(out.device()),
               [&](Communicator& c, const CommunicatorRequest& r) {
                 return lowering::scatter(onto(c), checks::asCarried(out), byCommRank(r, carried(ins)),
                                          commRankOf(r, root));
               });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                              std::vector<std::vector<at::Tensor>>& inputs,
                                                              const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = checks::singleTensor(outputs);
  TORCH_CHECK_VALUE(inputs.size() == 1, "Only single tensor / single list supported (got ", inputs.size(), " lists)");
  std::vector<at::Tensor>& ins = inputs[0];
  checks::perRankList(ins, out, size_, rank_, "reduce_scatter");
  Reduction reduction = checks::reductionFor(opts.reduceOp, out, "reduce_scatter");
  if (!checks::even(ins, out)) return reduceScatterUneven(outputs[0], ins, opts);
  return issue(timed({"reduce_scatter", c10d::OpType::REDUCE_SCATTER, out.device(), ins, {out}}, opts.timeout),
               policy_->forCollective(out.device()), [&](Communicator& c, const CommunicatorRequest&) {
                 return lowering::reduceScatterList(onto(c), checks::asCarried(out), carried(ins), reduction);
               });
}

// Uneven lists: one reduce per rank in one batch, each to the rank whose share it is. This rank's
// share is reduced in place in its output (filled first, in the caller's order); the shares it
// sends go from copies, so the job's inputs stay as they were.
c10::intrusive_ptr<c10d::Work> MigrateBackend::reduceScatterUneven(at::Tensor& output, std::vector<at::Tensor>& inputs,
                                                                   const c10d::ReduceScatterOptions& opts) {
  output.view(-1).copy_(inputs[rank_].reshape(-1));
  std::vector<at::Tensor> shares;
  for (int root = 0; root < size_; ++root) shares.push_back(root == rank_ ? output : inputs[root].clone());
  return asOneBatch(shares.size(), [&](size_t root) {
    std::vector<at::Tensor> one{shares[root]};
    c10d::ReduceOptions reduceOpts;
    reduceOpts.rootRank = static_cast<int64_t>(root);
    reduceOpts.reduceOp = opts.reduceOp;
    return reduce(one, reduceOpts);
  });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::reduce_scatter_single(at::Tensor& output, at::Tensor& input,
                                                                     const c10d::ReduceScatterOptions& opts) {
  checks::usableTensor(output);
  checks::flatInputOfReduceScatter(output, input, size_);
  Reduction reduction = checks::reductionFor(opts.reduceOp, output, "reduce_scatter");
  return issue(timed({"_reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE, output.device(), {input}, {output}},
                         opts.timeout),
               policy_->forCollective(output.device()), [&](Communicator& c, const CommunicatorRequest&) {
                 at::Tensor x = checks::asCarried(input), y = checks::asCarried(output);
                 return c.reduceScatter(y, x, reduction);
               });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::reduce_scatter_single_coalesced(std::vector<at::Tensor>& outputs,
                                                                               std::vector<at::Tensor>& inputs,
                                                                               const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "reduce_scatter_tensor_coalesced needs as many outputs as inputs, got ",
                    outputs.size(), " and ", inputs.size());
  return asOneBatch(inputs.size(), [&](size_t i) { return reduce_scatter_single(outputs[i], inputs[i], opts); });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                                 std::vector<int64_t>& outputSplits,
                                                                 std::vector<int64_t>& inputSplits,
                                                                 const c10d::AllToAllOptions& opts) {
  checks::usableTensor(input);
  checks::usableTensor(output);
  checks::sameDevice(input, output);
  TORCH_CHECK_VALUE(input.scalar_type() == output.scalar_type(), "all_to_all: input and output must have the same type");
  checks::splitSizes(inputSplits, input, size_, "input");
  checks::splitSizes(outputSplits, output, size_, "output");
  return issue(timed({"all_to_all", c10d::OpType::ALLTOALL_BASE, input.device(), {input}, {output}}, opts.timeout),
               policy_->forCollective(input.device()), [&](Communicator& c, const CommunicatorRequest&) {
                 at::Tensor x = checks::asCarried(input), y = checks::asCarried(output);
                 return c.allToAll(y, x, outputSplits, inputSplits);
               });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                        const c10d::AllToAllOptions& opts) {
  TORCH_CHECK_VALUE(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
                    "all_to_all expects ", size_, " input and ", size_, " output tensors (one per rank), got ",
                    inputs.size(), " and ", outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    checks::usableTensor(inputs[i]);
    checks::usableTensor(outputs[i]);
    checks::sameDevice(inputs[0], inputs[i]);
    checks::sameDevice(inputs[0], outputs[i]);
    TORCH_CHECK_VALUE(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                          outputs[i].scalar_type() == inputs[0].scalar_type(),
                      "all_to_all: all tensors must have the same type");
  }
  return issue(timed({"all_to_all", c10d::OpType::ALLTOALL, inputs[0].device(), inputs, outputs}, opts.timeout),
               policy_->forCollective(inputs[0].device()), [&](Communicator& c, const CommunicatorRequest& r) {
                 return lowering::allToAllList(onto(c), byCommRank(r, carried(outputs)), byCommRank(r, carried(inputs)));
               });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) {
  const at::Tensor& t = checks::singleTensor(tensors);
  // Inside a batch p2p joins the batch's communicator; alone it goes where the policy says.
  CommunicatorRequest where = batch_ ? policy_->forCollective(t.device()) : policy_->forPeer(t.device(), dstRank);
  Op op{"send", c10d::OpType::SEND, t.device(), {t}, {}, /*isP2P=*/true, dstRank};
  return issue(std::move(op), where, [&](Communicator& c, const CommunicatorRequest& r) {
    at::Tensor x = checks::asCarried(t);
    return c.send(x, commRankOf(r, dstRank));
  });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) {
  const at::Tensor& t = checks::singleTensor(tensors);
  CommunicatorRequest where = batch_ ? policy_->forCollective(t.device()) : policy_->forPeer(t.device(), srcRank);
  Op op{"recv", c10d::OpType::RECV, t.device(), {}, {t}, /*isP2P=*/true, srcRank};
  return issue(std::move(op), where, [&](Communicator& c, const CommunicatorRequest& r) {
    at::Tensor x = checks::asCarried(t);
    return c.recv(x, commRankOf(r, srcRank));
  });
}

c10::intrusive_ptr<c10d::Work> MigrateBackend::barrier(const c10d::BarrierOptions& opts) {
  c10::Device device = barrierDevice(opts);
  return issue(timed({"barrier", c10d::OpType::BARRIER, device, {}, {}}, opts.timeout), policy_->forCollective(device),
               [&](Communicator& c, const CommunicatorRequest&) { return lowering::barrier(onto(c), device); });
}

// The device a barrier runs on, as torch's NCCL backends pick it: the one named by device_ids,
// else the group's bound device, else the device its ops already run on, else the rank's default
// device (the shim's rule): CUDA where there are GPUs, as torch's NCCL backends always are. A
// device without an index names a kind of device, not one.
c10::Device MigrateBackend::barrierDevice(const c10d::BarrierOptions& opts) const {
  if (!opts.device_ids.empty()) return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(opts.device_ids[0]));
  if (auto bound = policy_->boundDevice()) return *bound;
  if (opts.device && (opts.device->has_index() || opts.device->is_cpu())) return *opts.device;
  // No device named (torch's Python barrier passes none to the backend): the group's devices.
  std::optional<c10::DeviceType> type;
  if (opts.device) type = opts.device->type();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::string& key : creationOrder_) {
      const c10::Device& used = communicators_.at(key)->info().device;
      if (!type || used.type() == *type) return used;
    }
  }
  bool onCuda = type ? *type == c10::kCUDA : c10::cuda::device_count() > 0;
  if (!onCuda) return c10::Device(type.value_or(c10::kCPU));
  auto index = shim::defaultDeviceIndex(shim::settingsFromEnvironment().localRank, static_cast<int>(globalRank()),
                                        c10::cuda::device_count());
  TORCH_CHECK_VALUE(index.ok(), index.ok() ? "" : index.error());
  TORCH_CHECK(index.value(), "barrier on CUDA, but this process sees no GPU");
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(*index.value()));
}

}  // namespace nccl_migrate::backends
