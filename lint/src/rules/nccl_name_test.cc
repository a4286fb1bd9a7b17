// The helpers behind NM201's fixes, written once, from one list of names.
#include "nccl_name_test.h"

#include <array>

namespace nccl_migrate::lint {
namespace {

// What name() / getBackendName() report for the legacy backend, the rewritten one and nccl-lazy;
// the toolkit's backends report the name of the behaviour they run.
constexpr std::array<const char*, 3> kNames = {"nccl", "nccl2", "nccl-lazy"};

std::string joined(const char* separator, const std::string& before, const std::string& after) {
  std::string out;
  for (const char* n : kNames) out += (out.empty() ? "" : separator) + before + n + after;
  return out;
}

}  // namespace

std::string pythonNcclBackendHelperName() { return "_is_nccl_backend"; }

// Every line fits in 79 columns and is as `ruff format` writes it, so the helper reads the same
// in any project's layout; the names are tuples of their own for that reason.
std::string pythonNcclBackendHelper() {
  return "def " + pythonNcclBackendHelperName() +
         "(obj, classes=()):\n"
         "    \"\"\"Whether obj is a backend that runs NCCL, on any torch, or of classes.\"\"\"\n"
         "    from torch._C import _distributed_c10d as c10d\n"
         "\n"
         "    names = \"ProcessGroupNCCL\", \"ProcessGroupNCCL2\", \"ProcessGroupNCCLLazy\"\n"
         "    if isinstance(obj, (classes, *(getattr(c10d, n, ()) for n in names))):\n"
         "        return True\n"
         "    if not isinstance(obj, c10d.Backend):\n"
         "        return False\n"
         "    # The toolkit's backends reach Python as a Backend named for what it runs.\n"
         "    nccl_names = " + joined(", ", "\"", "\"") + "\n"
         "    try:\n"
         "        return obj.name() in nccl_names\n"
         "    except RuntimeError:  # a Backend subclass that does not name itself\n"
         "        return False\n";
}

std::string cppNcclBackendHelperName() { return "asNcclBackend"; }

// Inline and guarded by one macro: a fixed header and a fixed source that includes it each carry
// the helper, and a translation unit must see one definition.
std::string cppNcclBackendHelper() {
  return "#ifndef NCCL_MIGRATE_AS_NCCL_BACKEND\n"
         "#define NCCL_MIGRATE_AS_NCCL_BACKEND\n"
         "// The backend where it runs NCCL (torch's legacy or rewritten backend, or the toolkit's), else\n"
         "// null: what a dynamic_cast to the legacy c10d::ProcessGroupNCCL tested for null now asks.\n"
         "template <typename BackendPointer>\n"
         "inline BackendPointer " + cppNcclBackendHelperName() + "(const BackendPointer& backend) {\n"
         "  if (!backend) return BackendPointer();\n"
         "  std::string name;\n"
         "  try {\n"
         "    name = backend->getBackendName();\n"
         "  } catch (const std::exception&) {  // a Backend that does not name itself: not NCCL's\n"
         "    return BackendPointer();\n"
         "  }\n"
         "  if (" + joined(" || ", "name == \"", "\"") + ") return backend;\n"
         "  return BackendPointer();\n"
         "}\n"
         "#endif  // NCCL_MIGRATE_AS_NCCL_BACKEND\n";
}

}  // namespace nccl_migrate::lint
