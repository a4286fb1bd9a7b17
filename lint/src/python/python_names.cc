// Import and alias bookkeeping for the Python frontend.
#include "python/python_names.h"

#include <array>
#include <string_view>

namespace nccl_migrate::lint {
namespace {

// Modules whose public names torch.distributed re-exports.
constexpr std::array<std::string_view, 3> kDistributedAliases = {
    "torch.distributed.distributed_c10d",
    "torch._C._distributed_c10d",
    "torch.distributed.c10d",
};

std::string_view headOf(std::string_view dotted) {
  return dotted.substr(0, dotted.find('.'));
}

}  // namespace

std::string canonicalPythonName(const std::string& qualified) {
  for (std::string_view alias : kDistributedAliases) {
    if (qualified == alias) return "torch.distributed";
    if (qualified.size() > alias.size() && qualified.starts_with(alias) &&
        qualified[alias.size()] == '.') {
      return "torch.distributed" + qualified.substr(alias.size());
    }
  }
  return qualified;
}

// Built-in re-export paths first, then the project's equivalences (which may name a path that
// itself needs canonicalising).
std::string PythonNames::canonical(const std::string& qualified) const {
  std::string name = canonicalPythonName(qualified);
  if (!equivalents_) return name;
  for (const auto& [from, to] : *equivalents_) {
    if (name == from) return canonicalPythonName(to);
    if (name.size() > from.size() && name.starts_with(from) && name[from.size()] == '.') {
      return canonicalPythonName(to + name.substr(from.size()));
    }
  }
  return name;
}

void PythonNames::bindImport(const std::string& dottedName, const std::string& alias) {
  if (!alias.empty()) {
    bindings_[alias] = canonical(dottedName);
    return;
  }
  std::string head(headOf(dottedName));
  bindings_[head] = head;
}

void PythonNames::bindFromImport(const std::string& module, const std::string& name,
                                 const std::string& alias) {
  bindings_[alias.empty() ? name : alias] = canonical(module + "." + name);
}

void PythonNames::bindAssignment(const std::string& name, const std::string& qualified) {
  bindings_[name] = qualified;
}

void PythonNames::bindSaved(const std::string& place, const std::string& qualified) {
  if (!qualified.empty()) saved_[place] = qualified;
}

std::string PythonNames::saved(const std::string& place) const {
  auto it = saved_.find(place);
  return it == saved_.end() ? "" : it->second;
}

void PythonNames::bindLocalDefinition(const std::string& name) { bindings_[name] = ""; }

std::string PythonNames::qualify(const std::string& dotted) const {
  std::string_view head = headOf(dotted);
  auto it = bindings_.find(std::string(head));
  if (it == bindings_.end() || it->second.empty()) return "";
  return canonical(it->second + dotted.substr(head.size()));
}

}  // namespace nccl_migrate::lint
