// NM101 multi-gpu-process-group: one process driving several GPUs through one process group.
#include <cctype>
#include <set>
#include <string>

#include "nccl_migrate/lint/rule.h"
#include "registry.h"
#include "torch_names.h"

namespace nccl_migrate::lint {
namespace {

constexpr const char* kWhy =
    "the rewritten backend binds each process group to one device; an operation on another device fails with "
    "\"ProcessGroupNCCL is bound to device ... but an operation was issued on ...\"";

bool isDdp(const std::string& q) {
  return q == "torch.nn.parallel.DistributedDataParallel" || q == "torch.nn.parallel.distributed.DistributedDataParallel" ||
         q == "torch.nn.DistributedDataParallel";
}
bool isDataParallel(const std::string& q) {
  return q == "torch.nn.DataParallel" || q == "torch.nn.parallel.DataParallel" ||
         q == "torch.nn.parallel.data_parallel.DataParallel";
}

// Explicit CUDA device indices in an element such as `t.cuda(1)`, `torch.device("cuda", 1)` or
// `x.to("cuda:1")`; empty when the element names none.
std::set<int> deviceIndices(const std::string& text) {
  std::set<int> found;
  for (const std::string& marker : {std::string("cuda:"), std::string(".cuda("), std::string("\"cuda\", "),
                                    std::string("'cuda', "), std::string("\"cuda\","), std::string("'cuda',")}) {
    size_t at = 0;
    while ((at = text.find(marker, at)) != std::string::npos) {
      at += marker.size();
      if (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) found.insert(text[at] - '0');
    }
  }
  return found;
}

class MultiGpuProcessGroup final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    bool distributedJob = false;
    for (const Call& call : model.calls) distributedJob |= call.qualifiedName.starts_with("torch.distributed.");
    for (const Call& call : model.calls) {
      const std::string& q = call.qualifiedName;
      if (isDdp(q)) checkDdp(model, call, out);
      else if (q.starts_with("torch.distributed.") && q.ends_with("_multigpu"))
        out.push_back(finding(model, call.where, call.spelling + "() runs one collective over tensors on several GPUs of this process; " + kWhy + ". Use one process per GPU and the single-tensor collective"));
      else if (isDataParallel(q) && distributedJob)
        out.push_back(finding(model, call.where, "DataParallel inside a torch.distributed job spreads this process's work over several GPUs; " + std::string(kWhy) + ". Use DistributedDataParallel with one process per GPU"));
      else if (q.starts_with("torch.distributed.")) checkTensorLists(model, call, out);
    }
  }

 private:
  void checkDdp(const SourceModel& model, const Call& call, std::vector<Finding>& out) const {
    const Argument* ids = call.argument("device_ids", 1);
    if (!ids) return checkDdpWithoutDevice(model, call, out);
    if (!severalDevices(*ids)) return;
    std::string spelled = ids->assignedText.empty() ? ids->text : ids->text + " (= " + ids->assignedText + ")";
    out.push_back(finding(model, ids->where, "DistributedDataParallel with device_ids=" + spelled +
                                                 " drives several GPUs from one process; " + kWhy +
                                                 ". Pass exactly one device (device_ids=[local_rank]) and run one process per GPU"));
  }

  // A list literal of several devices, or one built at run time from a range or the device count.
  static bool severalDevices(const Argument& ids) {
    if (ids.isSequenceLiteral) return ids.elements.size() > 1;
    for (const std::string* text : {&ids.text, &ids.assignedText}) {
      if (text->find("range(") != std::string::npos || text->find("device_count(") != std::string::npos) return true;
    }
    return false;
  }

  // DDP(model) with no device_ids after model.cuda(), on a path where the process never picks its
  // GPU: every rank's model lands on cuda:0, or one process drives every visible GPU. A GPU picked
  // in another arm of an `if` (the launcher's `if args.gpu is not None:` branch) does not count.
  void checkDdpWithoutDevice(const SourceModel& model, const Call& ddp, std::vector<Finding>& out) const {
    const Call* moved = nullptr;
    for (const Call& call : model.calls) {
      if (call.exclusiveWith(ddp)) continue;
      if (selectsDevice(call)) return;
      bool toDefaultCuda = call.spelling.ends_with(".cuda") && call.arguments.empty() && call.where.line <= ddp.where.line;
      if (toDefaultCuda && !moved) moved = &call;
    }
    if (!moved) return;
    out.push_back(finding(model, ddp.where,
                          ddp.spelling + "() without device_ids wraps a model moved with " + moved->spelling +
                              "() (line " + std::to_string(moved->where.line) +
                              ") where the process selects no GPU, so every rank runs on cuda:0 (or one process "
                              "drives every visible GPU); the rewritten backend binds each process group to one device "
                              "and such jobs fail with \"Duplicate GPU detected\". Call "
                              "torch.cuda.set_device(local_rank) first and pass device_ids=[local_rank]"));
  }

  static bool selectsDevice(const Call& call) {
    const std::string& q = call.qualifiedName;
    if (q == "torch.cuda.set_device" || q == "torch.accelerator.set_device_index" || q == "torch.cuda.device") return true;
    return isDistributed(q, "init_process_group") && call.keyword("device_id");
  }

  void checkTensorLists(const SourceModel& model, const Call& call, std::vector<Finding>& out) const {
    for (const Argument& a : call.arguments) {
      if (!a.isSequenceLiteral) continue;
      std::set<int> devices;
      for (const std::string& e : a.elements) devices.merge(deviceIndices(e));
      if (devices.size() < 2) continue;
      out.push_back(finding(model, a.where, call.spelling + "() gets tensors on " + std::to_string(devices.size()) +
                                                " different GPUs in one list; " + kWhy));
    }
  }

  RuleInfo info_{
      .code = "NM101",
      .slug = "multi-gpu-process-group",
      .summary = "One process group used with several GPUs of one process",
      .rationale = "torch 2.15's rewritten NCCL backend (nccl2) holds one communicator per process group, bound to one "
                   "device. The legacy backend kept a communicator per device, so one process could drive several GPUs "
                   "through one group (DDP with several device_ids, *_multigpu collectives, DataParallel under "
                   "torch.distributed). Under nccl2 an operation on a second device raises \"ProcessGroupNCCL is bound "
                   "to device ... but an operation was issued on ...\".",
      .example = "model = DistributedDataParallel(model, device_ids=[0, 1])",
      .fix = "Run one process per GPU (torchrun --nproc-per-node) and give each process group one device.",
      .fixSafety = FixSafety::None,
      .languages = {Language::Python},
      .enabledByDefault = true,
      .triggers = {{.anyOf = {"DistributedDataParallel"}},
                   {.anyOf = {"DataParallel", "*_multigpu", "*cuda:#", ".cuda(#", "\"cuda\", #", "\"cuda\",#",
                              "'cuda', #", "'cuda',#"},
                    .module = "torch.distributed"}},
      .contextWords = {"set_device*", "set_device_index", "device_id", ".cuda(", "cuda.device"},
  };
};

}  // namespace

const Rule& multiGpuProcessGroupRule() {
  static const MultiGpuProcessGroup rule;
  return rule;
}

}  // namespace nccl_migrate::lint
