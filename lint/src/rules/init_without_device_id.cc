// NM102 init-without-device-id: an NCCL world initialised without device_id in a process whose
// GPU selection the file shows not to come from its local rank (the global rank, a constant).
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nccl_migrate/lint/rule.h"
#include "python/python_frontend.h"
#include "registry.h"
#include "torch_names.h"

namespace nccl_migrate::lint {
namespace {


// What a traced device value shows about the GPU it picks, next to the one torch 2.15's NCCL
// backend binds when init_process_group gets no device_id: cuda:(global rank % device_count())
// (ProcessGroupNCCL::setBoundDeviceId; ../reference: "deterministic group-rank fallback").
// AsInferred is that very index; LocalRank equals it under the usual launch (as many ranks per
// node as it has GPUs, numbered node by node); GlobalRank (unreduced, or modulo something else)
// and Constant equal it only under a condition the code does not show, which the finding names.
// Multiple (`x * n`, `x *= n`: a multiple of n, whatever x is) equals it on every rank only where
// n is 1 or no rank binds cuda:1. Listed (`gpus[rank]`: an item of a list of GPUs the job is given,
// picked by an index the reader knows) equals it only where the list holds, at each rank's place,
// that rank's bound index; a list shown to hold 0, 1, 2, ... in order (`list(range(n))`) is no list
// of choices, and its item is the index. Unknown (a parameter, a config object's attribute set in
// another function, a function the file does not define, an item picked by an index not read) is
// no evidence.
struct Evidence {
  enum class Source { LocalRank, AsInferred, GlobalRank, Constant, Option, Multiple, Listed, Unknown };
  Source source = Source::Unknown;
  std::string shown;    // the index as read: "RANK % 4", "0", "cfg.device_id * num_pipeline_devices"
  std::string divisor;  // for GlobalRank: what the rank is taken modulo ("" when it is not); for
                        // Multiple: the multiplier n
  // Another file's function the index came through, and what it returns: "mypkg.utils.get_rank
  // (defined in another file) returns torch.distributed.get_rank() or 0"; empty when none.
  std::string via;
  std::string option;  // for Option: the option as the user writes it ("--gpu")
};

bool digitsOnly(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= '0' && c <= '9'; });
}

std::string lastName(const std::string& dotted) { return dotted.substr(dotted.rfind('.') + 1); }

// Whether the evidence shows a device other than the one torch binds (on some rank).
bool showsOtherDevice(const Evidence& e) {
  return e.source == Evidence::Source::GlobalRank || e.source == Evidence::Source::Constant ||
         e.source == Evidence::Source::Option || e.source == Evidence::Source::Multiple ||
         e.source == Evidence::Source::Listed;
}

// The declaration of the command-line option an attribute reads, and the option as the user
// writes it ("--gpu"): `args.gpu` where `args` is what `parser.parse_args()` returns somewhere in the
// file and the file declares `add_argument(..., "--gpu", ...)` (or names it with dest=). Null where
// it declares none of that name, where the object is another (`self.gpu`), or where the file sets
// the attribute itself to anything but a parameter passed on (`args.gpu = int(os.environ[...])`:
// the option's value is then not what is read).
std::pair<const Call*, std::string> optionDeclared(const SourceModel& model, const std::string& attribute) {
  size_t dot = attribute.rfind('.');
  if (dot == std::string::npos) return {nullptr, ""};
  std::string head = attribute.substr(0, dot), dest = attribute.substr(dot + 1);
  if (head.find('.') != std::string::npos || head == "self" || head == "cls") return {nullptr, ""};
  bool parsed = false;
  for (const Binding& b : model.bindings) {
    if (b.value < 0) continue;
    const ValueNode& v = model.values[static_cast<size_t>(b.value)];
    if (b.name == head && v.kind == ValueNode::Kind::Call && lastName(v.text) == "parse_args") parsed = true;
    if (b.name == attribute && v.kind != ValueNode::Kind::Name) return {nullptr, ""};
  }
  if (!parsed) return {nullptr, ""};
  for (const Call& c : model.calls) {
    if (lastName(c.spelling) != "add_argument") continue;
    std::string flag;
    for (const Argument& a : c.arguments)
      if (a.keyword.empty() && a.stringValue && a.stringValue->starts_with("--")) {
        flag = *a.stringValue;
        break;
      }
    if (flag.empty()) continue;
    std::string named = flag.substr(2);
    std::replace(named.begin(), named.end(), '-', '_');
    if (const Argument* d = c.keyword("dest"); d && d->stringValue) named = *d->stringValue;
    if (named == dest) return {&c, flag};
  }
  return {nullptr, ""};
}

// The integer option an attribute reads (`args.gpu` of `add_argument("--gpu", type=int)`), as the
// user writes it: a GPU index the command line gives the process, the same for every process a
// command starts with the same line, as a constant is. A rank's option ("--rank", "--local_rank",
// or one whose dest names a rank) differs between processes and is no such value; nor is an option
// not declared as an integer (type=int, or an integer default). Empty otherwise.
std::string integerOptionRead(const SourceModel& model, const std::string& attribute) {
  if (lastName(attribute).find("rank") != std::string::npos) return "";
  auto [declared, flag] = optionDeclared(model, attribute);
  if (!declared || flag.find("rank") != std::string::npos) return "";
  const Argument* type = declared->keyword("type");
  const Argument* fallback = declared->keyword("default");
  return (type && type->text == "int") || (fallback && digitsOnly(fallback->text)) ? flag : "";
}

// The process index that torch.multiprocessing.spawn and start_processes pass a function first
// (`fn(i, *args)`, i from 0 to nprocs - 1 in each process that spawns, as a node's launcher does):
// the first parameter of function `functionId` where this file passes that function to them by
// name and the function binds the name nowhere else; empty otherwise.
std::string spawnIndexOf(const SourceModel& model, int functionId) {
  if (functionId < 0 || static_cast<size_t>(functionId) >= model.functions.size()) return "";
  const std::string& function = model.functions[static_cast<size_t>(functionId)];
  bool spawned = std::any_of(model.calls.begin(), model.calls.end(), [&](const Call& call) {
    if (call.qualifiedName != "torch.multiprocessing.spawn" && call.qualifiedName != "torch.multiprocessing.start_processes")
      return false;
    const Argument* fn = call.argument("fn", 0);
    return fn && fn->text == function;
  });
  std::string first = spawned ? parameterAt(model, functionId, 0) : "";
  if (first.empty()) return "";
  auto bindings = std::count_if(model.bindings.begin(), model.bindings.end(),
                                [&](const Binding& b) { return b.functionId == functionId && b.name == first; });
  return bindings == 1 ? first : "";
}

class DeviceReader {
 public:
  // `spawnIndex`: the name that holds the selection's spawn index where it is read (spawnIndexOf).
  DeviceReader(const SourceModel& model, const TracedValue& value, std::string spawnIndex = "")
      : model_(model), value_(value), spawnIndex_(std::move(spawnIndex)) {}

  Evidence read() const { return value_.root() ? device(*value_.root(), 0) : Evidence{}; }

 private:
  static constexpr int kMaxDepth = 24;

  // A device: an index, "cuda:N", f"cuda:{x}", torch.device("cuda", x).
  Evidence device(const ValueNode& n, int depth) const {
    using Kind = ValueNode::Kind;
    if (depth > kMaxDepth) return {};
    if (n.kind == Kind::Literal && n.text.starts_with("cuda:") && digitsOnly(n.text.substr(5)))
      return {Evidence::Source::Constant, n.text.substr(5)};
    if (n.kind == Kind::Format && (n.text == "cuda:{}" || n.text == "{}") && n.operands.size() == 1)
      return index(value_.operand(n, 0), depth + 1);
    if (n.kind == Kind::Call && n.text == "torch.device") {
      const ValueNode* type = nullptr;
      const ValueNode* at = nullptr;
      size_t positional = 0;
      for (size_t i = 0; i < n.operands.size(); ++i) {
        const ValueNode& arg = value_.operand(n, i);
        if (arg.keyword == "type" || (arg.keyword.empty() && positional++ == 0)) type = &arg;
        else if (arg.keyword == "index" || arg.keyword.empty()) at = &arg;
      }
      if (!at) return type ? device(*type, depth + 1) : Evidence{};
      return index(*at, depth + 1);
    }
    if (n.kind == Kind::OneOf) return oneOf(n, depth, &DeviceReader::device);
    return index(n, depth);
  }

  // A device index: environment reads, the rank functions, `args.local_rank`, `x % count`.
  Evidence index(const ValueNode& n, int depth) const {
    using Kind = ValueNode::Kind;
    using Source = Evidence::Source;
    if (depth > kMaxDepth) return {};
    switch (n.kind) {
      case Kind::Literal:
        if (digitsOnly(n.text)) return {Source::Constant, n.text};
        if (n.text.starts_with("cuda:")) return device(n, depth + 1);
        return {};
      case Kind::Environment:
        if (isLocalRankVariable(n.text)) return {Source::LocalRank, n.text};
        if (isGlobalRankVariable(n.text)) return {Source::GlobalRank, n.text};
        return {};
      case Kind::Attribute: {
        std::string last = lastName(n.text);
        if (last == "local_rank" || last == "localrank" || last == "local_process_index") return {Source::LocalRank, n.text};
        if (std::string option = integerOptionRead(model_, n.text); !option.empty()) {
          Evidence e{Source::Option, n.text};
          e.option = std::move(option);
          return e;
        }
        return {};
      }

      case Kind::Call:
        if (n.text == "torch.distributed.get_rank" && n.operands.empty()) return {Source::GlobalRank, "get_rank()"};
        if (n.text == "torch.distributed.get_rank" && n.operands.size() == 1 && isDefaultGroup(value_.operand(n, 0)))
          return {Source::GlobalRank, "get_rank(" + value_.operand(n, 0).text + ")"};
        // mpi4py: a process's rank in MPI_COMM_WORLD is its rank among all of the job's processes.
        if (n.text == "mpi4py.MPI.COMM_WORLD.Get_rank" && n.operands.empty()) return {Source::GlobalRank, "MPI.COMM_WORLD.Get_rank()"};
        if (n.text == "torch.distributed.get_node_local_rank") return {Source::LocalRank, "get_node_local_rank()"};
        if (n.text == "torch.device" || n.text == "torch.cuda.device") return device(n, depth + 1);
        return {};
      case Kind::Operator: {
        if (n.text == "*" && n.operands.size() == 2) return multiple(n, depth);
        if (n.text != "%" || n.operands.size() != 2) return {};
        Evidence left = index(value_.operand(n, 0), depth + 1);
        if (left.source != Source::GlobalRank && left.source != Source::LocalRank) return {};
        std::string divisor = spelled(value_.operand(n, 1));
        if (left.source == Source::GlobalRank && divisor == "device_count()") {
          return {Source::AsInferred, left.shown + " % " + divisor};
        }
        return {left.source, left.shown + " % " + divisor, left.source == Source::GlobalRank ? divisor : "", left.via};
      }
      case Kind::Format:
        return device(n, depth + 1);
      case Kind::OneOf:
        return oneOf(n, depth, &DeviceReader::index);
      case Kind::Item:
        return item(n, depth);
      default:
        return {};
    }
  }

  // A group argument that names the default group: None, or what init_process_group returned
  // (torch declares it `-> None`), so that `get_rank(group)` is the global rank.
  bool isDefaultGroup(const ValueNode& n) const {
    using Kind = ValueNode::Kind;
    if (!n.keyword.empty() && n.keyword != "group") return false;
    if (n.kind == Kind::Literal) return n.text == "None";
    if (n.kind == Kind::Call) return n.text == "torch.distributed.init_process_group";
    if (n.kind == Kind::OneOf) {
      for (size_t i = 0; i < n.operands.size(); ++i)
        if (!isDefaultGroup(value_.operand(n, i))) return false;
      return !n.operands.empty();
    }
    return false;
  }

  // `gpus[i]`: Listed where the index is one the reader knows (a rank, a constant), the container
  // may be a list of GPUs the job is given (a display, a comprehension, a `.split(...)`, or a
  // parameter or attribute the file does not show), and it is not shown to count from zero, whose
  // item is its index. A display's item at a constant index is that item; a container made by any
  // other call (`divmod(...)`, `sys.argv`) is no list of GPUs.
  Evidence item(const ValueNode& n, int depth) const {
    using Kind = ValueNode::Kind;
    const ValueNode& container = value_.operand(n, 0);
    const ValueNode& at = value_.operand(n, 1);
    if (container.kind == Kind::Sequence && at.kind == Kind::Literal && digitsOnly(at.text) && at.text.size() < 4) {
      size_t k = std::stoul(at.text);
      return k < container.operands.size() ? device(value_.operand(container, k), depth + 1) : Evidence{};
    }
    Evidence picked = index(at, depth + 1);
    // The spawn index picks a list's item as a rank does; alone it is no evidence either way (the
    // spawning code may have set CUDA_VISIBLE_DEVICES or laid out the list), as a parameter is not.
    if (picked.source == Evidence::Source::Unknown && isSpawnIndex(at)) picked = {Evidence::Source::LocalRank, at.text};
    if (countsFromZero(container, depth + 1)) return picked;
    if (picked.source == Evidence::Source::Unknown || !mayListGpus(container)) return {};
    return {Evidence::Source::Listed, n.text};
  }

  bool isSpawnIndex(const ValueNode& n) const {
    return n.kind == ValueNode::Kind::Name && !spawnIndex_.empty() && n.text == spawnIndex_;
  }

  static bool mayListGpus(const ValueNode& container) {
    using Kind = ValueNode::Kind;
    switch (container.kind) {
      case Kind::Sequence:
      case Kind::Comprehension:
      case Kind::Name:
        return true;
      case Kind::Attribute:
        return container.text != "sys.argv";
      case Kind::Call:
        return container.text.ends_with(".split");
      default:
        return false;
    }
  }

  // A list whose item i is i: range(n) (or range(0, n), range(0, n, 1)), list() of one, a
  // comprehension over one whose item is its target as an index (`i`, `str(i)`, `int(i)`,
  // f"cuda:{i}", torch.device("cuda", i)), a display of 0, 1, 2, ... (or "cuda:0", "cuda:1", ...).
  // Every value that may arrive must be one.
  bool countsFromZero(const ValueNode& n, int depth) const {
    using Kind = ValueNode::Kind;
    if (depth > kMaxDepth) return false;
    auto literal = [&](size_t i, const char* text) {
      const ValueNode& v = value_.operand(n, i);
      return v.kind == Kind::Literal && v.text == text;
    };
    switch (n.kind) {
      case Kind::Call:
        if (n.text == "range") {
          return n.operands.size() == 1 || (n.operands.size() == 2 && literal(0, "0")) ||
                 (n.operands.size() == 3 && literal(0, "0") && literal(2, "1"));
        }
        return n.text == "list" && n.operands.size() == 1 && countsFromZero(value_.operand(n, 0), depth + 1);
      case Kind::Comprehension:
        return n.operands.size() == 3 && countsFromZero(value_.operand(n, 0), depth + 1) &&
               isItsIndex(value_.operand(n, 1), value_.operand(n, 2).text);
      case Kind::Sequence:
        for (size_t i = 0; i < n.operands.size(); ++i) {
          const ValueNode& v = value_.operand(n, i);
          if (v.kind != Kind::Literal || (v.text != std::to_string(i) && v.text != "cuda:" + std::to_string(i))) return false;
        }
        return !n.operands.empty();
      case Kind::OneOf:
        for (size_t i = 0; i < n.operands.size(); ++i)
          if (!countsFromZero(value_.operand(n, i), depth + 1)) return false;
        return !n.operands.empty();
      default:
        return false;
    }
  }

  // A comprehension's item that is its loop target `target` as a device index.
  bool isItsIndex(const ValueNode& item, const std::string& target) const {
    using Kind = ValueNode::Kind;
    auto isTarget = [&](const ValueNode& v) { return v.kind == Kind::Name && v.text == target; };
    if (isTarget(item)) return true;
    if (item.operands.size() == 1 && isTarget(value_.operand(item, 0)))
      return (item.kind == Kind::Call && (item.text == "str" || item.text == "int")) ||
             (item.kind == Kind::Format && (item.text == "cuda:{}" || item.text == "{}"));
    if (item.kind == Kind::Call && item.text == "torch.device" && item.operands.size() == 2) {
      const ValueNode& type = value_.operand(item, 0);
      return type.kind == Kind::Literal && type.text == "cuda" && isTarget(value_.operand(item, 1));
    }
    return false;
  }

  // `x * n`: a Multiple of n. The multiplier n is a number written in it, else the operand that
  // is not an index the reader knows (a rank, a constant), else the right one. A literal 0 or 1
  // makes it the other operand's evidence.
  Evidence multiple(const ValueNode& n, int depth) const {
    const ValueNode& left = value_.operand(n, 0);
    const ValueNode& right = value_.operand(n, 1);
    auto number = [](const ValueNode& v) { return v.kind == ValueNode::Kind::Literal && digitsOnly(v.text); };
    for (const auto& [factor, other] : {std::pair{&left, &right}, std::pair{&right, &left}}) {
      if (!number(*factor)) continue;
      if (factor->text == "0") return {Evidence::Source::Constant, "0"};
      if (factor->text == "1") return index(*other, depth + 1);
    }
    bool multiplierLeft = number(left) && !number(right);
    if (!number(left) && !number(right)) {
      multiplierLeft = index(left, depth + 1).source == Evidence::Source::Unknown &&
                       index(right, depth + 1).source != Evidence::Source::Unknown;
    }
    const ValueNode& multiplier = multiplierLeft ? left : right;
    std::string shown = spelledIndex(left, depth) + " * " + spelledIndex(right, depth);
    return {Evidence::Source::Multiple, shown, spelled(multiplier)};
  }

  // An index as the message quotes it: as read where the reader knows it, else as written.
  std::string spelledIndex(const ValueNode& n, int depth) const {
    Evidence e = index(n, depth + 1);
    if (e.source == Evidence::Source::Unknown || e.shown.empty()) return spelled(n);
    return e.shown.find(' ') == std::string::npos ? e.shown : "(" + e.shown + ")";
  }

  // Evidence against the local rank only when every value that may arrive shows it; any other
  // (the local rank, or one not known) leaves nothing to report.
  Evidence oneOf(const ValueNode& n, int depth, Evidence (DeviceReader::*read)(const ValueNode&, int) const) const {
    Evidence first;
    for (size_t i = 0; i < n.operands.size(); ++i) {
      Evidence e = (this->*read)(value_.operand(n, i), depth + 1);
      if (!showsOtherDevice(e)) return e;
      if (i == 0) first = e;
    }
    if (otherFileFunction(n.text)) {
      std::string returns;
      for (size_t i = 0; i < n.operands.size(); ++i) returns += (i ? " or " : "") + written(value_.operand(n, i), depth + 1);
      first.via = n.text + " (defined in another file) returns " + returns;
    }
    return first;
  }

  bool otherFileFunction(const std::string& name) const {
    return std::any_of(model_.returns.begin(), model_.returns.end(),
                       [&](const Binding& r) { return r.functionId == kOtherFileReturns && r.name == name; });
  }

  // A value as the message quotes another file's return: calls by their qualified names.
  std::string written(const ValueNode& n, int depth) const {
    using Kind = ValueNode::Kind;
    if (depth > kMaxDepth) return "...";
    switch (n.kind) {
      case Kind::Call:
        return n.text + "()";
      case Kind::Environment:
        return "os.environ[\"" + n.text + "\"]";
      case Kind::Literal:
      case Kind::Name:
      case Kind::Attribute:
        return n.text;
      case Kind::Operator:
        if (n.operands.size() == 2) return written(value_.operand(n, 0), depth + 1) + " " + n.text + " " + written(value_.operand(n, 1), depth + 1);
        return "...";
      case Kind::OneOf: {
        std::string out;
        for (size_t i = 0; i < n.operands.size(); ++i) out += (i ? " or " : "") + written(value_.operand(n, i), depth + 1);
        return out;
      }
      default:
        return "...";
    }
  }

  // A divisor as read: `torch.cuda.device_count()` as device_count(), a name or a number as written.
  std::string spelled(const ValueNode& n) const {
    if (n.kind == ValueNode::Kind::Call) return lastName(n.text) + "()";
    if (n.kind == ValueNode::Kind::Environment) return n.text;
    if (n.kind == ValueNode::Kind::Unknown || n.kind == ValueNode::Kind::OneOf || n.text.empty()) return "...";
    return n.text;
  }

  const SourceModel& model_;
  const TracedValue& value_;
  std::string spawnIndex_;
};

// Where a selection's index is a parameter of its function (`def main_worker(gpu, ...)`, then
// `args.gpu = gpu`), what a direct call of that function in this file passes for it: a path of its
// own, whose device is that argument's (the ImageNet example's `main_worker(args.gpu, ...)` beside
// `mp.spawn(main_worker, ...)`, whose spawn index is the local rank). The first such path that
// passes a command-line GPU, with the call that takes it.
std::optional<Evidence> directCallerEvidence(const SourceModel& model, int functionId, const TracedValue& value) {
  const ValueNode* root = value.root();
  if (!root || root->kind != ValueNode::Kind::Name || functionId < 0 || static_cast<size_t>(functionId) >= model.functions.size())
    return std::nullopt;
  size_t position = 0;
  for (std::string parameter; (parameter = parameterAt(model, functionId, position)) != root->text; ++position)
    if (parameter.empty()) return std::nullopt;
  const std::string& function = model.functions[static_cast<size_t>(functionId)];
  for (const Call& c : model.calls) {
    if (c.spelling != function || c.functionId == functionId) continue;
    const Argument* passed = c.argument(root->text, position);
    if (!passed) continue;
    TracedValue argument = traceValue(model, c, *passed);
    // Only a command-line GPU: a literal or a rank passed here may go with a world of its own (a
    // debug path's `run(0, 1)`), which the call's other arguments decide.
    Evidence e = DeviceReader(model, argument, spawnIndexOf(model, c.functionId)).read();
    if (e.source != Evidence::Source::Option) continue;
    std::string caller = c.function.empty() ? "the module" : c.function + "()";
    e.via = "on the path where " + caller + " calls " + function + "() with " + passed->text + " at line " +
            std::to_string(c.where.line) + (e.via.empty() ? "" : ", " + e.via);
    return e;
  }
  return std::nullopt;
}

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

// A world of one process, as written (`world_size=1`): a constant device is then no conflict.
bool singleProcess(const SourceModel& model, const Call& init) {
  const Argument* size = init.keyword("world_size");
  if (!size) return false;
  TracedValue value = traceValue(model, init, *size);
  return value.root() && value.root()->kind == ValueNode::Kind::Literal && value.root()->text == "1";
}

// What the file shows of an init's backend. Unread: a value it does not show (a config object's
// attribute, a parameter), or one of several of which one is nccl: the finding then holds where
// that value is nccl, and says so.
// OptionDefaultNccl: a command-line option the file declares, whose default is nccl.
enum class Backend { Nccl, NotNccl, Unread, OptionDefaultNccl };

Backend backendOf(const SourceModel& model, const Call& init) {
  const Argument* backend = init.argument("backend", 0);
  if (!backend) return Backend::Nccl;  // torch's default device map, whose CUDA entry is nccl
  if (backend->stringValue) return selectsDefaultNccl(*backend->stringValue) ? Backend::Nccl : Backend::NotNccl;
  TracedValue value = traceValue(model, init, *backend);
  const ValueNode* root = value.root();
  if (!root) return Backend::Unread;
  // `backend=args.dist_backend` of `add_argument("--dist-backend", default="nccl")`: nccl unless the
  // command gives another; an option whose default is another backend ("gloo") is that backend's.
  if (root->kind == ValueNode::Kind::Attribute)
    if (const Call* declared = optionDeclared(model, root->text).first)
      if (const Argument* fallback = declared->keyword("default"); fallback && fallback->stringValue)
        return selectsDefaultNccl(*fallback->stringValue) ? Backend::OptionDefaultNccl : Backend::NotNccl;
  std::vector<const ValueNode*> choices{root};
  if (root->kind == ValueNode::Kind::OneOf) {
    choices.clear();
    for (size_t i = 0; i < root->operands.size(); ++i) choices.push_back(&value.operand(*root, i));
  }
  bool allNamed = true, anyNccl = false;
  for (const ValueNode* c : choices) {
    if (c->kind != ValueNode::Kind::Literal) allNamed = false;
    else anyNccl |= selectsDefaultNccl(c->text);
  }
  if (allNamed && !anyNccl) return Backend::NotNccl;
  return allNamed && choices.size() == 1 ? Backend::Nccl : Backend::Unread;
}

struct Selection {
  const Call* call;
  Evidence evidence;
  std::string index;  // the selecting argument as written, for the message: `dist.get_rank()`
};

// An installed library's initialiser that selects the process's GPU itself: xDiT's (xfuser)
// init_distributed_environment calls set_device(local_rank) before its init_process_group, with
// local_rank its argument, else LOCAL_RANK where distributed_init_method is "env://" (its
// default), else its rank argument (xdit-project/xDiT@175e0bfec974d0b44a0be9fa511df2f9f5ead080:
// xfuser/core/distributed/parallel_state.py:230-263; re-exported by xfuser/core/distributed/
// __init__.py:22). The argument that decides, or nothing where LOCAL_RANK does.
struct LibrarySelection {
  bool selects = false;
  const Argument* index = nullptr;
};
LibrarySelection librarySelection(const Call& call) {
  const std::string& q = call.qualifiedName;
  if (q != "xfuser.core.distributed.init_distributed_environment" &&
      q != "xfuser.core.distributed.parallel_state.init_distributed_environment")
    return {};
  if (const Argument* local = call.argument("local_rank", 3)) return {true, local};
  const Argument* method = call.argument("distributed_init_method", 2);
  if (method && !(method->stringValue && *method->stringValue == "env://")) return {true, call.argument("rank", 1)};
  return {true, nullptr};
}

// Whether a value is a CUDA device written out: "cuda:N", f"cuda:{...}", torch.device("cuda...", ...).
bool isCudaDevice(const TracedValue& value, const ValueNode& n) {
  using Kind = ValueNode::Kind;
  if ((n.kind == Kind::Literal || n.kind == Kind::Format) && n.text.starts_with("cuda:")) return true;
  if (n.kind != Kind::Call || n.text != "torch.device" || n.operands.empty()) return false;
  const ValueNode& type = value.operand(n, 0);
  return (type.kind == Kind::Literal || type.kind == Kind::Format) && type.text.starts_with("cuda");
}

// A device a function of the file returns (`def dev(): return torch.device(f"cuda:{...}")`), in a
// file that selects none with set_device: the device the process's model and tensors are put on.
// Only a global rank is read as evidence here (unreduced, or modulo something other than
// device_count()): a constant or a list's item returned by a helper may serve another purpose.
struct ReturnedDevice {
  const Binding* returned = nullptr;
  Evidence evidence;
};

std::optional<ReturnedDevice> returnedDevice(const SourceModel& model) {
  for (const Binding& r : model.returns) {
    if (r.functionId < 0) continue;
    TracedValue value = traceBinding(model, r);
    if (!value.root() || !isCudaDevice(value, *value.root())) continue;
    Evidence evidence = DeviceReader(model, value).read();
    if (evidence.source == Evidence::Source::GlobalRank) return ReturnedDevice{&r, evidence};
  }
  return std::nullopt;
}

class InitWithoutDeviceId final : public Rule {
 public:
  const RuleInfo& info() const override { return info_; }

  void check(const SourceModel& model, const RuleContext&, std::vector<Finding>& out) const override {
    if (worldShownNotNccl(model)) return;  // every init names a world without NCCL, or HCCL's on Ascend
    std::vector<Selection> selections;
    for (const Call& call : model.calls) {
      if (!selectsCudaDevice(call) || call.arguments.empty()) continue;
      TracedValue value = traceValue(model, call, call.arguments.front());
      Evidence evidence = DeviceReader(model, value, spawnIndexOf(model, call.functionId)).read();
      bool cudaZero = evidence.source == Evidence::Source::Constant && evidence.shown == "0";
      // One visible GPU: its index 0 is the bound device, and any other index is no device at all.
      bool fromLine = evidence.source == Evidence::Source::Option;
      if ((cudaZero || fromLine) && oneVisibleDeviceBefore(model, call)) evidence.source = Evidence::Source::AsInferred;
      if (evidence.source == Evidence::Source::Unknown)
        if (std::optional<Evidence> path = directCallerEvidence(model, call.functionId, value)) evidence = std::move(*path);
      selections.push_back({&call, evidence, call.arguments.front().text});
    }
    for (const Call& call : model.calls) {
      LibrarySelection library = librarySelection(call);
      if (!library.selects) continue;
      Evidence evidence{Evidence::Source::LocalRank, "LOCAL_RANK"};
      if (library.index) {
        TracedValue value = traceValue(model, call, *library.index);
        evidence = DeviceReader(model, value, spawnIndexOf(model, call.functionId)).read();
      }
      // Quoted as the argument stands among the call's others: `..., local_rank=rank % 4`.
      std::string quoted = !library.index ? "" : "..., " + (library.index->keyword.empty() ? "" : library.index->keyword + "=") + library.index->text;
      selections.push_back({&call, evidence, quoted});
    }
    if (selections.empty()) return checkReturnedDevice(model, out);
    for (const Call& call : model.calls) {
      if (!isDistributed(call.qualifiedName, "init_process_group") || call.keyword("device_id")) continue;
      Backend backend = backendOf(model, call);
      if (backend == Backend::NotNccl) continue;
      const Selection* chosen = evidenceFor(selections, call);
      if (!chosen) continue;
      // One process: any device it selects is the one it binds.
      bool constant = chosen->evidence.source == Evidence::Source::Constant || chosen->evidence.source == Evidence::Source::Option;
      if (constant && singleProcess(model, call)) continue;
      const Call& chooser = *chosen->call;
      std::string seen = chooser.spelling + "(" + chosen->index + ") at line " +
                         std::to_string(chooser.where.line) + " selects cuda:" + shownIndex(chosen->evidence);
      if (chosen->evidence.source == Evidence::Source::Listed) seen += ", an item of " + containerOf(chosen->evidence.shown);
      if (!chosen->evidence.via.empty()) seen += " (" + chosen->evidence.via + ")";
      Finding& found = out.emplace_back(finding(model, call.where, message(call, backend, seen, chosen->evidence)));
      if (backend == Backend::Nccl) found.fix = deviceIdFix(chooser, call);
    }
  }

 private:
  static std::string message(const Call& init, Backend backend, const std::string& seen, const Evidence& evidence) {
    std::string text = "init_process_group() without device_id";
    if (backend == Backend::Unread) {
      text += " and backend=" + init.argument("backend", 0)->text +
              ", which this file does not show to be nccl (what follows holds where it is)";
    }
    if (backend == Backend::OptionDefaultNccl) {
      text += " and backend=" + init.argument("backend", 0)->text + ", an option whose default is nccl (what follows "
              "holds unless the command names another backend)";
    }
    return text + "; " + seen +
           ", while torch 2.15's NCCL backend binds each rank to cuda:(global rank % device_count()) "
           "when given none" + comparison(evidence) + ". Pass the selected device as device_id=torch.device(\"cuda\", ...)";
  }

  // A file without set_device whose function returns the process's device from the global rank
  // (returnedDevice): each NCCL init without device_id is reported, with no fix (the device is
  // not the current one).
  void checkReturnedDevice(const SourceModel& model, std::vector<Finding>& out) const {
    std::optional<ReturnedDevice> device;
    bool asked = false;
    for (const Call& call : model.calls) {
      if (!isDistributed(call.qualifiedName, "init_process_group") || call.keyword("device_id")) continue;
      Backend backend = backendOf(model, call);
      if (backend == Backend::NotNccl) continue;
      if (!asked) device = returnedDevice(model);
      asked = true;
      if (!device) return;
      const Binding& returned = *device->returned;
      std::string seen = returned.name + "() returns cuda:" + shownIndex(device->evidence) + " at line " +
                         std::to_string(returned.where.line) + " and the file selects no GPU with set_device (where that is the "
                         "device its processes use)";
      out.push_back(finding(model, call.where, message(call, backend, seen, device->evidence)));
    }
  }

  // When the selected index is the one the backend binds: a fact of arithmetic, not a guess.
  static std::string comparison(const Evidence& e) {
    if (e.source != Evidence::Source::Multiple) return ": the same device only where " + sameDeviceCondition(e);
    const std::string& n = e.divisor;
    return ": a rank whose global rank % device_count() is 1 gets cuda:1, no multiple of " + n +
           (digitsOnly(n) ? "" : " unless " + n + " is 1");
  }

  static std::string sameDeviceCondition(const Evidence& e) {
    if (e.source == Evidence::Source::Constant) {
      return e.shown == "0" ? "each process sees one GPU" : "every rank's global rank % device_count() is " + e.shown;
    }
    if (e.source == Evidence::Source::Listed) return "the list holds each rank's global rank % device_count() at its place";
    if (e.source == Evidence::Source::Option) {
      return "each rank is given " + e.option + " equal to its global rank % device_count() (a command that gives "
             "every process the same " + e.option + ", one process per node, binds them elsewhere)";
    }
    if (!e.divisor.empty()) return "device_count() is " + e.divisor;
    return "the job has no more ranks than a node has GPUs";
  }

  // What a Listed item is taken from, as written before its bracket (`config.device_ids`).
  static std::string containerOf(const std::string& item) {
    size_t bracket = item.find('[');
    return bracket == std::string::npos || bracket == 0 ? "a list" : item.substr(0, bracket);
  }

  static std::string shownIndex(const Evidence& e) {
    return e.shown.find(' ') == std::string::npos ? e.shown : "(" + e.shown + ")";
  }

  // Whether a later selection of the same function, which can run after `cleared` (no other arm of
  // an `if`), selects a device other than the bound one: the process then ends on that device
  // (`init_distributed_environment(...)` selecting LOCAL_RANK, then `set_device(dist.get_rank())`).
  static bool supersededByOtherDevice(const std::vector<Selection>& selections, const Selection& cleared, const Call& init) {
    return std::any_of(selections.begin(), selections.end(), [&](const Selection& later) {
      return later.call->functionId == cleared.call->functionId && later.call->where.line > cleared.call->where.line &&
             !later.call->exclusiveWith(*cleared.call) && !later.call->exclusiveWith(init) && showsOtherDevice(later.evidence);
    });
  }

  // The selection that shows `init`'s process picks no local-rank GPU: of the selections that can
  // run with it (those of its function when it has any, else the file's), every one must show it;
  // the one just before the init in its function is quoted, else the first. Where they are the
  // file's, one whose value the file does not show (a parameter, an attribute set elsewhere) may
  // be the one that runs, so it leaves a global rank or a constant unproven; a multiple it does
  // not: it shows the job lays its processes out n devices apart, which the bound index (cuda:1
  // for a node's second rank) does not follow unless n is 1. A selection that shows the local
  // rank or the bound index clears the init, unless a later one of its function overrides it
  // (supersededByOtherDevice).
  static const Selection* evidenceFor(const std::vector<Selection>& selections, const Call& init) {
    std::vector<const Selection*> reaching;
    bool sameFunction = std::any_of(selections.begin(), selections.end(), [&](const Selection& s) {
      return s.call->functionId == init.functionId && !s.call->exclusiveWith(init);
    });
    bool unread = false;
    for (const Selection& s : selections) {
      if (s.call->exclusiveWith(init) || (sameFunction && s.call->functionId != init.functionId)) continue;
      if (s.evidence.source == Evidence::Source::Unknown && !sameFunction) {
        unread = true;
        continue;
      }
      if (!showsOtherDevice(s.evidence)) {
        if (supersededByOtherDevice(selections, s, init)) continue;
        return nullptr;
      }
      reaching.push_back(&s);
    }
    auto notMultiple = [](const Selection* s) { return s->evidence.source != Evidence::Source::Multiple; };
    if (unread) std::erase_if(reaching, notMultiple);
    if (reaching.empty()) return nullptr;
    const Selection* quoted = reaching.front();
    for (const Selection* s : reaching)
      if (s->call->functionId == init.functionId && s->call->where.line < init.where.line) quoted = s;
    return quoted;
  }

  RuleInfo info_{
      .code = "NM102",
      .slug = "init-without-device-id",
      .summary = "init_process_group with NCCL but no device_id, where the selected GPU is not the one torch 2.15 binds",
      .rationale = "Without device_id, torch 2.15's rewritten NCCL backend infers each process's device. TorchRec hit "
                   "\"Duplicate GPU detected: rank 2 and rank 0 both on CUDA device ...\" this way when its workers "
                   "selected GPUs by something other than LOCAL_RANK, and fixed it by passing each worker's selected "
                   "device to init_process_group. The rule follows the value given to torch.cuda.set_device (also "
                   "torch.accelerator.set_device_index, and set_device of a device module computed from a device type: "
                   "getattr(torch, device_type), torch.get_device_module(device_type)) through "
                   "the file (assignments in the function and at module level, a config object's attributes set in "
                   "the function (`cfg.device_id = ...`, `cfg.device_id *= n`), the file's own functions' returns, "
                   "a module-level function of another file of the linted tree that the selection itself calls by its "
                   "imported name (`set_device(get_rank())`, torch.device(...), f\"cuda:{...}\"), with its returns as "
                   "read there, f-strings, \"%\" and .format, torch.device(\"cuda\", i), int() and os.environ/os.getenv reads, "
                   "also through a dict made of the environment (`env = {k: os.environ[k] for k in keys}`, "
                   "`dict(os.environ)`, `os.environ.copy()`) read by key) and "
                   "compares it with the device torch 2.15's NCCL backend binds without device_id, cuda:(global rank % "
                   "device_count()) (ProcessGroupNCCL::setBoundDeviceId). It reports a selection from the global rank "
                   "(RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, dist.get_rank(), also of the default group, None or what init_process_group returned, mpi4py's MPI.COMM_WORLD.Get_rank()) taken "
                   "modulo something else or not at "
                   "all, a constant index (unless world_size=1, or cuda:0 in a process that sees one GPU: "
                   "CUDA_VISIBLE_DEVICES set in the file to one device, such as str(local_rank), before the selection "
                   "and before torch.cuda runs), the value of a command-line option the file declares as an integer "
                   "(`args.gpu` of `add_argument(\"--gpu\", type=int)`, `args` what parse_args() returns, the file "
                   "setting it nowhere but to a parameter passed on; not a rank's option), the same on every process "
                   "one command line starts, and a multiple of a count (`local_rank * n`, a "
                   "process driving n GPUs: the rank torch binds to cuda:1 selects no multiple of n unless n is 1), "
                   "an item of a list of GPUs the job is given picked by a rank or a constant (`gpus[rank]`, "
                   "`cfg.device_ids[local_rank]`; a list shown to count from zero, `list(range(n))`, picks its "
                   "index; the index torch.multiprocessing.spawn or start_processes passes the function it starts, its "
                   "first parameter, picks an item as a rank does), naming when the two devices agree. Where the "
                   "selected index is a parameter of its function, what a direct call of that function in the file "
                   "passes for it is a path of its own where it passes such a command-line GPU (`worker(args.gpu, ...)` "
                   "beside `mp.spawn(worker, ...)`), reported with that call. A selection "
                   "of exactly that index, one from the local rank "
                   "(LOCAL_RANK, SLURM_LOCALID, args.local_rank: the same device under the usual launch), or from "
                   "anything it cannot read (a parameter, a config object's attribute set elsewhere, a function "
                   "defined outside the linted tree, another file's function whose result is kept in a name before "
                   "the selection) is not reported. A file that never calls set_device is reported only where one of "
                   "its functions returns a CUDA device from the global rank (`def dev(): return "
                   "torch.device(f\"cuda:{rank % 8}\")`), the device it hands its processes; a constant, a list's "
                   "item or the local rank returned so is not read as the process's device. Where the init's "
                   "function selects no device, the file's selections count: all must "
                   "show a mismatch, and one the rule cannot read leaves only a multiple standing. A backend read from a "
                   "command-line option the file declares, and sets nowhere itself, is its default's (`add_argument(\"--dist-backend\", "
                   "default=\"nccl\")`: reported, saying it holds unless the command names another; a default of "
                   "\"gloo\": not reported). Another backend the file "
                   "does not show (backend=cfg.backend) is reported as NCCL's only where the rest holds, the finding "
                   "saying it holds where that backend is nccl; a backend shown to be another is not. A parameter's "
                   "string default (`def setup(backend=\"gloo\")`) is the backend only where no call in the linted "
                   "tree passes that argument another value (by keyword, by position, or through *args/**kwargs; "
                   "calls are found by the function's name in the text and count in its module, in a file importing "
                   "that module, as a method's call on an object or a class's call for its __init__; a function "
                   "started by name elsewhere, `mp.spawn(setup, args=...)`, keeps its "
                   "default); where one does, the backend is the caller's, which the file does not show. An installed "
                   "library's initialiser that selects the GPU itself counts as a selection: xDiT's (xfuser) "
                   "init_distributed_environment selects its local_rank argument, else LOCAL_RANK (its default "
                   "env:// init), else its rank argument. A selection followed in its function, outside the other "
                   "arms of an `if`, by one that shows another device is overridden: the process ends on the later "
                   "one (xfuser's initialiser, then set_device(dist.get_rank())). A module "
                   "that imports torch_npu at module level, outside try and if, runs only on Ascend NPUs, whose "
                   "world is HCCL's: not reported.",
      .example = "rank = int(os.environ[\"RANK\"])\ntorch.cuda.set_device(rank % 4)\n"
                 "dist.init_process_group(\"nccl\")",
      .fix = "Pass the device the process selected: init_process_group(\"nccl\", device_id=torch.device(\"cuda\", dev)). "
             "The fix (unsafe) adds device_id=torch.device(\"cuda\", torch.cuda.current_device()), the device the "
             "selection set, where the selection runs through `torch.` in the same function before the init on every "
             "path, the init's arguments are written out (no **kwargs) and its backend is shown to be nccl; it is "
             "unsafe because it changes which device the job's groups bind to, on purpose.",
      .fixSafety = FixSafety::Unsafe,
      .languages = {Language::Python},
      .enabledByDefault = true,
      .triggers = {{.anyOf = {"init_process_group"}, .andAnyOf = {"set_device*", "cuda:"}, .module = "torch.distributed"}},
      // The values a selection is made of, wherever the file computes them (a helper function).
      .contextWords = {"LOCAL_RANK", "RANK", "SLURM_PROCID", "SLURM_LOCALID", "get_rank", "local_rank",
                       "device_count", "CUDA_VISIBLE_DEVICES", "spawn", "start_processes"},
  };
};

}  // namespace

const Rule& initWithoutDeviceIdRule() {
  static const InitWithoutDeviceId rule;
  return rule;
}

}  // namespace nccl_migrate::lint
