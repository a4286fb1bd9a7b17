// The JSON documents the linter writes (its JSON and SARIF reports): keys in the order written.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

namespace nccl_migrate::lint {

using Json = nlohmann::ordered_json;

// Two-space indentation and a final newline.
void writeJsonDocument(const Json& document, std::ostream& out);

}  // namespace nccl_migrate::lint
