// The torch ops that are not transport primitives, lowered onto them once for every transport:
// list forms through a staging buffer, gather, scatter and the list all-to-all as sends and
// receives, barrier as a one-element all-reduce. Each runs as one launch: a batch of its own, or
// as members of the batch the job has open (then the batch's InFlight answers and these return
// nullptr). A transport with list forms of its own (NativeListOps) runs those instead. Tensors
// arrive validated; ranks are communicator ranks.
#pragma once

#include <memory>
#include <vector>

#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends::lowering {

// Where the lowered op runs: the communicator, and whether the job's batch is already open on it.
struct Target {
  Communicator& comm;
  bool batchOpen = false;
};

// outputs[i] receives rank i's input.
std::unique_ptr<InFlight> allGatherList(Target t, const std::vector<at::Tensor>& outputs, const at::Tensor& input);
// inputs[i] is reduced into rank i's output.
std::unique_ptr<InFlight> reduceScatterList(Target t, const at::Tensor& output, const std::vector<at::Tensor>& inputs,
                                            const Reduction& reduction);
// outputs (one per rank) is filled on the root only.
std::unique_ptr<InFlight> gather(Target t, const std::vector<at::Tensor>& outputs, const at::Tensor& input, int root);
// inputs (one per rank) is read on the root only.
std::unique_ptr<InFlight> scatter(Target t, const at::Tensor& output, const std::vector<at::Tensor>& inputs, int root);
std::unique_ptr<InFlight> allToAllList(Target t, const std::vector<at::Tensor>& outputs,
                                       const std::vector<at::Tensor>& inputs);
// torch's NCCL backends' barrier: an all-reduce of one element on the group's device.
std::unique_ptr<InFlight> barrier(Target t, c10::Device device);

}  // namespace nccl_migrate::backends::lowering
