// Reads the compiled-in catalogue (group_wrapper_catalogue.h) with toml++.
#include "python/group_wrapper_catalogue.h"

#include <map>
#include <string_view>

#include "engine/toml.h"

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

std::vector<Trigger> manyGroupsCreatorTriggers() {
  std::map<std::string, std::vector<std::string>> byModule;
  for (const KnownWrapper& row : groupWrapperCatalogue())
    if (createsManyGroupsInOneCall(row)) byModule[row.module].push_back(row.function);
  std::vector<Trigger> out;
  for (auto& [module, functions] : byModule) out.push_back(Trigger{std::move(functions), {}, module});
  return out;
}

}  // namespace nccl_migrate::lint
