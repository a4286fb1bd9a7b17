# Whether torch's CMake package can be used as it is. torch's TorchConfig.cmake, for a CUDA build
# of torch (every torch wheel on PyPI), needs the CUDA toolkit: it finds nvcc and enables the CUDA
# language. Our host C++ needs only the CUDA runtime and NCCL, which torch's wheel brings, and a
# user building the sdist has a C++ compiler and that wheel, not necessarily the toolkit. So:
#  - with a CUDA toolkit: torch's package, and the A/B recorder's GPU digest kernel (python/digest) is
#    compiled too;
#  - without: cmake/torch-without-cuda-toolkit/TorchConfig.cmake, torch's own targets with the
#    CUDA runtime of its wheel; the backends, NCCL included, build the same, and the A/B
#    recorder digests CUDA tensors on the host.
# NCCL_MIGRATE_USE_CUDA_TOOLKIT=OFF takes the second way where a toolkit is installed too.
# A toolkit is a directory with bin/nvcc and include/cuda_runtime_api.h, where torch's CMake
# (its FindCUDA) looks: CUDA_TOOLKIT_ROOT_DIR, CUDA_HOME, CUDA_PATH, the nvcc on PATH (a wrapper
# script in /usr/local/bin with no headers beside it is none), /usr/local/cuda.
find_program(NCCL_MIGRATE_NVCC nvcc)
set(_toolkit_candidates "${CUDA_TOOLKIT_ROOT_DIR}" "$ENV{CUDA_HOME}" "$ENV{CUDA_PATH}")
if(NCCL_MIGRATE_NVCC)
  get_filename_component(_nvcc_real "${NCCL_MIGRATE_NVCC}" REALPATH)
  get_filename_component(_nvcc_root "${_nvcc_real}/../.." ABSOLUTE)
  list(APPEND _toolkit_candidates "${_nvcc_root}")
endif()
list(APPEND _toolkit_candidates /usr/local/cuda)
set(_cuda_toolkit_default OFF)
foreach(_candidate IN LISTS _toolkit_candidates)
  if(_candidate AND EXISTS "${_candidate}/bin/nvcc" AND EXISTS "${_candidate}/include/cuda_runtime_api.h")
    set(_cuda_toolkit_default ON)
    break()
  endif()
endforeach()
option(NCCL_MIGRATE_USE_CUDA_TOOLKIT "Load torch through its own CMake package, which needs the CUDA toolkit" ${_cuda_toolkit_default})

set(_without_toolkit_dir "${CMAKE_CURRENT_LIST_DIR}/torch-without-cuda-toolkit")
if(NCCL_MIGRATE_USE_CUDA_TOOLKIT)
  if(Torch_DIR STREQUAL _without_toolkit_dir)
    unset(Torch_DIR CACHE)   # a reconfigure after the toolkit was installed
  endif()
else()
  set(Torch_DIR "${_without_toolkit_dir}" CACHE PATH "torch's CMake package" FORCE)
  message(STATUS "nccl-migrate: no CUDA toolkit (nvcc); the torch side builds with the C++ compiler alone")
endif()
