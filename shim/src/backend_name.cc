// Resolution of NCCL backend names and TORCH_DIST_USE_NCCL2 (see backend_name.h for the contract).
#include "nccl_migrate/shim/backend_name.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "text.h"

namespace nccl_migrate::shim {
namespace {

// Values people write meaning "off" that torch does not treat as "0".
bool looksLikeOff(std::string_view value) {
  constexpr std::array<std::string_view, 9> kOffSpellings = {"false", "off", "no",      "n", "f",
                                                             "legacy", "disable", "disabled", "o"};
  std::string v = lowered(trimmed(value));
  if (v != value && v == "0") return true;  // " 0", "0\n"
  if (!v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return c == '0'; }) && v != "0") return true;
  return std::find(kOffSpellings.begin(), kOffSpellings.end(), v) != kOffSpellings.end();
}

std::string typoWarning(const std::string& value) {
  std::string var(kUseNccl2Variable);
  std::string accepted = "Accepted values: 0 (legacy), 1 or unset (rewritten).";
  if (looksLikeOff(value)) {
    return var + "=\"" + value + "\" keeps the rewritten backend: torch selects legacy only for the exact "
           "value 0. Set " + var + "=0 to select legacy, or unset it for the rewritten backend. " + accepted;
  }
  return var + "=\"" + value + "\" selects the rewritten backend only because torch treats every value "
         "except 0 that way. Write " + var + "=1 (or unset it) for the rewritten backend, or " + var +
         "=0 for legacy. " + accepted;
}

NameResolution resolvePlainNccl(std::optional<std::string_view> useNccl2) {
  std::string var(kUseNccl2Variable);
  if (!useNccl2) return {Behaviour::Rewritten, "\"nccl\" is the rewritten backend by default (" + var + " unset)", {}};
  std::string value(*useNccl2);
  // The exact comparison torch 2.15 makes: os.environ.get("TORCH_DIST_USE_NCCL2") == "0".
  if (value == "0") return {Behaviour::Legacy, "\"nccl\" falls back to legacy because " + var + "=0", {}};
  NameResolution r{Behaviour::Rewritten, "\"nccl\" is the rewritten backend (" + var + "=\"" + value + "\")", {}};
  if (value != "1") r.warning = typoWarning(value);
  return r;
}

}  // namespace

std::string_view behaviourName(Behaviour behaviour) {
  switch (behaviour) {
    case Behaviour::Legacy: return "legacy";
    case Behaviour::Rewritten: return "rewritten";
    case Behaviour::RewrittenLazyP2P: return "rewritten-lazy-p2p";
  }
  return "unknown";
}

bool isDefaultNcclName(std::string_view name) { return lowered(name) == "nccl"; }

std::optional<NameResolution> resolveNcclName(std::string_view name,
                                              std::optional<std::string_view> useNccl2) {
  std::string n = lowered(name);
  if (n == "nccl") return resolvePlainNccl(useNccl2);
  if (n == "nccl2") return NameResolution{Behaviour::Rewritten, "\"nccl2\" always names the rewritten backend", {}};
  if (n == "nccl-lazy") {
    return NameResolution{Behaviour::RewrittenLazyP2P,
                          "\"nccl-lazy\" is the rewritten backend with lazy per-peer p2p communicators", {}};
  }
  if (n == "nccl-legacy") return NameResolution{Behaviour::Legacy, "\"nccl-legacy\" always names the legacy backend", {}};
  return std::nullopt;
}

}  // namespace nccl_migrate::shim
