# The `nccl-migrate` command of a wheel built without the lint side (no LLVM 19 where the sdist
# was built): a Python script, whose `#!python` line the installer points at the environment's
# interpreter (the wheel format's rule for scripts), running the torch-side commands as the C++
# CLI does. Included by WheelContents.cmake.
configure_file("${CMAKE_CURRENT_LIST_DIR}/nccl-migrate-torch-side.py.in" "${CMAKE_BINARY_DIR}/wheel-scripts/nccl-migrate" @ONLY)
install(PROGRAMS "${CMAKE_BINARY_DIR}/wheel-scripts/nccl-migrate" DESTINATION "${SKBUILD_SCRIPTS_DIR}")
