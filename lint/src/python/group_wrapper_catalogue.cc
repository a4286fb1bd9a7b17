// Reads the compiled-in catalogue (group_wrapper_catalogue.h) with toml++.
#include "python/group_wrapper_catalogue.h"

#include <map>
#include <string_view>

#include "engine/toml.h"
#include "python/python_project.h"

namespace nccl_migrate::lint {

// lint/data/group_wrappers.toml, as CMake wrote it into the build (group_wrapper_catalogue_data.cc).
extern const char* const kGroupWrapperCatalogue;

const std::vector<KnownWrapper>& groupWrapperCatalogue() {
  static const std::vector<KnownWrapper> rows = [] {
    std::vector<KnownWrapper> out;
    toml::parse_result parsed = toml::parse(std::string_view(kGroupWrapperCatalogue));
    if (!parsed) return out;  // a build whose catalogue does not parse: its test says so
    const toml::array* wrappers = parsed.table()["wrapper"].as_array();
    if (!wrappers) return out;
    for (const toml::node& node : *wrappers) {
      const toml::table* row = node.as_table();
      if (!row) continue;
      KnownWrapper w{(*row)["module"].value_or(std::string()), (*row)["function"].value_or(std::string()),
                     (*row)["creates"].value_or(std::string()), (*row)["source"].value_or(std::string())};
      if (!w.module.empty() && !w.function.empty() && !w.creates.empty()) out.push_back(std::move(w));
    }
    return out;
  }();
  return rows;
}

namespace {

// The rows whose one call creates a group per block of ranks: module functions and classes (a
// `Class.method` row is called on objects, and goes through the wrapper table instead).
bool createsManyGroupsInOneCall(const KnownWrapper& row) {
  return row.creates.starts_with("torch.distributed.new_subgroups") && row.function.find('.') == std::string::npos;
}

// Whether the tree's `module` lies in the package that holds the row's module (`megatron.core` for
// `megatron.core.mpu`; a top-level module its own package). Tree modules are named from where lint
// found them, so the package may stand after a folder's components (`src.megatron.core.x`); under a
// tests folder (`tests.vllm.fake_state`) it is a test's stand-in, not the library.
bool inRowsPackage(const std::string& module, const std::string& rowModule) {
  size_t dot = rowModule.rfind('.');
  std::string package = dot == std::string::npos ? rowModule : rowModule.substr(0, dot);
  std::string dotted = "." + module + ".";
  size_t at = dotted.find("." + package + ".");
  if (at == std::string::npos) return false;
  std::string before = dotted.substr(0, at + 1);
  for (const char* folder : {".tests.", ".test.", ".testing.", ".unit_tests."})
    if (before.find(folder) != std::string::npos) return false;
  return true;
}

}  // namespace

std::string manyGroupsCreatorFor(const std::string& qualified) {
  static const std::map<std::string, std::string, std::less<>> creators = [] {
    std::map<std::string, std::string, std::less<>> out;
    for (const KnownWrapper& row : groupWrapperCatalogue())
      if (createsManyGroupsInOneCall(row)) out[row.module + "." + row.function] = row.creates;
    return out;
  }();
  auto it = creators.find(qualified);
  return it == creators.end() ? "" : it->second;
}

std::set<std::string> libraryFunctionsTreeDefines(const std::set<std::string>& inferredWrappers,
                                                  const std::set<std::string>& treeModules) {
  std::set<std::string> out;
  for (const KnownWrapper& row : groupWrapperCatalogue()) {
    if (!createsManyGroupsInOneCall(row)) continue;
    for (const std::string& key : inferredWrappers) {
      // A module's function only: a method or nested function of that name (a test double's) is
      // no definition of the library's function.
      if (key.find('#') != std::string::npos) continue;
      std::string module = key.substr(0, key.find(':'));
      if (module.empty() || groupWrapperName(key) != row.function || !treeModules.contains(module)) continue;
      // Any module of the row's package: the tree is that library (or its copy), and a row naming
      // a re-export or another name of the module (`megatron.core.mpu`) is the same function.
      if (moduleNamedBy(module, row.module) || inRowsPackage(module, row.module)) {
        out.insert(row.module + "." + row.function);
        break;
      }
    }
  }
  return out;
}

std::vector<Trigger> manyGroupsCreatorTriggers(const std::set<std::string>& treeDefines) {
  // By the library's top-level package, a word every import of it writes (`import apex`, `from
  // fairscale.nn...`): a module's last name (`initialize`, `parallel_state`) is also in every
  // file of a tree that defines a function of the same name, which would then be parsed for it.
  std::map<std::string, std::set<std::string>> byPackage;
  for (const KnownWrapper& row : groupWrapperCatalogue())
    if (createsManyGroupsInOneCall(row) && !treeDefines.contains(row.module + "." + row.function))
      byPackage[row.module.substr(0, row.module.find('.'))].insert(row.function);
  std::vector<Trigger> out;
  // The package as the trigger's module: a package declared equivalent to it (equivalent-modules)
  // counts as its mention too.
  for (const auto& [package, functions] : byPackage)
    out.push_back(Trigger{{functions.begin(), functions.end()}, {}, package});
  return out;
}

}  // namespace nccl_migrate::lint
