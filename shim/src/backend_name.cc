// Resolution of NCCL backend names and TORCH_DIST_USE_NCCL2 (see backend_name.h for the contract).
#include "nccl_migrate/shim/backend_name.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace nccl_migrate::shim {
namespace {

std::string lowered(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string trimmed(std::string_view text) {
  auto isSpace = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!text.empty() && isSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && isSpace(text.back())) text.remove_suffix(1);
  return std::string(text);
}

// Values people write meaning "off" that torch does not treat as "0".
bool looksLikeOff(std::string_view value) {
  constexpr std::array<std::string_view, 7> kOffSpellings = {"false", "off", "no", "n", "f", "legacy", "disable"};
  std::string v = lowered(trimmed(value));
  if (v != value && v == "0") return true;  // " 0", "0\n"
  if (!v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return c == '0'; }) && v != "0") return true;
  return std::find(kOffSpellings.begin(), kOffSpellings.end(), v) != kOffSpellings.end();
}

NameResolution resolvePlainNccl(std::optional<std::string_view> useNccl2) {
  std::string var(kUseNccl2Variable);
  if (!useNccl2) return {Behaviour::Rewritten, "\"nccl\" is the rewritten backend by default (" + var + " unset)", {}};
  std::string value(*useNccl2);
  if (value == "0") return {Behaviour::Legacy, "\"nccl\" falls back to legacy because " + var + "=0", {}};
  NameResolution r{Behaviour::Rewritten, "\"nccl\" is the rewritten backend (" + var + "=" + value + ")", {}};
  if (looksLikeOff(value)) {
    r.warning = var + "=\"" + value + "\" keeps the rewritten backend: torch selects legacy only for "
                "the exact value 0. Set " + var + "=0 to select legacy, or unset it for the rewritten backend.";
  }
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
