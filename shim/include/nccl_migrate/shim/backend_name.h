// Which NCCL behaviour a backend name selects, the way torch 2.15 decides it. Pure logic:
// no torch, no NCCL, so the C++ backends, the CLI and the Python package all share it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace nccl_migrate::shim {

enum class Behaviour {
  Legacy,            // many communicators per group, created lazily (ProcessGroupNCCL)
  Rewritten,         // one communicator per group, device-bound (nccl2)
  RewrittenLazyP2P,  // rewritten plus lazy 2-rank communicators per p2p peer pair (nccl-lazy)
};

std::string_view behaviourName(Behaviour behaviour);

// The variable torch 2.15 reads to route "nccl" back to the legacy backend.
inline constexpr std::string_view kUseNccl2Variable = "TORCH_DIST_USE_NCCL2";

struct NameResolution {
  Behaviour behaviour;
  std::string why;                     // one sentence a user can read in `doctor`
  std::optional<std::string> warning;  // set when the variable's value is neither 0 nor 1
};

// Resolves `name` ("nccl", "nccl2", "nccl-lazy", "nccl-legacy"; case-insensitive like torch's
// Backend names). `useNccl2` is the variable's value, or nullopt when unset. Returns nullopt
// for names that are not NCCL backends (gloo, mpi, a custom one).
//
// torch 2.15 selects legacy for "nccl" only when the variable is exactly "0"; every other
// value, including "false" or "off", silently keeps the rewritten backend. We match that and
// warn about every value other than 0 and 1, most firmly about those that look like an attempt
// to turn the rewritten backend off. Explicit names do not read the variable, so never warn.
std::optional<NameResolution> resolveNcclName(std::string_view name,
                                              std::optional<std::string_view> useNccl2);

// Whether `name` is torch's default NCCL name, "nccl" in any case: the one name whose behaviour
// TORCH_DIST_USE_NCCL2 decides.
bool isDefaultNcclName(std::string_view name);

}  // namespace nccl_migrate::shim
