// NM502 p2p-on-eager-backend: point-to-point loops (pipeline stages) on the default NCCL backend.
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nccl_migrate/lint/rule.h"
#include "python/python_frontend.h"
#include "registry.h"
#include "torch_names.h"

namespace nccl_migrate::lint {
namespace {

// Where the file shows a transferred tensor to live.
enum class Device { Cpu, Cuda, NotShown };

// A call that issues one transfer by itself. batch_isend_irecv (and its P2POps) is not one: torch's
// legacy ProcessGroupNCCL already ran a batch on the group's collective communicator (in
// pointToPoint, `batchP2P = ncclActiveGroupCounter_ > 0` selects the device's key, and only a
// single P2P gets a two-rank communicator), and nccl-lazy keeps a batch on its primary, so a batch
// behaves the same before and after torch 2.15.
bool issuesTransfer(const std::string& q) {
  for (const char* name : {"send", "recv", "isend", "irecv"})
    if (isDistributed(q, name)) return true;
  return false;
}

// A call whose tensor tells what a group carries: a transfer, or a P2POp describing one.
bool isPointToPoint(const std::string& q) { return issuesTransfer(q) || isDistributed(q, "P2POp"); }

// Whether `transfer` stands in the body of `with ..._coalescing_manager(...)`, where it joins a
// batch as batch_isend_irecv's P2POps do. The model keeps no `with` blocks: the body is read as the
// lines after the manager's call, in its function, indented past the `with` (the manager's column
// less "with "), up to the first call there that is not.
bool inCoalescingBlock(const SourceModel& model, const Call& transfer) {
  for (const Call& manager : model.calls) {
    if (!manager.qualifiedName.ends_with("_coalescing_manager") || manager.functionId != transfer.functionId ||
        manager.where.line >= transfer.where.line)
      continue;
    int withColumn = manager.where.column - 5;
    bool ended = false;
    for (const Call& call : model.calls)
      if (call.functionId == manager.functionId && call.where.line > manager.where.line &&
          call.where.line <= transfer.where.line && call.where.column <= withColumn)
        ended = true;
    if (!ended) return true;
  }
  return false;
}

// The argument holding the tensor a call sends or receives: `dist.send(t, dst)`, `P2POp(op, t, peer)`.
const Argument* transferredTensor(const Call& call) {
  if (isDistributed(call.qualifiedName, "P2POp")) return call.argument("tensor", 1);
  if (isDistributed(call.qualifiedName, "batch_isend_irecv")) return nullptr;
  return call.argument("tensor", 0);
}

// torch's factories that make a tensor on the default device unless given `device=`.
bool isDefaultDeviceFactory(const std::string& callee) {
  for (const char* name : {"ones", "zeros", "empty", "full", "rand", "randn", "randint", "arange", "tensor"})
    if (callee == std::string("torch.") + name) return true;
  return false;
}

std::string_view lastName(std::string_view dotted) {
  size_t dot = dotted.rfind('.');
  return dot == std::string_view::npos ? dotted : dotted.substr(dot + 1);
}

// Whether the traced value is a tensor on the CPU on every path the file shows: `t.cpu()`,
// `t.to("cpu")`, a factory of torch's given `device="cpu"`, or one given no device in a file that
// does not change the default device. NCCL takes CUDA tensors only, so such a transfer runs on a CPU backend (gloo), whatever
// the group.
bool onCpu(const TracedValue& value, const ValueNode& n, bool defaultDeviceIsCpu, int depth = 0) {
  using Kind = ValueNode::Kind;
  if (depth > 8) return false;
  if (n.kind == Kind::OneOf) {
    for (size_t i = 0; i < n.operands.size(); ++i)
      if (!onCpu(value, value.operand(n, i), defaultDeviceIsCpu, depth + 1)) return false;
    return !n.operands.empty();
  }
  if (n.kind != Kind::Call) return false;
  bool method = n.text.find('.') != std::string::npos;
  if (method && lastName(n.text) == "cpu" && n.operands.empty()) return true;
  if (method && lastName(n.text) == "to" && !n.operands.empty()) {
    const ValueNode& target = value.operand(n, 0);
    return target.kind == Kind::Literal && target.text == "cpu" && (target.keyword.empty() || target.keyword == "device");
  }
  if (!isDefaultDeviceFactory(n.text)) return false;
  for (size_t i = 0; i < n.operands.size(); ++i) {
    const ValueNode& device = value.operand(n, i);
    if (device.keyword != "device") continue;
    // `device="cpu"` or `torch.device("cpu")`: the CPU whatever the default device.
    if (device.kind == Kind::Literal) return device.text == "cpu";
    return device.kind == Kind::Call && device.text == "torch.device" && !device.operands.empty() &&
           value.operand(device, 0).kind == Kind::Literal && value.operand(device, 0).text == "cpu";
  }
  return defaultDeviceIsCpu;
}

// Whether a device argument names a CUDA device: "cuda", "cuda:N", f"cuda:{i}",
// torch.device("cuda", ...), torch.cuda.current_device().
bool cudaDevice(const TracedValue& value, const ValueNode& n) {
  using Kind = ValueNode::Kind;
  if (n.kind == Kind::Literal || n.kind == Kind::Format) return n.text == "cuda" || n.text.starts_with("cuda:");
  if (n.kind != Kind::Call) return false;
  if (n.text == "torch.cuda.current_device") return true;
  return n.text == "torch.device" && !n.operands.empty() && cudaDevice(value, value.operand(n, 0));
}

// Whether the traced value is a CUDA tensor on every path the file shows: `t.cuda()`,
// `t.to("cuda")`, or a factory of torch's given a CUDA `device=`.
bool onCuda(const TracedValue& value, const ValueNode& n, int depth = 0) {
  using Kind = ValueNode::Kind;
  if (depth > 8) return false;
  if (n.kind == Kind::OneOf) {
    for (size_t i = 0; i < n.operands.size(); ++i)
      if (!onCuda(value, value.operand(n, i), depth + 1)) return false;
    return !n.operands.empty();
  }
  if (n.kind != Kind::Call) return false;
  bool method = n.text.find('.') != std::string::npos;
  if (method && lastName(n.text) == "cuda") return true;
  if (method && lastName(n.text) == "to" && !n.operands.empty()) {
    const ValueNode& target = value.operand(n, 0);
    return (target.keyword.empty() || target.keyword == "device") && cudaDevice(value, target);
  }
  if (!isDefaultDeviceFactory(n.text)) return false;
  for (size_t i = 0; i < n.operands.size(); ++i)
    if (value.operand(n, i).keyword == "device") return cudaDevice(value, value.operand(n, i));
  return false;
}

// The group a transfer runs on, as written: its `group` argument, "" for the default group.
std::string groupOf(const Call& call) {
  size_t position = isDistributed(call.qualifiedName, "P2POp") ? 3 : 2;
  const Argument* group = call.argument("group", position);
  return !group || group->text == "None" ? "" : group->text;
}

// Whether a backend value the file shows may select torch 2.15's eager NCCL for CUDA tensors:
// "nccl" alone or a device map whose entry is NCCL ("cpu:gloo,cuda:nccl", written plainly or as an
// f-string), as the shim's parser reads it; one of several values the file shows is enough.
bool mayCarryCudaOnNccl(const SourceModel& model, const Call& call, const Argument& backend) {
  if (backend.stringValue) return selectsEagerNccl(*backend.stringValue);
  TracedValue value = traceValue(model, call, backend);
  const ValueNode* root = value.root();
  if (!root) return false;
  std::vector<const ValueNode*> choices{root};
  if (root->kind == ValueNode::Kind::OneOf) {
    choices.clear();
    for (size_t i = 0; i < root->operands.size(); ++i) choices.push_back(&value.operand(*root, i));
  }
  for (const ValueNode* choice : choices)
    if (choice->kind == ValueNode::Kind::Literal && selectsEagerNccl(choice->text)) return true;
  return false;
}

// Whether the file makes a group whose CUDA tensors go to NCCL while its CPU tensors may go to a
// CPU backend: init_process_group given such a backend, or none (torch's default device map sends
// CUDA to nccl), or a creator given one. Which group a transfer's argument names is not known here,
// so such a group anywhere in the file means that CPU tensors shown on a group tell nothing of its
// other transfers.
bool makesGroupWithCudaOnNccl(const SourceModel& model) {
  for (const Call& call : model.calls) {
    const std::string& q = call.qualifiedName;
    const Argument* backend = nullptr;
    if (isDistributed(q, "init_process_group")) {
      backend = call.argument("backend", 0);
      if (!backend) return true;
    } else if (isDistributed(q, "new_group")) {
      backend = call.argument("backend", 2);
    } else if (isDistributed(q, "new_subgroups") || isDistributed(q, "new_subgroups_by_enumeration") ||
               isDistributed(q, "split_group")) {
      backend = call.keyword("backend");
    }
    if (backend && mayCarryCudaOnNccl(model, call, *backend)) return true;
  }
  return false;
}

// `torch.set_default_device("cuda")` (or the older default tensor type) makes factories' tensors
// CUDA tensors: a file that calls either is not read as making CPU tensors.
bool changesDefaultDevice(const SourceModel& model) {
  for (const Call& call : model.calls)
    if (call.qualifiedName == "torch.set_default_device" || call.qualifiedName == "torch.set_default_tensor_type") return true;
  return false;
}

// A backend value that is not eager NCCL's: a string such as "gloo", or torch's constant for one
// (`dist.Backend.GLOO`, `Backend.MPI`).
bool namesOtherBackend(const ValueNode& backend) {
  if (backend.kind == ValueNode::Kind::Literal) return !selectsEagerNccl(backend.text);
  if (backend.kind != ValueNode::Kind::Attribute) return false;
  std::string_view constant = lastName(backend.text);
  return backend.text.find("Backend.") != std::string::npos && (constant == "GLOO" || constant == "MPI" || constant == "UCC");
}

// How a name that may hold a group is known: a local by its function (`group@3`; module-level
// names `@-1`), an attribute (`self.cpu_group`) by its text in the whole file.
std::string groupNameKey(const std::string& name, int functionId) {
  return name.find('.') != std::string::npos ? name : name + "@" + std::to_string(functionId);
}

// Whether a traced value (in function `functionId`) is a group made with a backend that is not
// eager NCCL, on every path (`new_group(ranks, backend="gloo")`), or a name or attribute `others`
// holds such a group in.
bool otherBackendGroup(const TracedValue& value, const ValueNode& n, const std::set<std::string>& others, int functionId) {
  using Kind = ValueNode::Kind;
  if (n.kind == Kind::OneOf) {
    for (size_t i = 0; i < n.operands.size(); ++i)
      if (!otherBackendGroup(value, value.operand(n, i), others, functionId)) return false;
    return !n.operands.empty();
  }
  if (n.kind == Kind::Attribute) return others.contains(n.text);
  if (n.kind == Kind::Name) return others.contains(groupNameKey(n.text, functionId)) || others.contains(groupNameKey(n.text, -1));
  if (n.kind != Kind::Call) return false;
  if (!isDistributed(n.text, "new_group") && !isDistributed(n.text, "split_group") &&
      !isDistributed(n.text, "_new_process_group_helper"))
    return false;
  for (size_t i = 0; i < n.operands.size(); ++i)
    if (value.operand(n, i).keyword == "backend") return namesOtherBackend(value.operand(n, i));
  return false;
}

// The names and attributes the file keeps a group of another backend in: `cpu_group =
// new_group(ranks, backend="gloo")` in its function, then `self.cpu_group = cpu_group` in a
// constructor, so that another method's `group=self.cpu_group` (or a local copy of it) is that
// group. An attribute counts only where every binding of it in the file is such a group (another
// class's `self.pg` of the same text may be NCCL's); a local only in its own function.
std::set<std::string> otherBackendGroupNames(const SourceModel& model) {
  std::set<std::string> names;
  auto other = [&](const Binding& b) {
    TracedValue value = traceBinding(model, b);
    return value.root() && otherBackendGroup(value, *value.root(), names, b.functionId);
  };
  for (bool grew = true; grew;) {
    grew = false;
    for (const Binding& b : model.bindings)
      if (!b.name.empty() && !names.contains(groupNameKey(b.name, b.functionId)) && other(b))
        grew = names.insert(groupNameKey(b.name, b.functionId)).second || grew;
  }
  std::set<std::string> mixed;  // attributes bound to something else too
  for (const Binding& b : model.bindings)
    if (b.name.find('.') != std::string::npos && names.contains(b.name) && !other(b)) mixed.insert(b.name);
  for (const std::string& name : mixed) names.erase(name);
  return names;
}

// Whether the group a transfer names is one the file shows made with a backend that is not eager
// NCCL: its transfers never reach NCCL.
bool onOtherBackendGroup(const SourceModel& model, const Call& call, const std::set<std::string>& others) {
  size_t position = isDistributed(call.qualifiedName, "P2POp") ? 3 : 2;
  const Argument* group = call.argument("group", position);
  if (!group) return false;
  TracedValue value = traceValue(model, call, *group);
  return value.root() && otherBackendGroup(value, *value.root(), others, call.functionId);
}

// `dist.get_backend(group)`: torch's answer for a group's backend. Only a positive test of another
// backend shows a transfer off NCCL: torch 2.15 answers "undefined" for a world made with no backend,
// the whole device map for "cpu:gloo,cuda:nccl", and a group's name() is "nccl2" on the rewritten
// backend, so `!= "nccl"` (or an arm after `== "nccl"`) holds on NCCL too.
bool isGetBackend(const ValueNode& n) {
  return n.kind == ValueNode::Kind::Call && lastName(n.text) == "get_backend" && n.operands.size() <= 1;
}

// The group a get_backend query asks about, as written (empty: the default group).
std::string queriedGroup(const TracedValue& value, const ValueNode& query) {
  return query.operands.empty() ? "" : value.operand(query, 0).text;
}

// Whether a comparison holds only where the backend of group `group` (as the transfer writes it;
// empty: the default group) is another than eager NCCL's: `get_backend(group) == "gloo"`, or
// `in ("gloo", "mpi")`, either way round.
bool testsOtherBackend(const TracedValue& value, const ValueNode& n, const std::string& group) {
  if (n.kind != ValueNode::Kind::Operator || n.operands.size() != 2 || (n.text != "==" && n.text != "in")) return false;
  const ValueNode* query = &value.operand(n, 0);
  const ValueNode* other = &value.operand(n, 1);
  if (!isGetBackend(*query) && n.text == "==") std::swap(query, other);
  if (!isGetBackend(*query) || queriedGroup(value, *query) != group) return false;
  if (n.text == "==") return namesOtherBackend(*other);
  if (other->kind != ValueNode::Kind::Sequence || other->operands.empty()) return false;
  for (size_t i = 0; i < other->operands.size(); ++i)
    if (!namesOtherBackend(value.operand(*other, i))) return false;
  return true;
}

// Whether an arm's condition holds only where such a test holds: the test, or a term of `and`.
bool holdsOffNccl(const TracedValue& value, const ValueNode& n, const std::string& group) {
  if (n.kind == ValueNode::Kind::Operator && n.text == "and") {
    for (size_t i = 0; i < n.operands.size(); ++i)
      if (holdsOffNccl(value, value.operand(n, i), group)) return true;
    return false;
  }
  return testsOtherBackend(value, n, group);
}

// Whether a transfer stands in an arm of an `if` that runs only where its group's backend is
// another than eager NCCL's (`if dist.get_backend(group) == "gloo":`, an all-to-all's fallback of
// single transfers). The query must name the transfer's group as the transfer writes it.
bool onOtherBackendArm(const SourceModel& model, const Call& call) {
  size_t position = isDistributed(call.qualifiedName, "P2POp") ? 3 : 2;
  const Argument* groupArgument = call.argument("group", position);
  std::string group = groupArgument ? groupArgument->text : "";
  for (size_t depth = 0; depth < call.branches.size(); ++depth) {
    const Binding* condition = armCondition(model, call.functionId, call.branches, depth, call.branches[depth].index);
    if (!condition) continue;
    TracedValue value = traceBinding(model, *condition);
    if (value.root() && holdsOffNccl(value, *value.root(), group)) return true;
  }
  return false;
}

class P2pOnEagerBackend final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    // A file that already names nccl-lazy has chosen its P2P backend; one whose every
    // init_process_group names a world without NCCL (and that calls no other initialiser) sends on
    // that world. A "gloo" elsewhere (a comparison, a parameter's default its callers override)
    // decides nothing: a transfer on a group the file makes with gloo is left out below.
    for (const StringLiteral& s : model.strings) {
      if (s.value.find("nccl-lazy") != std::string::npos) return;
    }
    if (worldShownNotNccl(model)) return;
    bool defaultDeviceIsCpu = !changesDefaultDevice(model);
    // What the file shows each group carrying. A group the file sends or receives CPU tensors on
    // has a CPU backend for its point-to-point traffic (NCCL takes CUDA tensors only); unless the
    // file also shows a CUDA tensor on a group, or makes a group whose CUDA tensors go to NCCL
    // beside a CPU backend ("cpu:gloo,cuda:nccl"), that group's transfers of tensors the file does
    // not show (a queue's, a parameter's) are not known to reach NCCL, so they are not reported.
    // Groups are told apart by their argument's text only, and different texts may name one group
    // (`pg` and `self.pg`, a parameter holding either): a CUDA tensor on any group counts against
    // every group, and CPU tensors count only for a transfer whose group is written the same.
    std::map<const Call*, Device> devices;
    std::set<std::string> cpuGroups;
    bool cudaShown = false;
    for (const Call& call : model.calls) {
      const Argument* tensor = isPointToPoint(call.qualifiedName) ? transferredTensor(call) : nullptr;
      if (!tensor) continue;
      TracedValue value = traceValue(model, call, *tensor);
      if (!value.root()) continue;
      Device device = onCpu(value, *value.root(), defaultDeviceIsCpu) ? Device::Cpu
                      : onCuda(value, *value.root())                  ? Device::Cuda
                                                                       : Device::NotShown;
      devices[&call] = device;
      if (device == Device::Cpu) cpuGroups.insert(groupOf(call));
      if (device == Device::Cuda) cudaShown = true;
    }
    bool unshownMayBeNccl = cudaShown || makesGroupWithCudaOnNccl(model);
    std::set<std::string> otherGroups = otherBackendGroupNames(model);
    // Whether the file shows a transfer's tensor off NCCL: on the CPU, or not shown on a group the
    // file shows carrying CPU tensors only.
    auto offNccl = [&](Device device, const std::string& group) {
      return device == Device::Cpu || (device == Device::NotShown && cpuGroups.contains(group) && !unshownMayBeNccl);
    };
    // Each call that issues a transfer by itself is its own site: in a loop, or in a function the
    // project calls in a loop. Batched transfers (batch_isend_irecv, a coalescing block) ran on the
    // group's communicator before torch 2.15 too and are not reported.
    for (const Call& call : model.calls) {
      if (!issuesTransfer(call.qualifiedName)) continue;
      bool inLoop = call.loopDepth > 0;
      if (!inLoop && call.calledInLoopAt.empty()) continue;
      if (auto device = devices.find(&call); device != devices.end() && offNccl(device->second, groupOf(call))) continue;
      if (inCoalescingBlock(model, call) || onOtherBackendGroup(model, call, otherGroups) || onOtherBackendArm(model, call))
        continue;
      std::string where = inLoop ? "() in a loop" : "() in " + call.function + "(), " + call.calledInLoopAt;
      out.push_back(finding(model, call.where,
                            call.spelling + where + ": torch 2.15's NCCL backend runs send/recv on the group's "
                            "one communicator, so transfers to different peers do not overlap; for a pipeline's "
                            "group, consider backend=\"nccl-lazy\" (per-peer communicators, created lazily)"));
    }
  }

 private:
  RuleInfo info_{
      .code = "NM502",
      .slug = "p2p-on-eager-backend",
      .summary = "Point-to-point loops (pipeline stages) on the default NCCL backend",
      .rationale = "The rewritten backend runs collectives and send/recv on one communicator per group. The legacy "
                   "backend created a 2-rank communicator per peer pair for a single send/recv, so P2P to different "
                   "peers could overlap. Batched P2P is unchanged: the legacy ProcessGroupNCCL::pointToPoint already "
                   "ran a batch on the group's communicator (`bool batchP2P = ncclActiveGroupCounter_ > 0;` selects "
                   "getKeyFromDevice for a batch, getKeySendRecv only for a single P2P), and nccl-lazy keeps batched "
                   "P2P on its primary communicator, so batch_isend_irecv, its P2POps and transfers inside "
                   "`with _coalescing_manager(...)` are never reported. "
                   "PyTorch's pipelining code warns \"Pipeline parallelism is using an eager NCCL communicator. "
                   "Consider creating its process group with backend=\"nccl-lazy\"\". Each call that issues a "
                   "single transfer (send, recv, isend, irecv) in a loop, or in a function the project calls in a loop, "
                   "is reported at its own line; so is one in a model's forward or backward, or in a function one "
                   "calls, as torch runs those once per step (a method of that name of a class with a base: "
                   "nn.Module's subclasses and autograd.Function's, whose base is often the project's own or an "
                   "installed class, so which base is not checked). The project's calls are followed through "
                   "objects whose class it shows, locals included (`backend = A(...) if c else B(...)`, then "
                   "`self.backend = backend`), a static factory method that returns one class or another "
                   "(`Executor.build(args)`), an object kept on a registry class (a capitalised name: "
                   "`Backend.executor = executor`, set in one function of the module and called in another; a "
                   "classmethod's `cls.x` is its own class's), methods their classes inherit from "
                   "the project's classes or override, and "
                   "tables of an object's methods (`self.funcs[\"send\"] = self.isend`, called as "
                   "`self.backend.funcs[name](...)`). NCCL takes CUDA tensors "
                   "only: a transfer of a tensor the file shows on the CPU (t.cpu(), t.to(\"cpu\"), a torch factory "
                   "given device=\"cpu\", or no device) is not reported, nor is one whose tensor the file does not show (a queue's, a "
                   "parameter's) on a group the file shows carrying CPU tensors, when the file shows no CUDA tensor on "
                   "any group and makes no group whose CUDA tensors go to NCCL (init_process_group with no backend "
                   "or a device map such as \"cpu:gloo,cuda:nccl\"): that group's point-to-point traffic is not "
                   "shown to reach NCCL. Groups are told apart by how their argument is written, and `pg` and "
                   "`self.pg` may be one group, so a CUDA tensor on any group counts against all of them. Not "
                   "reported either: a transfer on a group the file shows made with a backend other than NCCL "
                   "(`pg = new_group(ranks, backend=\"gloo\")`, or dist.Backend.GLOO), kept in a local of the "
                   "transfer's function or the module, or in an attribute every binding of which in the file is "
                   "such a group (`self.cpu_group = cpu_group` in a constructor, then `group=self.cpu_group` in a "
                   "method), a file whose every init_process_group names a world "
                   "without NCCL and that calls no other initialiser, a module that imports torch_npu at module "
                   "level (it runs only on Ascend NPUs, HCCL's), and a file or a caller's file that names "
                   "nccl-lazy. So does an arm of an `if` that runs only where the transfer's group has another "
                   "backend by torch's answer: `dist.get_backend(group) == \"gloo\"` (or `in` a list of backends "
                   "without NCCL), alone or as a term of `and`, for the group the transfer names (a gloo fallback of an "
                   "all-to-all). `!= \"nccl\"` is no such test: torch 2.15 answers \"undefined\" for a world made "
                   "without a backend, a device map (\"cpu:gloo,cuda:nccl\") for a group made with one, and a "
                   "group's name() is \"nccl2\". Any other \"gloo\" (a comparison with the run's backend, a parameter's default its "
                   "callers override) decides nothing.",
      .example = "for step in range(n):\n    dist.send(activations, dst=next_stage)",
      .fix = "Create the pipeline's group with new_group(ranks, backend=\"nccl-lazy\", use_local_synchronization=True).",
      .fixSafety = FixSafety::None,
      .languages = {Language::Python},
      .enabledByDefault = true,
      .triggers = {{.anyOf = {"send(", "recv(", "isend(", "irecv("},
                    .module = "torch.distributed"}},
      // A group made with another backend is read where it is made, in any function: its backend's
      // words bring that function to the parse.
      .contextWords = {"nccl-lazy", "init_process_group", "\"gloo\"", "'gloo'", "GLOO"},
  };
};

}  // namespace

const Rule& p2pOnEagerBackendRule() {
  static const P2pOnEagerBackend rule;
  return rule;
}

}  // namespace nccl_migrate::lint
