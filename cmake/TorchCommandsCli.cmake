# A build without the lint side (-DNCCL_MIGRATE_BUILD_LINT=OFF, e.g. on a machine without
# LLVM) has no C++ CLI. Its torch-side commands are `python -m nccl_migrate_launcher` in any case, so
# <build>/migrate/nccl-migrate is generated as a script that runs them the way the C++ CLI does
# (same interpreter, the build's package directory first on PYTHONPATH) and tells what to do
# for lint and rules. Tests and scripts reach both CLIs by the same path.
configure_file("${CMAKE_CURRENT_LIST_DIR}/nccl-migrate-torch-commands.sh.in"
  "${CMAKE_BINARY_DIR}/migrate/nccl-migrate" @ONLY
  FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
