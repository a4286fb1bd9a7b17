// Checks resolveBackend against every row of resolution_table.json, the expectations the
// Python suite checks too.
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nccl_migrate/shim/resolution.h"

namespace nccl_migrate::shim {
namespace {

using nlohmann::json;

json loadTable() {
  std::ifstream in(NCCL_MIGRATE_RESOLUTION_TABLE);
  EXPECT_TRUE(in.good()) << "cannot open " << NCCL_MIGRATE_RESOLUTION_TABLE;
  return json::parse(in);
}

std::optional<std::string> optionalString(const json& value) {
  if (value.is_null()) return std::nullopt;
  return value.get<std::string>();
}

TorchCapabilities capabilitiesOf(const json& torch, bool gpu) {
  return TorchCapabilities{torch.at("version").get<std::string>(), optionalString(torch.at("legacy")),
                           optionalString(torch.at("rewritten")), optionalString(torch.at("rewritten-lazy-p2p")),
                           gpu};
}

JobSettings settingsOf(const json& env) {
  return JobSettings{optionalString(env.at("TORCH_DIST_USE_NCCL2")), optionalString(env.at("NCCL_MIGRATE_IMPL")),
                     optionalString(env.at("PYTORCH_ALLOC_CONF")), optionalString(env.at("PYTORCH_CUDA_ALLOC_CONF"))};
}

json nameOrNull(const std::optional<Behaviour>& behaviour) {
  return behaviour ? json(std::string(behaviourName(*behaviour))) : json(nullptr);
}

json nameOrNull(const std::optional<Implementation>& implementation) {
  return implementation ? json(std::string(implementationName(*implementation))) : json(nullptr);
}

std::string allWarnings(const Resolution& r) {
  std::string out;
  for (const auto& w : r.warnings) out += w + "\n";
  return out;
}

void expectContains(const std::string& text, const json& expect, const char* key) {
  if (!expect.contains(key)) return;
  auto part = expect.at(key).get<std::string>();
  EXPECT_NE(text.find(part), std::string::npos) << key << " \"" << part << "\" not in: " << text;
}

TEST(ResolutionTable, EveryRowResolvesAsTheContractSays) {
  json table = loadTable();
  ASSERT_FALSE(table.at("rows").empty());
  for (const json& row : table.at("rows")) {
    SCOPED_TRACE("row " + row.at("id").get<std::string>());
    const json& expect = row.at("expect");
    Resolution r = resolveBackend(row.at("backend").get<std::string>(), settingsOf(row.at("env")),
                                  capabilitiesOf(table.at("torch").at(row.at("torch").get<std::string>()),
                                                 row.at("gpu").get<bool>()));
    EXPECT_EQ(r.backend, expect.at("backend").get<std::string>());
    EXPECT_EQ(nameOrNull(r.behaviour), expect.at("behaviour"));
    EXPECT_EQ(nameOrNull(r.implementation), expect.at("implementation"));
    EXPECT_EQ(r.error.has_value(), expect.at("error").get<bool>()) << r.error.value_or("(no error)");
    EXPECT_EQ(!r.warnings.empty(), expect.at("warning").get<bool>()) << allWarnings(r);
    EXPECT_FALSE(r.reason.empty());
    expectContains(r.reason, expect, "reason_contains");
    expectContains(r.error.value_or(""), expect, "error_contains");
    expectContains(allWarnings(r), expect, "warning_contains");
  }
}

// Guards the table itself: the full cross product must stay in it.
TEST(ResolutionTable, CoversEveryCombination) {
  json table = loadTable();
  std::set<std::string> seen;
  for (const json& row : table.at("rows")) {
    const json& env = row.at("env");
    if (!env.at("PYTORCH_ALLOC_CONF").is_null() || !env.at("PYTORCH_CUDA_ALLOC_CONF").is_null()) continue;
    seen.insert(row.at("backend").dump() + env.at("TORCH_DIST_USE_NCCL2").dump() + env.at("NCCL_MIGRATE_IMPL").dump() +
                row.at("torch").dump() + row.at("gpu").dump());
  }
  int missing = 0;
  for (const char* backend : {"nccl", "nccl2", "nccl-lazy", "nccl-legacy", "gloo", "cpu:gloo,cuda:nccl"}) {
    for (json use : {json(nullptr), json("0"), json("1"), json("false")}) {
      for (json impl : {json(nullptr), json("auto"), json("torch"), json("toolkit"), json("tourch")}) {
        for (const char* torch : {"2.15", "next-release", "2.13"}) {
          for (bool gpu : {true, false}) {
            std::string key = json(backend).dump() + use.dump() + impl.dump() + json(torch).dump() + json(gpu).dump();
            if (seen.count(key) == 0) ++missing;
          }
        }
      }
    }
  }
  EXPECT_EQ(missing, 0);
}

}  // namespace
}  // namespace nccl_migrate::shim
