// The lowered ops: see lowering.h.
#include "lowering.h"

#include <functional>

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

namespace nccl_migrate::backends::lowering {
namespace {

// Runs `ops` as one launch. When one of them throws, a batch of its own is still closed (a
// device communicator must not keep an NCCL group open), and the error goes on.
std::unique_ptr<InFlight> oneLaunch(Target t, const std::function<void()>& ops) {
  if (t.batchOpen) {
    ops();
    return nullptr;
  }
  t.comm.beginBatch();
  try {
    ops();
  } catch (...) {
    try {
      (void)t.comm.endBatch();
    } catch (...) {
      // the first error is the one to report
    }
    throw;
  }
  return t.comm.endBatch();
}

// A primitive's result inside a launch: the launch's InFlight answers for it.
void joined(const std::unique_ptr<InFlight>&) {}

at::Tensor flat(const at::Tensor& t) { return t.reshape(-1); }

}  // namespace

// NCCL gathers into one buffer; the job's tensors are filled from it once the gather ran.
std::unique_ptr<InFlight> allGatherList(Target t, const std::vector<at::Tensor>& outputs, const at::Tensor& input) {
  int64_t n = input.numel();
  at::Tensor staging = at::empty({n * t.comm.info().size}, input.options());
  return oneLaunch(t, [&] {
    at::Tensor in = flat(input);  // a 0-dim input gathers into one element per rank
    joined(t.comm.allGather(staging, in));
    for (size_t r = 0; r < outputs.size(); ++r) {
      t.comm.copyAfterBatch(outputs[r], staging.narrow(0, static_cast<int64_t>(r) * n, n).view(outputs[r].sizes()));
    }
  });
}

// The inputs are laid end to end on the caller's side, before the op (which waits for it).
std::unique_ptr<InFlight> reduceScatterList(Target t, const at::Tensor& output, const std::vector<at::Tensor>& inputs,
                                            const Reduction& reduction) {
  std::vector<at::Tensor> parts;
  parts.reserve(inputs.size());
  for (const at::Tensor& in : inputs) parts.push_back(flat(in));
  at::Tensor staging = at::cat(parts);
  at::Tensor out = flat(output);  // a view: the result lands in output
  return oneLaunch(t, [&] { joined(t.comm.reduceScatter(out, staging, reduction)); });
}

std::unique_ptr<InFlight> gather(Target t, const std::vector<at::Tensor>& outputs, const at::Tensor& input, int root) {
  if (NativeListOps* native = t.comm.nativeListOps()) {
    std::vector<at::Tensor> outs = outputs;
    at::Tensor in = input;
    return native->gather(outs, in, root);
  }
  int me = t.comm.info().rank;
  return oneLaunch(t, [&] {
    at::Tensor in = input;
    if (me != root) return joined(t.comm.send(in, root));
    for (int peer = 0; peer < t.comm.info().size; ++peer) {
      at::Tensor out = outputs[peer];
      if (peer == root) {
        t.comm.copyAfterBatch(out, input);
      } else {
        joined(t.comm.recv(out, peer));
      }
    }
  });
}

std::unique_ptr<InFlight> scatter(Target t, const at::Tensor& output, const std::vector<at::Tensor>& inputs, int root) {
  if (NativeListOps* native = t.comm.nativeListOps()) {
    std::vector<at::Tensor> ins = inputs;
    at::Tensor out = output;
    return native->scatter(out, ins, root);
  }
  int me = t.comm.info().rank;
  return oneLaunch(t, [&] {
    at::Tensor out = output;
    if (me != root) return joined(t.comm.recv(out, root));
    for (int peer = 0; peer < t.comm.info().size; ++peer) {
      at::Tensor in = inputs[peer];
      if (peer == root) {
        t.comm.copyAfterBatch(output, in);
      } else {
        joined(t.comm.send(in, peer));
      }
    }
  });
}

// Empty parts are neither sent nor received: the sender's part for a peer is the peer's part
// from the sender, so both sides skip the same pairs.
std::unique_ptr<InFlight> allToAllList(Target t, const std::vector<at::Tensor>& outputs,
                                       const std::vector<at::Tensor>& inputs) {
  if (NativeListOps* native = t.comm.nativeListOps()) {
    std::vector<at::Tensor> outs = outputs, ins = inputs;
    return native->allToAll(outs, ins);
  }
  int me = t.comm.info().rank;
  return oneLaunch(t, [&] {
    for (int peer = 0; peer < t.comm.info().size; ++peer) {
      at::Tensor in = inputs[peer], out = outputs[peer];
      if (peer == me) {
        t.comm.copyAfterBatch(out, in);
        continue;
      }
      if (in.numel()) joined(t.comm.send(in, peer));
      if (out.numel()) joined(t.comm.recv(out, peer));
    }
  });
}

// The token lives as long as the op: the transports keep the tensors of their ops. A CPU
// device index names a simulated device, whose memory is the host's.
std::unique_ptr<InFlight> barrier(Target t, c10::Device device) {
  at::Tensor token = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(device.is_cpu() ? c10::kCPU : device));
  return oneLaunch(t, [&] { joined(t.comm.allReduce(token, Reduction{Reduction::Kind::Sum})); });
}

}  // namespace nccl_migrate::backends::lowering
