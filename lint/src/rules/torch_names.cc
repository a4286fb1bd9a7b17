// Backend strings, TORCH_DIST_USE_NCCL2 and allocator settings read by the shim's own parsers, so
// that lint and the backends never disagree on what a value means.
#include "torch_names.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <vector>

#include "nccl_migrate/shim/allocator_settings.h"
#include "nccl_migrate/shim/backend_name.h"
#include "nccl_migrate/shim/backend_string.h"
#include "python/python_frontend.h"

namespace nccl_migrate::lint {
namespace {

// The backend names of a backend string; empty when the shim cannot read it as one.
std::vector<std::string> backendNames(std::string_view text) {
  auto entries = shim::parseBackendString(text);
  std::vector<std::string> names;
  if (!entries.ok()) return names;
  for (const shim::DeviceBackend& entry : entries.value()) names.push_back(entry.backend);
  return names;
}

std::optional<shim::Behaviour> behaviourWhenUnset(const std::string& name) {
  auto resolution = shim::resolveNcclName(name, std::nullopt);
  if (!resolution) return std::nullopt;
  return resolution->behaviour;
}

constexpr std::array<std::string_view, 6> kLocalRankVariables = {
    "LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
    "PMI_LOCAL_RANK"};
constexpr std::array<std::string_view, 6> kGlobalRankVariables = {"RANK",     "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                                                  "MV2_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};

}  // namespace

bool isLocalRankVariable(std::string_view name) {
  return std::find(kLocalRankVariables.begin(), kLocalRankVariables.end(), name) != kLocalRankVariables.end();
}

bool isGlobalRankVariable(std::string_view name) {
  return std::find(kGlobalRankVariables.begin(), kGlobalRankVariables.end(), name) != kGlobalRankVariables.end();
}

bool selectsDefaultNccl(const std::string& backend) {
  for (const std::string& name : backendNames(backend))
    if (shim::isDefaultNcclName(name)) return true;
  return false;
}

bool isOtherWorldInitialiser(const SourceModel& model, const Call& call) {
  const std::string& name = call.qualifiedName.empty() ? call.spelling : call.qualifiedName;
  std::string last = name.substr(name.rfind('.') + 1);
  if (std::find(model.functions.begin(), model.functions.end(), last) != model.functions.end()) return false;
  return last.find("init_dist") != std::string::npos || name.starts_with("colossalai.launch");
}

bool worldShownNotNccl(const SourceModel& model) {
  if (model.needsAscendNpu) return true;
  bool initialised = false;
  for (const Call& call : model.calls) {
    if (isOtherWorldInitialiser(model, call)) return false;
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

namespace {

bool digitsOnly(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Whether every run that reaches a place with `inner` arms is in each of the `outer` arms.
bool within(const std::vector<Call::Arm>& outer, const std::vector<Call::Arm>& inner) {
  if (outer.size() > inner.size()) return false;
  for (size_t i = 0; i < outer.size(); ++i)
    if (outer[i].statement != inner[i].statement || outer[i].index != inner[i].index) return false;
  return true;
}

bool exclusive(const std::vector<Call::Arm>& a, const std::vector<Call::Arm>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i].statement != b[i].statement) return false;
    if (a[i].index != b[i].index) return true;
  }
  return false;
}

// One integer: a number, a rank (a launcher's variable, get_rank(), a name or attribute called
// rank or local_rank) or arithmetic of those.
bool oneIndex(const TracedValue& v, const ValueNode& n, int depth) {
  using Kind = ValueNode::Kind;
  if (depth > 8) return false;
  switch (n.kind) {
    case Kind::Literal:
      return digitsOnly(n.text);
    case Kind::Environment:
      return isLocalRankVariable(n.text) || isGlobalRankVariable(n.text);
    case Kind::Name:
    case Kind::Attribute: {
      std::string last = n.text.substr(n.text.rfind('.') + 1);
      return last == "rank" || last == "local_rank" || last == "global_rank" || last == "localrank";
    }
    case Kind::Call:
      return n.text == "torch.distributed.get_rank" || n.text == "torch.distributed.get_node_local_rank";
    case Kind::Operator:
      if (n.text != "%" && n.text != "//" && n.text != "+" && n.text != "-" && n.text != "*") return false;
      [[fallthrough]];
    case Kind::OneOf:
      for (size_t i = 0; i < n.operands.size(); ++i)
        if (!oneIndex(v, v.operand(n, i), depth + 1)) return false;
      return !n.operands.empty();
    default:
      return false;
  }
}

// A CUDA_VISIBLE_DEVICES value of one device (see oneVisibleDeviceBefore).
bool oneDevice(const TracedValue& v, const ValueNode& n) {
  using Kind = ValueNode::Kind;
  if (n.kind == Kind::Literal) return !n.text.empty() && n.text.front() != '-' && n.text.find(',') == std::string::npos;
  if (n.kind == Kind::Format) {
    if (n.text.find(',') != std::string::npos) return false;
    for (size_t i = 0; i < n.operands.size(); ++i)
      if (!oneIndex(v, v.operand(n, i), 0)) return false;
    return true;
  }
  return oneIndex(v, n, 0);
}

// `__name__ == "__main__"`, either way round.
bool isMainGuard(const SourceModel& model, const ValueNode& n) {
  if (n.kind != ValueNode::Kind::Operator || n.text != "==" || n.operands.size() != 2) return false;
  const ValueNode& a = model.values[static_cast<size_t>(n.operands[0])];
  const ValueNode& b = model.values[static_cast<size_t>(n.operands[1])];
  auto name = [](const ValueNode& v) { return v.kind == ValueNode::Kind::Name && v.text == "__name__"; };
  auto main = [](const ValueNode& v) { return v.kind == ValueNode::Kind::Literal && v.text == "__main__"; };
  return (name(a) && main(b)) || (name(b) && main(a));
}

// Whether the setting `b` runs on every path to `call`: before it in its function and in every arm
// it stands in, or at module level (inside `if __name__ == "__main__":` at most) for a call in a
// function.
bool reaches(const SourceModel& model, const Binding& b, const Call& call) {
  if (b.functionId == call.functionId) return b.where.line < call.where.line && within(b.branches, call.branches);
  if (b.functionId != -1 || call.functionId < 0) return false;
  for (size_t depth = 0; depth < b.branches.size(); ++depth) {
    const Binding* condition = armCondition(model, -1, b.branches, depth, 0);
    if (b.branches[depth].index != 0 || !condition || !isMainGuard(model, model.values[static_cast<size_t>(condition->value)]))
      return false;
  }
  return true;
}

// Whether a call of torch.cuda may run before the setting in its function.
bool cudaRunsBefore(const SourceModel& model, const Binding& b) {
  return std::any_of(model.calls.begin(), model.calls.end(), [&](const Call& c) {
    return c.functionId == b.functionId && c.where.line <= b.where.line && c.qualifiedName.starts_with("torch.cuda.") &&
           !exclusive(c.branches, b.branches);
  });
}

}  // namespace

bool selectsCudaDevice(const Call& call) {
  const std::string& q = call.qualifiedName;
  if (q == "torch.cuda.set_device" || q == "torch.accelerator.set_device_index") return true;
  if (!q.empty() || !call.spelling.ends_with(").set_device")) return false;
  std::string_view head = call.spelling;
  return head.starts_with("getattr(torch,") || head.starts_with("torch.get_device_module(");
}

bool oneVisibleDeviceBefore(const SourceModel& model, const Call& call) {
  for (const Binding& b : model.bindings) {
    if (b.name != environmentBinding("CUDA_VISIBLE_DEVICES") || !reaches(model, b, call) || cudaRunsBefore(model, b)) continue;
    TracedValue value = traceBinding(model, b);
    if (value.root() && oneDevice(value, *value.root())) return true;
  }
  return false;
}

bool selectsEagerNccl(const std::string& backend) {
  for (const std::string& name : backendNames(backend))
    if (behaviourWhenUnset(name) == shim::Behaviour::Rewritten) return true;
  return false;
}

bool namesNcclOtherThanPlain(const std::string& backend) {
  auto entries = shim::parseBackendString(backend);
  if (!entries.ok()) return false;
  for (const shim::DeviceBackend& entry : entries.value()) {
    if (!behaviourWhenUnset(entry.backend)) continue;  // not an NCCL backend
    if (!entry.device.empty() || !shim::isDefaultNcclName(entry.backend)) return true;
  }
  return false;
}

bool namesLegacyBackend(const std::string& value) {
  size_t at = 0;
  while (at < value.size()) {
    size_t start = value.find_first_not_of(" \t\r\n", at);
    if (start == std::string::npos) break;
    size_t end = value.find_first_of(" \t\r\n", start);
    if (end == std::string::npos) end = value.size();
    for (const std::string& name : backendNames(std::string_view(value).substr(start, end - start))) {
      // Only an explicit name pins legacy: "nccl" follows the variable, which is reported on its own.
      if (!shim::isDefaultNcclName(name) && behaviourWhenUnset(name) == shim::Behaviour::Legacy) return true;
    }
    at = end;
  }
  return false;
}

bool useNccl2SelectsLegacy(const std::string& value) {
  auto resolution = shim::resolveNcclName("nccl", value);
  return resolution && resolution->behaviour == shim::Behaviour::Legacy;
}

bool isUseNccl2Variable(const std::string& key) { return key == shim::kUseNccl2Variable; }

bool isAllocatorVariable(const std::string& key) {
  return key == shim::kAllocatorVariable || key == shim::kCudaAllocatorVariable;
}

bool selectsCudaMallocAsync(const std::string& allocatorSettings) {
  return shim::allocatorBackendIn(allocatorSettings) == std::string(shim::kCudaMallocAsync);
}

}  // namespace nccl_migrate::lint
