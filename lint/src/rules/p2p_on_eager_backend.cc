// NM502 p2p-on-eager-backend: point-to-point loops (pipeline stages) on the default NCCL backend.
#include <string>

#include "nccl_migrate/lint/rule.h"
#include "registry.h"
#include "torch_names.h"

namespace nccl_migrate::lint {
namespace {

bool isPointToPoint(const std::string& q) {
  for (const char* name : {"send", "recv", "isend", "irecv", "batch_isend_irecv", "P2POp"})
    if (isDistributed(q, name)) return true;
  return false;
}

class P2pOnEagerBackend final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    // A file that already names nccl-lazy, or uses gloo, has chosen its P2P backend.
    for (const StringLiteral& s : model.strings) {
      if (s.value.find("nccl-lazy") != std::string::npos || s.value == "gloo") return;
    }
    for (const Call& call : model.calls) {
      if (call.loopDepth == 0 || !isPointToPoint(call.qualifiedName)) continue;
      out.push_back(finding(model, call.where,
                            call.spelling + "() in a loop: torch 2.15's NCCL backend runs send/recv on the group's "
                            "one communicator, so transfers to different peers do not overlap; for a pipeline's "
                            "group, consider backend=\"nccl-lazy\" (per-peer communicators, created lazily)"));
      return;  // one finding per file: the advice is per process group, not per call
    }
  }

 private:
  RuleInfo info_{
      .code = "NM502",
      .slug = "p2p-on-eager-backend",
      .summary = "Point-to-point loops (pipeline stages) on the default NCCL backend",
      .rationale = "The rewritten backend runs collectives and send/recv on one communicator per group. The legacy "
                   "backend created a 2-rank communicator per peer pair, so P2P to different peers could overlap. "
                   "PyTorch's pipelining code warns \"Pipeline parallelism is using an eager NCCL communicator. "
                   "Consider creating its process group with backend=\"nccl-lazy\"\".",
      .example = "for step in range(n):\n    dist.send(activations, dst=next_stage)",
      .fix = "Create the pipeline's group with new_group(ranks, backend=\"nccl-lazy\", use_local_synchronization=True).",
      .fixSafety = FixSafety::None,
      .languages = {Language::Python},
      .enabledByDefault = true,
      .triggers = {{.anyOf = {"send(", "recv(", "isend(", "irecv(", "batch_isend_irecv(", "P2POp"},
                    .module = "torch.distributed"}},
      .contextWords = {"nccl-lazy", "\"gloo\"", "'gloo'"},
  };
};

}  // namespace

const Rule& p2pOnEagerBackendRule() {
  static const P2pOnEagerBackend rule;
  return rule;
}

}  // namespace nccl_migrate::lint
