// NM101 multi-gpu-process-group: one process driving several GPUs through one process group,
// reported where the file shows several devices (a list of several, a range over several).
#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include "nccl_migrate/lint/rule.h"
#include "registry.h"
#include "torch_names.h"

namespace nccl_migrate::lint {
namespace {

constexpr const char* kWhy =
    "torch 2.15's NCCL backend binds each process group to one device and fails an operation on another "
    "(\"ProcessGroupNCCL is bound to device ...\")";

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

// How many items a traced list shows: a list or tuple display's elements, range(k) for a
// literal k, a comprehension over either; `every` for range(torch.cuda.device_count()), every
// visible GPU. None where the file does not show it.
struct Count {
  size_t items = 0;
  bool every = false;  // every visible GPU
  bool several() const { return every || items > 1; }
};

Count countOf(const TracedValue& value, const ValueNode& n, int depth = 0) {
  using Kind = ValueNode::Kind;
  if (depth > 8) return {};
  if (n.kind == Kind::Sequence) return {n.operands.size(), false};
  if (n.kind == Kind::Comprehension && n.operands.size() == 1) return countOf(value, value.operand(n, 0), depth + 1);
  if (n.kind != Kind::Call) return {};
  if ((n.text == "list" || n.text == "tuple") && n.operands.size() == 1) return countOf(value, value.operand(n, 0), depth + 1);
  if (n.text != "range" || n.operands.size() != 1) return {};
  const ValueNode& bound = value.operand(n, 0);
  if (bound.kind == Kind::Call && bound.text == "torch.cuda.device_count") return {0, true};
  if (bound.kind == Kind::Literal && !bound.text.empty() &&
      std::all_of(bound.text.begin(), bound.text.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return {static_cast<size_t>(std::stoul(bound.text.substr(0, 6))), false};
  }
  return {};
}

Count countOf(const SourceModel& model, const Call& call, const Argument& argument) {
  TracedValue value = traceValue(model, call, argument);
  return value.root() ? countOf(value, *value.root()) : Count{};
}

// What was counted, in the words of the message: "2 devices", "every visible GPU".
std::string described(const Count& c, const std::string& noun) {
  return c.every ? "every visible GPU (range(torch.cuda.device_count()))" : std::to_string(c.items) + " " + noun;
}

// The file shows its world is not NCCL: it initialises one, and every init_process_group names a
// backend with no NCCL entry ("gloo").
bool worldIsNotNccl(const SourceModel& model) {
  bool initialised = false;
  for (const Call& call : model.calls) {
    if (!isDistributed(call.qualifiedName, "init_process_group")) continue;
    initialised = true;
    const Argument* backend = call.argument("backend", 0);
    if (!backend || !backend->stringValue) return false;
    std::string lower = *backend->stringValue;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lower.find("nccl") != std::string::npos) return false;
  }
  return initialised;
}

class MultiGpuProcessGroup final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    if (worldIsNotNccl(model)) return;
    bool distributedJob = false;
    for (const Call& call : model.calls) distributedJob |= call.qualifiedName.starts_with("torch.distributed.");
    for (const Call& call : model.calls) {
      const std::string& q = call.qualifiedName;
      if (isDdp(q)) checkDdp(model, call, out);
      else if (q.starts_with("torch.distributed.") && q.ends_with("_multigpu")) checkMultiGpu(model, call, out);
      else if (isDataParallel(q) && distributedJob) checkDataParallel(model, call, out);
      else if (q.starts_with("torch.distributed.")) checkTensorLists(model, call, out);
    }
  }

 private:
  // A *_multigpu collective over a tensor list the file shows to hold several tensors.
  void checkMultiGpu(const SourceModel& model, const Call& call, std::vector<Finding>& out) const {
    for (const Argument& a : call.arguments) {
      Count count = countOf(model, call, a);
      if (!count.several()) continue;
      out.push_back(finding(model, call.where, call.spelling + "() over a list of " + described(count, "tensors") + " (" + a.text +
                                                   "): one collective on several tensors of this process; " + kWhy +
                                                   ". Use one process per GPU and the single-tensor collective"));
      return;
    }
  }

  // DataParallel with no device_ids (every visible GPU) or with several.
  void checkDataParallel(const SourceModel& model, const Call& call, std::vector<Finding>& out) const {
    const Argument* ids = call.argument("device_ids", 1);
    std::string seen = "without device_ids (every visible GPU)";
    if (ids) {
      Count count = countOf(model, call, *ids);
      if (!count.several()) return;
      seen = "with device_ids=" + ids->text + ", " + described(count, "devices");
    }
    out.push_back(finding(model, call.where, call.spelling + "() " + seen + " in a file that uses torch.distributed; " +
                                                 kWhy + ". Use DistributedDataParallel with one process per GPU"));
  }

  void checkDdp(const SourceModel& model, const Call& call, std::vector<Finding>& out) const {
    const Argument* ids = call.argument("device_ids", 1);
    if (!ids) return checkDdpWithoutDevice(model, call, out);
    Count count = countOf(model, call, *ids);
    if (!count.several()) return;
    out.push_back(finding(model, ids->where, "DistributedDataParallel with device_ids=" + ids->text + ", " +
                                                 described(count, "devices") + "; " + kWhy +
                                                 ". Pass one device (device_ids=[local_rank]) and run one process per GPU"));
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
                              "), and nothing on this path selects the process's GPU (set_device, device_id=). "
                              "Processes that share a GPU fail under torch 2.15's NCCL backend (\"Duplicate GPU "
                              "detected\"); call torch.cuda.set_device(local_rank) first and pass device_ids=[local_rank]"));
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
                   "to device ... but an operation was issued on ...\". Reported only on what the file shows: a "
                   "list of several tensors or devices (a list display, range(k) with k > 1, "
                   "range(torch.cuda.device_count()), followed through assignments), DataParallel without device_ids, "
                   "tensors on different explicit GPUs, or DDP without device_ids after a bare .cuda() on a path that "
                   "selects no GPU. A list it cannot count is not reported, nor is a file whose every "
                   "init_process_group names a backend without NCCL (\"gloo\").",
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
