// NM102 init-without-device-id: an NCCL world initialised without device_id in a process that
// picks its GPU by something other than its local rank.
#include <algorithm>
#include <cctype>
#include <string>

#include "nccl_migrate/lint/rule.h"
#include "registry.h"
#include "torch_names.h"

namespace nccl_migrate::lint {
namespace {

bool mentionsLocalRank(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text.find("local_rank") != std::string::npos || text.find("localrank") != std::string::npos;
}

bool isSetDevice(const std::string& q) { return q == "torch.cuda.set_device" || q == "torch.accelerator.set_device_index"; }

class InitWithoutDeviceId final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    const Call* chooser = nullptr;
    for (const Call& call : model.calls) {
      if (!isSetDevice(call.qualifiedName) || call.arguments.empty()) continue;
      if (!mentionsLocalRank(call.arguments.front().text)) chooser = &call;
    }
    if (!chooser) return;
    for (const Call& call : model.calls) {
      if (!isDistributed(call.qualifiedName, "init_process_group") || call.keyword("device_id")) continue;
      const Argument* backend = call.argument("backend", 0);
      // No backend means torch's default device map, whose CUDA entry is nccl.
      if (backend && (!backend->stringValue || !selectsDefaultNccl(*backend->stringValue))) continue;
      const std::string& device = chooser->arguments.front().text;
      out.push_back(finding(model, call.where,
                            "init_process_group() without device_id while this process selects its GPU with " +
                                chooser->spelling + "(" + device + ") (line " + std::to_string(chooser->where.line) +
                                "), not by local rank: the rewritten NCCL backend then infers the device itself, and "
                                "jobs have failed with \"Duplicate GPU detected\". Pass device_id=torch.device(\"cuda\", " +
                                device + ")"));
    }
  }

 private:
  RuleInfo info_{
      .code = "NM102",
      .slug = "init-without-device-id",
      .summary = "init_process_group with NCCL but no device_id, where the process does not pick its GPU by local rank",
      .rationale = "Without device_id, torch 2.15's rewritten NCCL backend infers each process's device. TorchRec hit "
                   "\"Duplicate GPU detected: rank 2 and rank 0 both on CUDA device ...\" this way when its workers "
                   "selected GPUs by something other than LOCAL_RANK, and fixed it by passing each worker's selected "
                   "device to init_process_group.",
      .example = "torch.cuda.set_device(rank % 4)\ndist.init_process_group(\"nccl\")",
      .fix = "Pass the device the process selected: init_process_group(\"nccl\", device_id=torch.device(\"cuda\", dev)).",
      .fixSafety = FixSafety::None,
      .languages = {Language::Python},
      .enabledByDefault = true,
      .triggers = {{.anyOf = {"init_process_group"}, .andAnyOf = {"set_device*"}, .module = "torch.distributed"}},
  };
};

}  // namespace

const Rule& initWithoutDeviceIdRule() {
  static const InitWithoutDeviceId rule;
  return rule;
}

}  // namespace nccl_migrate::lint
