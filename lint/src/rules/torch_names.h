// Names of torch's distributed API and backend values, shared by the rules that test them.
#pragma once

#include <string>
#include <string_view>

#include "nccl_migrate/lint/source_model.h"

namespace nccl_migrate::lint {

// `qualified` is torch.distributed.<name> (after the frontend's canonicalisation).
inline bool isDistributed(const std::string& qualified, std::string_view name) {
  constexpr std::string_view kPrefix = "torch.distributed.";
  return qualified.size() == kPrefix.size() + name.size() && qualified.starts_with(kPrefix) &&
         qualified.ends_with(name);
}

// A backend string that selects torch's NCCL backend under its default name: "nccl",
// "cuda:nccl" in a device map ("cpu:gloo,cuda:nccl"). Excludes nccl2/nccl-lazy/nccl-legacy,
// which name one implementation explicitly.
inline bool selectsDefaultNccl(const std::string& backend) {
  if (backend == "nccl") return true;
  size_t at = 0;
  while ((at = backend.find("nccl", at)) != std::string::npos) {
    bool startsWord = at == 0 || backend[at - 1] == ':' || backend[at - 1] == ',';
    size_t end = at + 4;
    bool endsWord = end == backend.size() || backend[end] == ',';
    if (startsWord && endsWord) return true;
    at = end;
  }
  return false;
}

}  // namespace nccl_migrate::lint
