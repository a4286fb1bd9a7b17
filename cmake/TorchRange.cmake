# The torch releases the torch side supports: the [torch] extra's requirement in pyproject.toml
# (`torch>=LOW,<HIGH`), the one place they are named. nccl_migrate_check_torch_range(VERSION)
# stops a build against a torch outside them, naming both.
file(STRINGS "${PROJECT_SOURCE_DIR}/pyproject.toml" _torch_extra REGEX "^torch = \\[\"torch>=")
if(NOT _torch_extra MATCHES "\"torch>=([0-9.]+),<([0-9.]+)\"")
  message(FATAL_ERROR "nccl-migrate: pyproject.toml's [torch] extra does not read torch>=LOW,<HIGH (found '${_torch_extra}')")
endif()
set(NCCL_MIGRATE_TORCH_LOWEST "${CMAKE_MATCH_1}")
set(NCCL_MIGRATE_TORCH_BELOW "${CMAKE_MATCH_2}")

function(nccl_migrate_check_torch_range version)
  string(REGEX REPLACE "[+].*" "" release "${version}")
  if(release VERSION_LESS NCCL_MIGRATE_TORCH_LOWEST OR NOT release VERSION_LESS NCCL_MIGRATE_TORCH_BELOW)
    message(FATAL_ERROR "nccl-migrate: this build environment has torch ${version}; the torch side supports "
                        "torch>=${NCCL_MIGRATE_TORCH_LOWEST},<${NCCL_MIGRATE_TORCH_BELOW} (pyproject.toml's [torch] extra). "
                        "Install a torch in that range first, then build again.")
  endif()
endfunction()
