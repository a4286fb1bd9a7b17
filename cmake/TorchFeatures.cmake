# What the torch being built against offers, read from its headers at configure time, so one
# source tree builds against torch 2.11 through 2.15: each feature becomes a compile definition
# NCCL_MIGRATE_TORCH_HAS_<NAME>=0|1 on the nccl_migrate_torch_features target (the backends link
# it publicly), and a row of torch_features.inc, which _C.torch_features() turns into the table
# `nccl-migrate doctor` prints. A feature torch lacks is compiled out, never a build failure.
#
# Detection reads declarations from the headers (a line match, or a header's presence) instead
# of compiling a probe per feature: every probe would parse torch's c10d headers, seconds each.
# Needs _torch_root (TorchWheel.cmake).

set(_tf_include "${_torch_root}/include")
set(_tf_c10d "${_tf_include}/torch/csrc/distributed/c10d")
if(NOT EXISTS "${_tf_c10d}/Backend.hpp")
  nccl_migrate_missing("torch's c10d headers (${_tf_c10d}/Backend.hpp)"
    "install a torch wheel built with distributed support into ${NCCL_MIGRATE_PYTHON_EXECUTABLE}'s environment")
endif()

add_library(nccl_migrate_torch_features INTERFACE)
set(NCCL_MIGRATE_TORCH_FEATURES_PRESENT "")
set(NCCL_MIGRATE_TORCH_FEATURES_MISSING "")
set(NCCL_MIGRATE_TORCH_FEATURES_ADAPTED "")
set(_tf_rows "")

# nccl_migrate_torch_feature(NAME KIND "what it is, and what lacking it means" CHECK...)
# KIND is `feature` (something torch offers that is lost without it) or `adapted` (older torch
# spells it differently or lacks it, and the toolkit makes up for it: nothing is lost). Each
# check is HEADER:<path under c10d/ or include/> (the header exists) or
# DECL:<path>:<regex> (a line of the header matches); all checks must hold.
function(nccl_migrate_torch_feature name kind what)
  set(present 1)
  foreach(check IN LISTS ARGN)
    if(check MATCHES "^HEADER:(.*)$")
      set(path "${_tf_include}/${CMAKE_MATCH_1}")
      if(NOT EXISTS "${path}")
        set(present 0)
      endif()
    elseif(check MATCHES "^DECL:([^:]*):(.*)$")
      set(path "${_tf_include}/${CMAKE_MATCH_1}")
      set(regex "${CMAKE_MATCH_2}")
      set(lines "")
      if(EXISTS "${path}")
        file(STRINGS "${path}" lines REGEX "${regex}")
      endif()
      if(NOT lines)
        set(present 0)
      endif()
    else()
      message(FATAL_ERROR "nccl_migrate_torch_feature(${name}): bad check '${check}' (use HEADER:path or DECL:path:regex)")
    endif()
  endforeach()
  if(NOT kind MATCHES "^(feature|adapted)$")
    message(FATAL_ERROR "nccl_migrate_torch_feature(${name}): kind '${kind}' is neither feature nor adapted")
  endif()
  string(TOUPPER "${name}" upper)
  target_compile_definitions(nccl_migrate_torch_features INTERFACE NCCL_MIGRATE_TORCH_HAS_${upper}=${present})
  string(REPLACE "\"" "'" what "${what}")
  set(_tf_rows "${_tf_rows}NCCL_MIGRATE_TORCH_FEATURE(\"${name}\", NCCL_MIGRATE_TORCH_HAS_${upper}, \"${kind}\", \"${what}\")\n" PARENT_SCOPE)
  if(present)
    set(NCCL_MIGRATE_TORCH_FEATURES_PRESENT "${NCCL_MIGRATE_TORCH_FEATURES_PRESENT};${name}" PARENT_SCOPE)
  elseif(kind STREQUAL "adapted")
    set(NCCL_MIGRATE_TORCH_FEATURES_ADAPTED "${NCCL_MIGRATE_TORCH_FEATURES_ADAPTED};${name}" PARENT_SCOPE)
  else()
    set(NCCL_MIGRATE_TORCH_FEATURES_MISSING "${NCCL_MIGRATE_TORCH_FEATURES_MISSING};${name}" PARENT_SCOPE)
  endif()
endfunction()

set(_tf "torch/csrc/distributed/c10d")
nccl_migrate_torch_feature(headeronly_version adapted
  "torch/headeronly/version.h (older torch: torch/version.h is read instead)"
  HEADER:torch/headeronly/version.h)
nccl_migrate_torch_feature(nccl2 feature
  "torch's rewritten NCCL backend, c10d::nccl2::ProcessGroupNCCL (nccl2/ProcessGroupNCCL.hpp); without it NCCL_MIGRATE_IMPL=torch cannot run the rewritten behaviour"
  HEADER:${_tf}/nccl2/ProcessGroupNCCL.hpp)
nccl_migrate_torch_feature(nccl2_lazy feature
  "torch's rewritten NCCL backend with lazy p2p communicators, c10d::nccl2::ProcessGroupNCCLLazy; without it NCCL_MIGRATE_IMPL=torch cannot run nccl-lazy"
  HEADER:${_tf}/nccl2/ProcessGroupNCCLLazy.hpp)
nccl_migrate_torch_feature(shrink feature
  "Backend::shrink and supportsShrinking; without them dist.shrink_group cannot shrink the toolkit's groups"
  "DECL:${_tf}/Backend.hpp:supportsShrinking")
nccl_migrate_torch_feature(reconfigure feature
  "Backend::reconfigure, get_reconfigure_handle, supportsReconfigure, ReconfigureOptions; without them groups cannot use enable_reconfigure or dist._reconfigure"
  "DECL:${_tf}/Backend.hpp:supportsReconfigure" "DECL:${_tf}/Types.hpp:struct ReconfigureOptions")
nccl_migrate_torch_feature(abort_hooks feature
  "Backend::registerAbortHook, supportsAbortHooks and c10d::AbortHook; without them ProcessGroup.register_abort_hook does not reach the toolkit's backends"
  "DECL:${_tf}/Backend.hpp:registerAbortHook")
nccl_migrate_torch_feature(health_check feature
  "c10d::HealthCheck (hooks/HealthCheck.hpp), the registry HealthCheckHook marks backends unhealthy in; without it _C.unhealthy_backends() raises"
  HEADER:${_tf}/hooks/HealthCheck.hpp)
nccl_migrate_torch_feature(process_group_hooks feature
  "ProcessGroup pre/post op hooks (Hooks.hpp); without them A/B runs record only ops issued from Python, not those issued from C++ (DDP's reducer)"
  HEADER:${_tf}/Hooks.hpp)
nccl_migrate_torch_feature(single_collective_names adapted
  "Backend::all_gather_single, reduce_scatter_single, all_to_all_single and their _coalesced forms; older torch calls _allgather_base, _reduce_scatter_base, alltoall_base and the *_tensor_coalesced names, which the engine then implements instead"
  "DECL:${_tf}/Backend.hpp:all_gather_single\\(")
nccl_migrate_torch_feature(gather_single feature
  "Backend::gather_single (dist.gather_into_tensor); without it that op does not exist in torch"
  "DECL:${_tf}/Backend.hpp:Work> gather_single\\(")
nccl_migrate_torch_feature(premul_sum_names adapted
  "c10d::PreMulSumSupplement and makePreMulSum; older torch names them NCCLPreMulSumSupplement and makeNCCLPreMulSum, which the toolkit then aliases"
  "DECL:${_tf}/Types.hpp:struct PreMulSumSupplement")
nccl_migrate_torch_feature(gloo_alltoall adapted
  "ProcessGroupGloo::alltoall (the list form); older torch's Gloo has only the flat alltoall_base, which the CPU communicator then packs the lists into"
  "DECL:${_tf}/ProcessGroupGloo.hpp:Work> alltoall\\(")
nccl_migrate_torch_feature(gloo_set_timeout adapted
  "ProcessGroupGloo::setTimeout; older torch's Gloo keeps the timeout it was made with, so a CPU communicator is made with the group's and its connect may then wait up to five times that for a peer that died inside it"
  "DECL:${_tf}/ProcessGroupGloo.hpp:void setTimeout\\(")
nccl_migrate_torch_feature(work_timeout feature
  "Work::getTimeout; without it a toolkit Work's timeout is not visible through torch's Work"
  "DECL:${_tf}/Work.hpp:getTimeout\\(")

# The table _C.torch_features() is built from; rewritten only when it changes, so an unchanged
# configure does not recompile the module.
file(CONFIGURE OUTPUT "${CMAKE_BINARY_DIR}/generated/nccl_migrate/torch_features.inc"
  CONTENT "// Generated by cmake/TorchFeatures.cmake from torch ${NCCL_MIGRATE_TORCH_VERSION}'s headers.\n${_tf_rows}"
  @ONLY)
target_include_directories(nccl_migrate_torch_features INTERFACE "${CMAKE_BINARY_DIR}/generated")

foreach(_tf_list PRESENT MISSING ADAPTED)
  list(REMOVE_ITEM NCCL_MIGRATE_TORCH_FEATURES_${_tf_list} "")
  list(JOIN NCCL_MIGRATE_TORCH_FEATURES_${_tf_list} ", " _tf_${_tf_list})
endforeach()
message(STATUS "nccl-migrate: torch ${NCCL_MIGRATE_TORCH_VERSION} has: ${_tf_PRESENT}")
if(_tf_MISSING)
  message(STATUS "nccl-migrate: torch ${NCCL_MIGRATE_TORCH_VERSION} lacks (compiled out; doctor lists them): ${_tf_MISSING}")
endif()
if(_tf_ADAPTED)
  message(STATUS "nccl-migrate: torch ${NCCL_MIGRATE_TORCH_VERSION} lacks these, which the toolkit makes up for: ${_tf_ADAPTED}")
endif()
