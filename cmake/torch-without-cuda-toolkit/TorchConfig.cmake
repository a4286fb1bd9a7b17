# torch's CMake package, for a CUDA build of torch on a machine without the CUDA toolkit
# (cmake/TorchWithoutCudaToolkit.cmake chooses it). torch's own TorchConfig.cmake stops there:
# its Caffe2Config.cmake runs public/cuda.cmake, which needs nvcc, and then fails with "Your
# installed Caffe2 version uses CUDA but I cannot find the CUDA libraries". Our sources are
# host C++ calling the CUDA runtime and NCCL, which torch's wheel brings with it: its nvidia-*
# packages carry the runtime's headers and libcudart, and nvidia-nccl NCCL's (two header parts
# it leaves out come from nvidia-cuda-crt and nvidia-cuda-cccl, below). So this config
# loads torch's own exported targets (Caffe2Targets.cmake: the libraries, their include
# directories and compile definitions, exactly as torch's config would) and gives the targets
# they link but that public/cuda.cmake would have made from the toolkit: torch::cudart from the
# nvidia packages, and the CPU-side ones (caffe2::mkl, protobuf::libprotobuf) empty, as they are
# in torch's wheel (linked into libtorch_cpu). Found by TorchWheel.cmake's find_package(Torch),
# which has set _torch_prefix to torch's share/cmake.

get_filename_component(_nm_torch_root "${_torch_prefix}/../.." ABSOLUTE)

# The nvidia namespace package, wherever pip put its parts (torch's site-packages, a venv's own).
execute_process(COMMAND "${NCCL_MIGRATE_PYTHON_EXECUTABLE}" -c "import nvidia; print(';'.join(nvidia.__path__))"
  OUTPUT_VARIABLE _nm_nvidia_dirs OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(_nm_cudart_headers "")
set(_nm_cudart_libs "")
set(_nm_crt_headers "")
set(_nm_cccl_headers "")
set(_nm_nvidia_includes "")
foreach(_nm_dir IN LISTS _nm_nvidia_dirs)
  # The CUDA runtime: nvidia/cu13 (CUDA 13's wheels), nvidia/cuda_runtime (CUDA 12's).
  file(GLOB _nm_found "${_nm_dir}/*/include/cuda_runtime_api.h")
  list(APPEND _nm_cudart_headers ${_nm_found})
  file(GLOB _nm_found "${_nm_dir}/*/lib/libcudart.so*")
  list(APPEND _nm_cudart_libs ${_nm_found})
  file(GLOB _nm_found "${_nm_dir}/*/include/crt/host_defines.h")
  list(APPEND _nm_crt_headers ${_nm_found})
  file(GLOB _nm_found "${_nm_dir}/*/include/nv/target")
  list(APPEND _nm_cccl_headers ${_nm_found})
  # Every nvidia package's headers: torch's CUDA headers include cuBLAS's, cuSPARSE's and others'.
  file(GLOB _nm_found LIST_DIRECTORIES true "${_nm_dir}/*/include")
  list(APPEND _nm_nvidia_includes ${_nm_found})
endforeach()
if(NOT _nm_cudart_headers OR NOT _nm_cudart_libs)
  nccl_migrate_missing("the CUDA runtime's headers and library of torch's wheel (nvidia/*/include/cuda_runtime_api.h, lib/libcudart.so* in ${_nm_nvidia_dirs})"
    "reinstall torch from PyPI (its CUDA runtime package carries them), or install the CUDA toolkit and put its nvcc on PATH")
endif()
# Two parts of the runtime's headers that torch's wheel leaves out: crt/ (cuda_runtime_api.h
# includes crt/host_defines.h), which comes with nvcc or alone in nvidia-cuda-crt, and CCCL's
# nv/target (cuda_fp16.h, which nccl.h includes, includes it), in nvidia-cuda-cccl. The `crt` and
# `cccl` extras of the cuda-toolkit package name both at the version of the cuda-toolkit torch
# installed, which pip keeps.
if(NOT _nm_crt_headers OR NOT _nm_cccl_headers)
  nccl_migrate_missing("the CUDA runtime headers torch's wheel leaves out (crt/host_defines.h and nv/target, under nvidia/*/include in ${_nm_nvidia_dirs})"
    "pip install \"cuda-toolkit[crt,cccl]\" (headers only, at the CUDA version torch installed; no CUDA toolkit needed), then build again")
endif()
list(GET _nm_cudart_headers 0 _nm_cudart_header)
get_filename_component(_nm_cudart_include "${_nm_cudart_header}" DIRECTORY)
list(SORT _nm_cudart_libs)
list(GET _nm_cudart_libs 0 _nm_cudart_lib)
list(REMOVE_DUPLICATES _nm_nvidia_includes)

if(NOT TARGET CUDA::cudart)
  add_library(CUDA::cudart SHARED IMPORTED)
  set_target_properties(CUDA::cudart PROPERTIES
    IMPORTED_LOCATION "${_nm_cudart_lib}"
    INTERFACE_INCLUDE_DIRECTORIES "${_nm_cudart_include}")
endif()
if(NOT TARGET torch::cudart)
  add_library(torch::cudart INTERFACE IMPORTED)
  set_target_properties(torch::cudart PROPERTIES
    INTERFACE_LINK_LIBRARIES CUDA::cudart
    INTERFACE_INCLUDE_DIRECTORIES "${_nm_nvidia_includes}")
endif()
foreach(_nm_empty IN ITEMS caffe2::mkl protobuf::libprotobuf)
  if(NOT TARGET ${_nm_empty})
    add_library(${_nm_empty} INTERFACE IMPORTED)
  endif()
endforeach()

include("${_torch_prefix}/Caffe2/Caffe2Targets.cmake")

# As torch's TorchConfig.cmake: the include directories, the C++ API's among them, and the
# libraries, torch's first.
set(TORCH_INCLUDE_DIRS "${_nm_torch_root}/include" "${_nm_torch_root}/include/torch/csrc/api/include")
set_property(TARGET torch APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}")
set(TORCH_LIBRARIES torch torch_library c10)
set(TORCH_CXX_FLAGS "")
set(Torch_FOUND TRUE)
message(STATUS "nccl-migrate: no CUDA toolkit; torch's targets with the CUDA runtime of its wheel (${_nm_cudart_lib})")
