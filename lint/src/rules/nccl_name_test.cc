// The expressions behind NM201's fixes, written once, from one list of names.
#include "nccl_name_test.h"

#include <array>

namespace nccl_migrate::lint {
namespace {

// What name() / getBackendName() report for the legacy backend, the rewritten one and nccl-lazy;
// the toolkit's backends report the name of the behaviour they run.
constexpr std::array<const char*, 3> kNames = {"nccl", "nccl2", "nccl-lazy"};

}  // namespace

std::string cppRunsNcclLambda() {
  std::string test;
  for (const char* n : kNames) test += std::string(test.empty() ? "" : " || ") + "name == \"" + n + "\"";
  return "[](const auto& backend) { if (!backend) return false; const std::string name = backend->getBackendName(); "
         "return " + test + "; }";
}

std::string pythonNcclNames() {
  std::string tuple;
  for (const char* n : kNames) tuple += std::string(tuple.empty() ? "(" : ", ") + "\"" + n + "\"";
  return tuple + ")";
}

std::string pythonRunsNcclIsinstance() {
  // The toolkit's backends reach Python as torch's Backend binding, their name() telling which
  // behaviour they run; Gloo and other backends report other names.
  return "(lambda obj, classes, c10d=__import__(\"torch\")._C._distributed_c10d: isinstance(obj, (classes, "
         "getattr(c10d, \"ProcessGroupNCCL2\", ()), getattr(c10d, \"ProcessGroupNCCLLazy\", ()))) or "
         "(isinstance(obj, c10d.Backend) and obj.name() in " + pythonNcclNames() + "))";
}

}  // namespace nccl_migrate::lint
