// NM101 multi-gpu-process-group: one process driving several GPUs through one process group,
// reported where the file shows several devices (a list of several, a range over several).
#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "nccl_migrate/lint/rule.h"
#include "python/python_frontend.h"
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
  if (n.kind == Kind::Comprehension && !n.operands.empty()) return countOf(value, value.operand(n, 0), depth + 1);
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

// Whether a condition, where it holds (`negated`: where it does not), shows the process is in no
// distributed job: a rank read that is -1 (below 0), a world size of 1 (below 2), a false
// `distributed`/`ddp` flag, torch.distributed not initialised or not available. `a and b` holds
// where both do; where a value is one of several (`x if c else y`, `a or b`, a name assigned in
// several places) every one must show it.
class NotDistributedCondition {
 public:
  explicit NotDistributedCondition(const TracedValue& value) : value_(value) {}

  bool shown(bool negated) const { return value_.root() && notDistributed(*value_.root(), negated, 0); }

 private:
  bool notDistributed(const ValueNode& n, bool negated, int depth) const {
    using Kind = ValueNode::Kind;
    if (depth > 12) return false;
    if (n.kind == Kind::Operator && n.text == "not" && n.operands.size() == 1) return notDistributed(operand(n, 0), !negated, depth + 1);
    if (n.kind == Kind::Operator && n.text == "and" && n.operands.size() == 2) {
      bool left = notDistributed(operand(n, 0), negated, depth + 1);
      bool right = notDistributed(operand(n, 1), negated, depth + 1);
      return negated ? left && right : left || right;  // not (a and b): either may be false
    }
    if (n.kind == Kind::OneOf && !n.operands.empty()) {
      for (size_t i = 0; i < n.operands.size(); ++i)
        if (!notDistributed(operand(n, i), negated, depth + 1)) return false;
      return true;
    }
    if (n.kind == Kind::Operator && n.operands.size() == 2) return comparison(n, negated);
    if (!negated) return false;
    if (n.kind == Kind::Call) return n.text == "torch.distributed.is_initialized" || n.text == "torch.distributed.is_available";
    return isDistributedFlag(n);
  }

  // `subject OP number`, either way round, as it holds (or not).
  bool comparison(const ValueNode& n, bool negated) const {
    static const std::set<std::pair<std::string, std::string>> kMirrored = {{"<", ">"}, {"<=", ">="}, {"==", "=="}, {"!=", "!="}};
    static const std::set<std::pair<std::string, std::string>> kNegated = {{"==", "!="}, {"<", ">="}, {">", "<="}};
    const ValueNode* subject = &operand(n, 0);
    const ValueNode* number = &operand(n, 1);
    std::string op = n.text;
    if (isNumber(*subject) && !isNumber(*number)) {
      std::swap(subject, number);
      for (const auto& [a, b] : kMirrored) {
        if (op == a) { op = b; break; }
        if (op == b) { op = a; break; }
      }
    }
    if (!isNumber(*number)) return false;
    if (negated) {
      std::string before = op;
      op.clear();
      for (const auto& [a, b] : kNegated) {
        if (before == a) op = b;
        else if (before == b) op = a;
      }
    }
    const std::string& k = number->text;
    if (isRank(*subject)) return (op == "==" && k == "-1") || (op == "<" && k == "0") || (op == "<=" && k == "-1");
    if (isWorldSize(*subject)) return (op == "==" && k == "1") || (op == "<=" && k == "1") || (op == "<" && k == "2");
    return false;
  }

  static bool isNumber(const ValueNode& n) {
    // `-1` is a unary operator the frontend keeps as written.
    bool literal = n.kind == ValueNode::Kind::Literal || (n.kind == ValueNode::Kind::Unknown && n.text.starts_with("-"));
    std::string digits = n.text.starts_with("-") ? n.text.substr(1) : n.text;
    return literal && !digits.empty() && std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); });
  }

  static std::string lastName(const ValueNode& n) {
    if (n.kind != ValueNode::Kind::Name && n.kind != ValueNode::Kind::Attribute) return "";
    return n.text.substr(n.text.rfind('.') + 1);
  }

  // A rank read from the launcher's environment or kept under a rank's name (`args.local_rank`).
  static bool isRank(const ValueNode& n) {
    if (n.kind == ValueNode::Kind::Environment) return isLocalRankVariable(n.text) || isGlobalRankVariable(n.text);
    std::string last = lastName(n);
    return last == "rank" || last == "local_rank" || last == "global_rank" || last == "RANK" || last == "LOCAL_RANK";
  }

  static bool isWorldSize(const ValueNode& n) {
    if (n.kind == ValueNode::Kind::Environment) return n.text == "WORLD_SIZE";
    std::string last = lastName(n);
    return last == "world_size" || last == "WORLD_SIZE";
  }

  static bool isDistributedFlag(const ValueNode& n) {
    std::string last = lastName(n);
    return last == "distributed" || last == "is_distributed" || last == "use_distributed" || last == "ddp" ||
           last == "use_ddp";
  }

  const ValueNode& operand(const ValueNode& n, size_t i) const { return value_.operand(n, i); }

  const TracedValue& value_;
};

// Whether an `if` around `call` in its function shows the process in no distributed job there:
// the condition of the arm it stands in holds, and those of the arms before it do not.
bool onNotDistributedPath(const SourceModel& model, const Call& call) {
  for (size_t depth = 0; depth < call.branches.size(); ++depth) {
    for (int index = 0; index <= call.branches[depth].index; ++index) {
      const Binding* condition = armCondition(model, call.functionId, call.branches, depth, index);
      if (!condition) continue;
      TracedValue value = traceBinding(model, *condition);
      if (NotDistributedCondition(value).shown(index < call.branches[depth].index)) return true;
    }
  }
  return false;
}

// Whether two values are written alike: the same kinds, texts and operands (`args.gpu is not None`).
bool writtenAlike(const SourceModel& model, int a, int b, int depth = 0) {
  if (a < 0 || b < 0 || depth > 8) return false;
  const ValueNode& x = model.values[static_cast<size_t>(a)];
  const ValueNode& y = model.values[static_cast<size_t>(b)];
  if (x.kind != y.kind || x.text != y.text || x.operands.size() != y.operands.size()) return false;
  for (size_t i = 0; i < x.operands.size(); ++i)
    if (!writtenAlike(model, x.operands[i], y.operands[i], depth + 1)) return false;
  return true;
}

// The names and attributes a test reads (`args.gpu` of `args.gpu is not None`), where it reads
// nothing else that may change between two readings: no call (`dist.is_initialized()` is changed by
// the init in the first arm), no `self.` or `cls.` attribute (two classes' objects). False otherwise.
bool plainReads(const SourceModel& model, int value, std::set<std::string>& reads, int depth = 0) {
  if (value < 0 || depth > 8) return false;
  const ValueNode& n = model.values[static_cast<size_t>(value)];
  using Kind = ValueNode::Kind;
  if (n.kind == Kind::Call || n.kind == Kind::Unknown) return false;
  if (n.kind == Kind::Attribute && (n.text.starts_with("self.") || n.text.starts_with("cls."))) return false;
  if (n.kind == Kind::Name || n.kind == Kind::Attribute) reads.insert(n.text);
  for (int operand : n.operands)
    if (!plainReads(model, operand, reads, depth + 1)) return false;
  return true;
}

// The terms a condition holds only where each holds: itself, or those of an `and`.
void termsOf(const SourceModel& model, int value, std::vector<int>& out, int depth = 0) {
  if (value < 0) return;
  const ValueNode& n = model.values[static_cast<size_t>(value)];
  if (n.kind == ValueNode::Kind::Operator && n.text == "and" && depth < 8) {
    for (int operand : n.operands) termsOf(model, operand, out, depth + 1);
    return;
  }
  out.push_back(value);
}

// Whether `a` stands in the first arm of an `if` whose condition holds only where a test holds
// (the test itself, or a term of an `and`), and `b` in a later arm of another `if` that makes that
// same test, written alike: the launcher's `if args.gpu is not None: set_device(args.gpu)` and,
// further down, `if args.gpu is not None: ... else: DDP(model)`. No run passes both, as long as
// what the test reads stays as it was: a test of plain names and attributes (plainReads) that the
// file binds nowhere between the two (in one function: no binding after the first test and before
// `b`; in two: only bindings in `b`'s function before its test, and only attributes, which keep
// their value from one function to another that is handed the object).
bool oppositeArmsOfOneTest(const SourceModel& model, const Call& a, const Call& b) {
  for (size_t db = 0; db < b.branches.size(); ++db) {
    if (b.branches[db].index == 0) continue;
    const Binding* test = armCondition(model, b.functionId, b.branches, db, 0);
    std::set<std::string> reads;
    if (!test || !plainReads(model, test->value, reads)) continue;
    bool sameFunction = a.functionId == b.functionId;
    if (!sameFunction && std::any_of(reads.begin(), reads.end(), [](const std::string& r) { return r.find('.') == std::string::npos; }))
      continue;
    for (size_t da = 0; da < a.branches.size(); ++da) {
      if (a.branches[da].index != 0 || a.branches[da].statement == b.branches[db].statement) continue;
      const Binding* held = armCondition(model, a.functionId, a.branches, da, 0);
      if (!held) continue;
      std::vector<int> terms;
      termsOf(model, held->value, terms);
      if (std::none_of(terms.begin(), terms.end(), [&](int term) { return writtenAlike(model, term, test->value); })) continue;
      bool rebound = std::any_of(model.bindings.begin(), model.bindings.end(), [&](const Binding& binding) {
        if (!reads.contains(binding.name)) return false;
        if (sameFunction)
          return binding.functionId == b.functionId && binding.where.line > held->where.line && binding.where.line < b.where.line;
        return !(binding.functionId == b.functionId && binding.where.line < test->where.line);
      });
      if (!rebound) return true;
    }
  }
  return false;
}

class MultiGpuProcessGroup final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    if (worldShownNotNccl(model)) return;
    bool distributedJob = false;
    for (const Call& call : model.calls) distributedJob |= call.qualifiedName.starts_with("torch.distributed.");
    for (const Call& call : model.calls) {
      const std::string& q = call.qualifiedName;
      if (isDdp(q)) checkDdp(model, call, out);
      else if (q.starts_with("torch.distributed.") && q.ends_with("_multigpu")) checkMultiGpu(model, call, out);
      else if (isDataParallel(q) && distributedJob && !onOtherBranchThanDistributed(model, call) &&
               !onNotDistributedPath(model, call)) {
        checkDataParallel(model, call, out);
      }
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

  // DataParallel in an arm of an `if` whose other arm initialises the process group: no run passes
  // both, so it runs in a process of no distributed job. Another arm's DDP alone is no evidence:
  // after an init_process_group that always runs (`if args.dp: DataParallel(...) else: DDP(...)`)
  // both arms run in a distributed job.
  static bool onOtherBranchThanDistributed(const SourceModel& model, const Call& dataParallel) {
    for (const Call& call : model.calls)
      if (isDistributed(call.qualifiedName, "init_process_group") && call.exclusiveWith(dataParallel)) return true;
    return false;
  }

  void checkDdp(const SourceModel& model, const Call& call, std::vector<Finding>& out) const {
    const Argument* ids = call.argument("device_ids", 1);
    bool noIds = !ids || ids->text == "None";
    if (noIds && checkDdpOverSeveralDevices(model, call, out)) return;
    if (!ids) return checkDdpWithoutDevice(model, call, out);
    Count count = countOf(model, call, *ids);
    if (!count.several()) return;
    out.push_back(finding(model, ids->where, "DistributedDataParallel with device_ids=" + ids->text + ", " +
                                                 described(count, "devices") + "; " + kWhy +
                                                 ". Pass one device (device_ids=[local_rank]) and run one process per GPU"));
  }

  // DDP(model) with no device_ids after model.cuda(), on a path where the process never picks its
  // GPU: every rank's model lands on cuda:0, or one process drives every visible GPU. A GPU picked
  // in another arm of an `if` (the launcher's `if args.gpu is not None:` branch), or in the first arm
  // of an `if` whose test another `if` repeats with the DDP call in its later arm, does not count.
  // Where the file initialises the process group itself, it shows the process's setup; where it
  // does not (a helper of another file does), that helper may select the GPU, which the file does
  // not show: not reported. A process shown to see one GPU on the path to the DDP call
  // (oneVisibleDeviceBefore: CUDA_VISIBLE_DEVICES=str(local_rank)) has selected it; one that sees
  // "0,1,2,3" has not.
  void checkDdpWithoutDevice(const SourceModel& model, const Call& ddp, std::vector<Finding>& out) const {
    if (oneVisibleDeviceBefore(model, ddp)) return;
    const Call* moved = nullptr;
    const Call* init = nullptr;
    for (const Call& call : model.calls) {
      if (call.exclusiveWith(ddp)) continue;
      if (selectsDevice(call) && !oppositeArmsOfOneTest(model, call, ddp)) return;
      if (!init && isDistributed(call.qualifiedName, "init_process_group")) init = &call;
      bool toDefaultCuda = call.spelling.ends_with(".cuda") && call.arguments.empty() && call.where.line <= ddp.where.line;
      if (toDefaultCuda && !moved) moved = &call;
    }
    if (!moved || !init) return;
    out.push_back(finding(model, ddp.where,
                          ddp.spelling + "() without device_ids wraps a model moved with " + moved->spelling +
                              "() (line " + std::to_string(moved->where.line) + "); this file initialises the "
                              "process group (line " + std::to_string(init->where.line) + ") and nothing in it "
                              "selects the process's GPU on this path (set_device, device_id=, CUDA_VISIBLE_DEVICES). "
                              "Processes that share a GPU fail under torch 2.15's NCCL backend (\"Duplicate GPU "
                              "detected\"); call torch.cuda.set_device(local_rank) first and pass device_ids=[local_rank]"));
  }

  // DDP with no device_ids (or None) after placements of modules or tensors on several explicit
  // GPUs on one path: a module spread over the process's GPUs (a pipeline within the process),
  // which DDP takes as a multi-device module. Reported at the DDP call, naming the placements. The
  // two placements stand in one function, in no arms that exclude each other: the DDP call's own
  // function (the module level for a DDP call there) before the call and in no arm that excludes
  // it, or a function that runs before it there (onPathBefore), such as a module's constructor
  // putting its layers on cuda:0 and cuda:1. Placements in different functions (a helper's
  // `torch.ones(1).to("cuda:1")` beside `model.to("cuda:0")`), in a function the DDP call's does not
  // call first, or after the DDP call, are not shown on its path.
  bool checkDdpOverSeveralDevices(const SourceModel& model, const Call& ddp, std::vector<Finding>& out) const {
    std::vector<std::pair<const Call*, int>> placed;  // a placement and its GPU index
    std::set<std::string_view> calledBefore = functionsCalledBefore(model, ddp);
    for (const Call& call : model.calls) {
      if (!isPlacement(call)) continue;
      if (call.functionId == ddp.functionId ? call.exclusiveWith(ddp) || call.where.line >= ddp.where.line
                                            : !onPathBefore(model, call.functionId, calledBefore))
        continue;
      if (std::optional<int> gpu = explicitGpu(model, call)) placed.emplace_back(&call, *gpu);
    }
    for (const Call& call : model.calls) {
      if (call.exclusiveWith(ddp) || call.loopDepth == 0) continue;
      auto [list, gpus] = placementOverList(model, call);
      if (!list) continue;
      out.push_back(finding(model, ddp.where,
                            ddp.spelling + "() without device_ids in a file that moves modules or tensors with " +
                                call.spelling + "() in a loop (line " + std::to_string(call.where.line) + ") over " +
                                list->name + ", a list of " + std::to_string(gpus) + " different GPUs (line " +
                                std::to_string(list->where.line) + "): a module spread over several GPUs of one process, "
                                "whose gradients one process group reduces; " + kWhy +
                                ". Give each process one GPU (one pipeline stage per process, or the whole model on its "
                                "GPU) and pass device_ids=[local_rank]"));
      return true;
    }
    for (size_t i = 0; i < placed.size(); ++i)
      for (size_t j = i + 1; j < placed.size(); ++j) {
        const auto& [a, gpuA] = placed[i];
        const auto& [b, gpuB] = placed[j];
        if (gpuA == gpuB || a->functionId != b->functionId || a->exclusiveWith(*b)) continue;
        out.push_back(finding(model, ddp.where,
                              ddp.spelling + "() without device_ids in a file that places modules or tensors on "
                              "cuda:" + std::to_string(gpuA) + " (" + a->spelling + "(), line " +
                              std::to_string(a->where.line) + ") and cuda:" + std::to_string(gpuB) + " (" + b->spelling +
                              "(), line " + std::to_string(b->where.line) + ") on the same path: a module spread over "
                              "several GPUs of one process, whose gradients one process group reduces; " + kWhy +
                              ". Give each process one GPU (one pipeline stage per process, or the whole model on its "
                              "GPU) and pass device_ids=[local_rank]"));
        return true;
      }
    return false;
  }

  // The names of the functions `ddp`'s function calls before it, in no arm that excludes it: the
  // last name of each callee (`helper`, `self.helper`). Read once per DDP call, not once per
  // placement: a large file has thousands of calls.
  static std::set<std::string_view> functionsCalledBefore(const SourceModel& model, const Call& ddp) {
    std::set<std::string_view> names;
    for (const Call& call : model.calls) {
      if (call.functionId != ddp.functionId || call.where.line > ddp.where.line || call.exclusiveWith(ddp)) continue;
      std::string_view callee = call.spelling;
      names.insert(callee.substr(callee.rfind('.') + 1));
    }
    return names;
  }

  // Whether function `functionId` runs before the DDP call on its path: a module's constructor
  // (`__init__`, which the file does not tie to its class: the model DDP wraps is made by one), or a
  // function the DDP call's function calls by name before the DDP call (functionsCalledBefore).
  static bool onPathBefore(const SourceModel& model, int functionId, const std::set<std::string_view>& calledBefore) {
    if (functionId < 0 || static_cast<size_t>(functionId) >= model.functions.size()) return false;
    const std::string& name = model.functions[static_cast<size_t>(functionId)];
    return name == "__init__" || calledBefore.contains(name);
  }

  static bool isPlacement(const Call& call) { return call.spelling.ends_with(".to") || call.spelling.ends_with(".cuda"); }

  // A `.to(x)` / `.cuda(x)` call whose device is an item of a list display of several different
  // explicit GPUs (`devices = ["cuda:0", "cuda:1"]`): `x` a loop target bound where a call
  // iterates the list (`for layer, x in zip(layers, devices)`, `enumerate(devices)`), or
  // `devices[i]`. The list's binding and how many GPUs it names; none otherwise.
  static std::pair<const Binding*, size_t> placementOverList(const SourceModel& model, const Call& call) {
    if (!isPlacement(call)) return {};
    const Argument* target = call.argument("device", 0);
    if (!target || target->value < 0) return {};
    const ValueNode& device = model.values[static_cast<size_t>(target->value)];
    auto listNamed = [&](const std::string& name) -> std::pair<const Binding*, size_t> {
      for (const Binding& b : model.bindings) {
        if (b.name != name || b.value < 0 || (b.functionId != call.functionId && b.functionId != -1)) continue;
        if (size_t gpus = distinctGpus(model, model.values[static_cast<size_t>(b.value)]); gpus > 1) return {&b, gpus};
      }
      return {};
    };
    if (device.kind == ValueNode::Kind::Item) {  // `devices[i]`
      const ValueNode& container = model.values[static_cast<size_t>(device.operands.front())];
      bool named = container.kind == ValueNode::Kind::Name || container.kind == ValueNode::Kind::Attribute;
      return named ? listNamed(container.text) : std::pair<const Binding*, size_t>{};
    }
    if (device.kind != ValueNode::Kind::Name) return {};
    for (const Binding& b : model.bindings) {
      // The loop target: bound to no value in the call's function, on a line that a call
      // iterating a list stands on.
      if (b.name != device.text || b.value >= 0 || b.functionId != call.functionId || b.where.line > call.where.line) continue;
      for (const Call& iterating : model.calls) {
        if (iterating.where.line != b.where.line || iterating.functionId != call.functionId) continue;
        for (const Argument& a : iterating.arguments)
          if (auto found = listNamed(a.text); found.first) return found;
      }
    }
    return {};
  }

  // How many different explicit GPUs a list display names.
  static size_t distinctGpus(const SourceModel& model, const ValueNode& list) {
    if (list.kind != ValueNode::Kind::Sequence) return 0;
    TracedValue items;
    std::set<int> gpus;
    for (int operand : list.operands) {
      const ValueNode& item = model.values[static_cast<size_t>(operand)];
      items.nodes.assign(1, item);
      // torch.device("cuda", 1): its operands are read from the model's values.
      if (item.kind == ValueNode::Kind::Call) {
        items.nodes.clear();
        items.nodes.push_back(item);
        for (size_t i = 0; i < item.operands.size(); ++i) {
          items.nodes.push_back(model.values[static_cast<size_t>(item.operands[i])]);
          items.nodes.front().operands[i] = static_cast<int>(i + 1);
        }
      }
      if (std::optional<int> gpu = gpuOf(items, items.nodes.front(), true)) gpus.insert(*gpu);
    }
    return gpus.size();
  }

  // The GPU index a `.to(...)` / `.cuda(...)` call names explicitly: "cuda:1", 1,
  // torch.device("cuda:1"), torch.device("cuda", 1), followed through assignments; none otherwise.
  static std::optional<int> explicitGpu(const SourceModel& model, const Call& call) {
    if (!isPlacement(call)) return std::nullopt;
    bool to = call.spelling.ends_with(".to");
    const Argument* target = call.argument("device", 0);
    if (!target) return std::nullopt;
    TracedValue value = traceValue(model, call, *target);
    if (!value.root()) return std::nullopt;
    return gpuOf(value, *value.root(), !to);
  }

  static std::optional<int> gpuOf(const TracedValue& value, const ValueNode& n, bool bareIndex) {
    using Kind = ValueNode::Kind;
    auto digits = [](const std::string& t) {
      return !t.empty() && t.size() < 4 && std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c); });
    };
    if (n.kind == Kind::Literal && n.text.starts_with("cuda:") && digits(n.text.substr(5))) return std::stoi(n.text.substr(5));
    if (n.kind == Kind::Literal && bareIndex && digits(n.text)) return std::stoi(n.text);
    if (n.kind != Kind::Call || n.text != "torch.device" || n.operands.empty()) return std::nullopt;
    const ValueNode& first = value.operand(n, 0);
    if (n.operands.size() == 1) return gpuOf(value, first, false);
    if (first.kind != Kind::Literal || first.text != "cuda") return std::nullopt;
    return gpuOf(value, value.operand(n, 1), true);
  }

  static bool selectsDevice(const Call& call) {
    const std::string& q = call.qualifiedName;
    if (selectsCudaDevice(call) || q == "torch.cuda.device") return true;
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
                   "range(torch.cuda.device_count()), a comprehension over one or a list appended to in a `for` loop over one, followed through assignments), DataParallel without device_ids "
                   "(not where it stands in another arm of an `if` than the file's init_process_group (another arm's "
                   "DDP alone is no evidence: an init_process_group before the `if` makes both arms distributed), nor in an "
                   "arm whose condition holds only outside a distributed job (a rank read from the environment or "
                   "args that is -1: `RANK == -1`, `args.local_rank == -1`, `rank <= -1`, `not rank >= 0`; a world size of 1; `not "
                   "dist.is_initialized()`; `not args.distributed`), or that follows an arm whose condition holds in "
                   "every distributed job (`if args.distributed: ... else:`): the non-distributed branch), tensors on different explicit GPUs, DDP without device_ids in a file that "
                   "places modules or tensors on two different explicit GPUs in one function on one path (the DDP "
                   "call's own function before the call, a module's constructor, or a function the DDP call's "
                   "function calls before it; not a placement in one function and one in another, nor one after the "
                   "DDP call), or moves them in a loop to "
                   "the items of a list of several explicit GPUs (a module spread over the process's GPUs), or DDP without device_ids after a bare .cuda() on a path that selects no GPU "
                   "(set_device, device_id=, CUDA_VISIBLE_DEVICES set to one device before it, such as "
                   "str(local_rank); \"0,1,2,3\" selects none; a selection under a test that an `if` around the DDP "
                   "call makes again, written alike, with the DDP call in its `else` (`if args.gpu is not None:`), is "
                   "not on that path) in a file that initialises the process group itself "
                   "(a setup in another file may select the GPU). A list it cannot count is not reported, nor is a "
                   "file whose every init_process_group names a backend without NCCL (\"gloo\") and that calls no other "
                   "initialiser (deepspeed.init_distributed() and the like); a backend that is a parameter's string "
                   "default names it only where no call in the linted tree passes that argument another value.",
      .example = "model = DistributedDataParallel(model, device_ids=[0, 1])",
      .fix = "Run one process per GPU (torchrun --nproc-per-node) and give each process group one device.",
      .fixSafety = FixSafety::None,
      .languages = {Language::Python},
      .enabledByDefault = true,
      // torch's DDP is reached through torch.nn.parallel or torch.nn, under any alias of theirs
      // (`tnn.parallel`, `from torch.nn import (parallel)`): a file that names neither names
      // another library's class of that name (Megatron-LM's own DistributedDataParallel).
      .triggers = {{.anyOf = {"DistributedDataParallel"},
                    .andAnyOf = {"*nn.parallel*", "torch.nn import", "*nn.DistributedDataParallel"}},
                   {.anyOf = {"DataParallel", "*_multigpu", "*cuda:#", ".cuda(#", "\"cuda\", #", "\"cuda\",#",
                              "'cuda', #", "'cuda',#"},
                    .module = "torch.distributed"}},
      .contextWords = {"set_device*", "set_device_index", "device_id", ".cuda(", "cuda.device", "init_process_group", "init_dist*",
                       "CUDA_VISIBLE_DEVICES"},
  };
};

}  // namespace

const Rule& multiGpuProcessGroupRule() {
  static const MultiGpuProcessGroup rule;
  return rule;
}

}  // namespace nccl_migrate::lint
