// NM102 init-without-device-id: an NCCL world initialised without device_id in a process that
// picks its GPU by something other than its local rank.
#include <algorithm>
#include <cctype>
#include <optional>
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

// Whether every run that reaches `later` has passed `earlier` just before in the same function:
// `earlier` stands in no `if` arm that `later` is not in too.
bool alwaysBefore(const Call& earlier, const Call& later) {
  if (earlier.functionId != later.functionId || earlier.where.line >= later.where.line) return false;
  if (earlier.branches.size() > later.branches.size()) return false;
  for (size_t i = 0; i < earlier.branches.size(); ++i) {
    if (earlier.branches[i].statement != later.branches[i].statement ||
        earlier.branches[i].index != later.branches[i].index) {
      return false;
    }
  }
  return true;
}

// `device_id=` with the device the process selected, added to the init call: the current CUDA
// device, which the selection set (an index, a "cuda:N" string or a torch.device alike, and no
// name of the selecting line that may mean something else at the init). Only where the selection
// runs unconditionally before the init in the same function, through a name spelled `torch.` (so
// `torch` is the module there), and the init's arguments are written out (`**kwargs` may hold a
// device_id already). Unsafe: the job's device binding changes on purpose.
std::optional<Fix> deviceIdFix(const Call& chooser, const Call& init) {
  if (!init.hasArgumentList || !chooser.spelling.starts_with("torch.") || !alwaysBefore(chooser, init)) return std::nullopt;
  bool unpacked = std::any_of(init.arguments.begin(), init.arguments.end(),
                              [](const Argument& a) { return a.text.starts_with("*"); });
  if (unpacked) return std::nullopt;
  std::string argument = "device_id=torch.device(\"cuda\", torch.cuda.current_device())";
  if (!init.arguments.empty()) argument = ", " + argument;
  return Fix{"Pass the selected device as device_id", FixSafety::Unsafe,
             {Edit{{init.nextArgumentAt, init.nextArgumentAt}, argument}}};
}

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
      Finding& found = out.emplace_back(finding(model, call.where,
                            "init_process_group() without device_id while this process selects its GPU with " +
                                chooser->spelling + "(" + device + ") (line " + std::to_string(chooser->where.line) +
                                "), not by local rank: the rewritten NCCL backend then infers the device itself, and "
                                "jobs have failed with \"Duplicate GPU detected\". Pass device_id=torch.device(\"cuda\", " +
                                device + ")"));
      found.fix = deviceIdFix(*chooser, call);
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
      .fix = "Pass the device the process selected: init_process_group(\"nccl\", device_id=torch.device(\"cuda\", dev)). "
             "The fix (unsafe) adds device_id=torch.device(\"cuda\", torch.cuda.current_device()), the device the "
             "selection set, where the selection runs through `torch.` in the same function before the init on every "
             "path and the init's arguments are written out (no **kwargs); it is unsafe because it changes which "
             "device the job's groups bind to, on purpose.",
      .fixSafety = FixSafety::Unsafe,
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
