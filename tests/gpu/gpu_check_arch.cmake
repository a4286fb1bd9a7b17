# Included into the GPU check's configure by tools/gpu-check.sh (CMAKE_PROJECT_nccl_migrate_INCLUDE):
# every target that compiles device code builds it for the machine's own GPU alone
# (NCCL_MIGRATE_GPU_CHECK_ARCH, e.g. 90 on a Hopper), not for every generation a release ships,
# so that the build fits the check's window. The project's own lists stay as they are; this only
# runs once every directory has made its targets.
if(NOT NCCL_MIGRATE_GPU_CHECK_ARCH MATCHES "^[0-9]+[a-z]?$")
  message(FATAL_ERROR "NCCL_MIGRATE_GPU_CHECK_ARCH='${NCCL_MIGRATE_GPU_CHECK_ARCH}': give the GPU's compute "
                      "capability without the dot (90 for 9.0)")
endif()

function(_gpu_check_own_architecture directory)
  get_property(_targets DIRECTORY "${directory}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(_target IN LISTS _targets)
    get_target_property(_architectures ${_target} CUDA_ARCHITECTURES)
    if(_architectures)
      set_target_properties(${_target} PROPERTIES CUDA_ARCHITECTURES "${NCCL_MIGRATE_GPU_CHECK_ARCH}-real")
      message(STATUS "nccl-migrate GPU check: ${_target} builds for sm_${NCCL_MIGRATE_GPU_CHECK_ARCH} only "
                     "(not ${_architectures})")
    endif()
  endforeach()
  get_property(_subdirectories DIRECTORY "${directory}" PROPERTY SUBDIRECTORIES)
  foreach(_subdirectory IN LISTS _subdirectories)
    _gpu_check_own_architecture("${_subdirectory}")
  endforeach()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _gpu_check_own_architecture "${CMAKE_SOURCE_DIR}")
