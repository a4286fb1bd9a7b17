# libtorch from the torch wheel in NCCL_MIGRATE_PYTHON_EXECUTABLE's environment, and the NCCL
# that wheel loads at run time (nvidia-nccl-cu13), so the NCCL code path compiles against the
# same NCCL major.minor torch reports.
execute_process(
  COMMAND "${NCCL_MIGRATE_PYTHON_EXECUTABLE}" -c [=[
import os, torch, torch.utils
print(torch.utils.cmake_prefix_path)
print(torch.__version__)
print(torch.version.cuda or "")
print(".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else "")
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
try:
    import nvidia.nccl
    print(os.path.join(list(nvidia.nccl.__path__)[0]))
except ImportError:
    print("")
]=]
  OUTPUT_VARIABLE _torch_facts ERROR_VARIABLE _torch_err RESULT_VARIABLE _torch_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _torch_rc EQUAL 0)
  nccl_migrate_missing("torch in ${NCCL_MIGRATE_PYTHON_EXECUTABLE} (${_torch_err})"
    "run tools/setup.sh (installs torch==2.15.0 into .venv), or pass -DNCCL_MIGRATE_PYTHON_EXECUTABLE=/path/to/python")
endif()
string(REPLACE "\n" ";" _torch_facts "${_torch_facts}")
list(GET _torch_facts 0 _torch_prefix)
list(GET _torch_facts 1 NCCL_MIGRATE_TORCH_VERSION)
list(GET _torch_facts 2 NCCL_MIGRATE_TORCH_CUDA)
list(GET _torch_facts 3 NCCL_MIGRATE_TORCH_NCCL)
list(GET _torch_facts 4 _torch_abi)
list(GET _torch_facts 5 _nccl_root)

list(APPEND CMAKE_PREFIX_PATH "${_torch_prefix}")
# Without a GPU, torch's CMake would try to detect one by running a CUDA program. Our sources are
# host C++ calling the CUDA runtime and NCCL, so no device code is compiled: name the
# architectures (Hopper and Blackwell, the GPUs CUDA 13 targets) instead of probing.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "9.0;10.0")
endif()
find_package(Torch REQUIRED CONFIG)
# TorchConfig puts the ABI define on the torch target; also say it for code that only sees headers.
# C++ and CUDA only: the C targets (tree-sitter) keep the command line they have without torch,
# so a wheel build that turns the torch side on and off (tools/wheel.sh) does not compile them
# again.
add_compile_definitions($<$<COMPILE_LANGUAGE:CXX,CUDA>:_GLIBCXX_USE_CXX11_ABI=${_torch_abi}>)
get_filename_component(_torch_root "${_torch_prefix}/../.." ABSOLUTE)
find_library(NCCL_MIGRATE_TORCH_PYTHON_LIB torch_python PATHS "${_torch_root}/lib" NO_DEFAULT_PATH REQUIRED)
message(STATUS "nccl-migrate: torch ${NCCL_MIGRATE_TORCH_VERSION} (CUDA ${NCCL_MIGRATE_TORCH_CUDA}, NCCL ${NCCL_MIGRATE_TORCH_NCCL}) from ${_torch_root}")

# NCCL: headers and library of the wheel torch loads.
set(NCCL_MIGRATE_HAVE_NCCL OFF)
if(NCCL_MIGRATE_TORCH_CUDA AND _nccl_root AND EXISTS "${_nccl_root}/include/nccl.h")
  file(STRINGS "${_nccl_root}/include/nccl.h" _nccl_defs REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*" "\\1" _nccl_major "${_nccl_defs}")
  string(REGEX REPLACE ".*NCCL_MINOR ([0-9]+).*" "\\1" _nccl_minor "${_nccl_defs}")
  string(REGEX REPLACE ".*NCCL_PATCH ([0-9]+).*" "\\1" _nccl_patch "${_nccl_defs}")
  set(NCCL_MIGRATE_BUILD_NCCL "${_nccl_major}.${_nccl_minor}.${_nccl_patch}")
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" _torch_nccl_mm "${NCCL_MIGRATE_TORCH_NCCL}")
  if(NOT "${_nccl_major}.${_nccl_minor}" STREQUAL "${_torch_nccl_mm}")
    message(FATAL_ERROR "nccl-migrate: NCCL headers ${NCCL_MIGRATE_BUILD_NCCL} (${_nccl_root}) do not match "
                        "the NCCL ${NCCL_MIGRATE_TORCH_NCCL} torch loads; reinstall torch's nvidia-nccl wheel")
  endif()
  file(GLOB _nccl_libs "${_nccl_root}/lib/libnccl.so*")
  list(SORT _nccl_libs)
  list(GET _nccl_libs 0 _nccl_lib)
  add_library(nccl_migrate_nccl INTERFACE)
  # A plain -I, not -isystem: the CUDA toolkit's include directory (an -isystem through torch)
  # carries its own, different nccl.h, and -I directories are searched first.
  target_include_directories(nccl_migrate_nccl BEFORE INTERFACE "${_nccl_root}/include")
  target_link_libraries(nccl_migrate_nccl INTERFACE "${_nccl_lib}")
  # nccl_api.cc static_asserts these against the nccl.h it actually included.
  target_compile_definitions(nccl_migrate_nccl INTERFACE
    NCCL_MIGRATE_EXPECTED_NCCL_MAJOR=${_nccl_major} NCCL_MIGRATE_EXPECTED_NCCL_MINOR=${_nccl_minor})
  set(NCCL_MIGRATE_HAVE_NCCL ON)
  message(STATUS "nccl-migrate: NCCL ${NCCL_MIGRATE_BUILD_NCCL} headers from ${_nccl_root} "
                 "match the NCCL ${NCCL_MIGRATE_TORCH_NCCL} torch ${NCCL_MIGRATE_TORCH_VERSION} reports")
elseif(NCCL_MIGRATE_REQUIRE_NCCL)
  nccl_migrate_missing("NCCL headers matching torch (torch CUDA '${NCCL_MIGRATE_TORCH_CUDA}', nvidia.nccl at '${_nccl_root}')"
    "install a CUDA build of torch (its nvidia-nccl-cu13 wheel carries the headers), or configure with -DNCCL_MIGRATE_REQUIRE_NCCL=OFF to build the CPU path only")
endif()
