// Name resolution for Python sources: which module or object a local name stands for.
// Modules torch re-exports under several paths map to one canonical spelling, so rules
// compare against a single qualified name.
#pragma once

#include <map>
#include <string>
#include <unordered_map>

namespace nccl_migrate::lint {

class PythonNames {
 public:
  // `import a.b` binds `a`; `import a.b as c` binds `c` to `a.b`.
  void bindImport(const std::string& dottedName, const std::string& alias);
  // `from m import n as a` binds `a` (or `n`) to `m.n`.
  void bindFromImport(const std::string& module, const std::string& name, const std::string& alias);
  // `x = <expr>` where expr qualified to `qualified` (empty: x now shadows whatever it was).
  void bindAssignment(const std::string& name, const std::string& qualified);
  // `class X:` or `def X` defined here: X is the project's own, not an imported one.
  void bindLocalDefinition(const std::string& name);

  // Qualified, canonical name of a dotted reference such as "dist.ProcessGroupNCCL";
  // empty when its head is not bound to an import (a local variable, a builtin, unknown).
  std::string qualify(const std::string& dotted) const;
  bool isBuiltin(const std::string& name) const { return !bindings_.contains(name); }

  // A function of torch kept where a plain name does not hold it: a class's attribute
  // ("Registry._orig_new_group", set in the class body, on self/cls, or on the class) or a dict's
  // entry ("_ORIGINALS[new_group]", "Registry._saved[new_group]"), as code that patches torch
  // keeps the original. `qualified` is the function's name. The place may hold it from then on,
  // whatever else is assigned to it (a restore that clears it runs after the calls through it).
  void bindSaved(const std::string& place, const std::string& qualified);
  // The function saved at `place`, empty if none.
  std::string saved(const std::string& place) const;

  // Modules the project treats as another ("deepspeed.comm" -> "torch.distributed").
  void setEquivalentModules(const std::map<std::string, std::string>* equivalents) { equivalents_ = equivalents; }

 private:
  std::string canonical(const std::string& qualified) const;

  std::unordered_map<std::string, std::string> bindings_;  // local name -> qualified ("" = local)
  std::unordered_map<std::string, std::string> saved_;     // place -> qualified torch function
  const std::map<std::string, std::string>* equivalents_ = nullptr;
};

// "torch.distributed.distributed_c10d.X" -> "torch.distributed.X", and the same for the
// C extension module; anything else is returned unchanged.
std::string canonicalPythonName(const std::string& qualified);

}  // namespace nccl_migrate::lint
