# Precompiled torch headers for the torch-side targets. Parsing ATen's and c10d's headers is most
# of the time of each translation unit that includes them: backends/src/engine/watchdog.cc takes
# 12.7 s alone on the 2-core development machine (GCC 12, -O2 -g), 3.7 s with these headers
# precompiled, and the precompiled header costs 23 s once. One target of torch's own flags alone
# precompiles them and every torch-side target reuses that file (REUSE_FROM), so it is built once
# per build tree. GCC ignores a precompiled header whose flags do not match (-Winvalid-pch says
# so) and parses the headers as usual, so with GCC this never changes what is built, only how
# fast.
# GCC only: Clang takes a precompiled header made with other -D's without a word, and stops the
# build on other differences, so with Clang the headers are parsed as usual.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(_nccl_migrate_pch_default ON)
else()
  set(_nccl_migrate_pch_default OFF)
endif()
option(NCCL_MIGRATE_PRECOMPILE_TORCH_HEADERS "Precompile torch's headers for the torch-side targets (GCC)"
       ${_nccl_migrate_pch_default})

# The headers nearly every torch-side file includes (counted over backends/, python/src and
# tests/backends); a header only some files include stays out, as each file pays for the whole.
set(_nccl_migrate_torch_headers
  <ATen/ATen.h>
  <c10/util/Exception.h>
  <c10/util/Logging.h>
  <torch/csrc/distributed/c10d/Backend.hpp>
  <torch/csrc/distributed/c10d/Store.hpp>
  <torch/csrc/distributed/c10d/Types.hpp>
  <torch/csrc/distributed/c10d/Work.hpp>)

# The owners are object libraries with nothing but torch's flags: GCC refuses a precompiled header
# made with a -D the using file lacks, and each of our targets has -D's of its own.
function(_nccl_migrate_header_owner owner)
  set(anchor "${CMAKE_BINARY_DIR}/generated/${owner}.cc")
  file(CONFIGURE OUTPUT "${anchor}" CONTENT "// The anchor of ${owner}'s precompiled header.\n")
  add_library(${owner} OBJECT "${anchor}")
  target_link_libraries(${owner} PRIVATE ${ARGN})
  set_target_properties(${owner} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()

if(NCCL_MIGRATE_PRECOMPILE_TORCH_HEADERS)
  _nccl_migrate_header_owner(nccl_migrate_torch_headers ${TORCH_LIBRARIES})
  target_precompile_headers(nccl_migrate_torch_headers PRIVATE ${_nccl_migrate_torch_headers})
endif()

# Gives `target` the precompiled header of `owner`.
function(_nccl_migrate_reuse_headers target owner)
  if(NOT NCCL_MIGRATE_PRECOMPILE_TORCH_HEADERS)
    return()
  endif()
  target_precompile_headers(${target} REUSE_FROM ${owner})
  # Executables compile with -fPIE, which GCC's check holds against a header made with -fPIC;
  # code compiled as PIC links into an executable all the same.
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    target_compile_options(${target} PRIVATE -fPIC)
  endif()
endfunction()

function(nccl_migrate_precompile_torch_headers target)
  _nccl_migrate_reuse_headers(${target} nccl_migrate_torch_headers)
endfunction()

# The Python modules also include torch's pybind11 layer (torch/csrc/utils/pybind.h), heavier
# still: their own owner precompiles it on top of torch's headers. Made on first use, once the
# caller has found Python's development files.
function(nccl_migrate_precompile_torch_python_headers target)
  if(NCCL_MIGRATE_PRECOMPILE_TORCH_HEADERS AND NOT TARGET nccl_migrate_torch_python_headers)
    _nccl_migrate_header_owner(nccl_migrate_torch_python_headers ${TORCH_LIBRARIES} Python3::Module)
    target_precompile_headers(nccl_migrate_torch_python_headers PRIVATE ${_nccl_migrate_torch_headers}
                              <torch/csrc/utils/pybind.h>)
  endif()
  _nccl_migrate_reuse_headers(${target} nccl_migrate_torch_python_headers)
endfunction()
