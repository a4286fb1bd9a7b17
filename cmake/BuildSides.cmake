# Which sides a build makes: NCCL_MIGRATE_BUILD_LINT (the lint and the C++ CLI; needs LLVM 19)
# and NCCL_MIGRATE_BUILD_BACKENDS (the c10d backends and the Python module; needs torch).
#
# In-tree builds make both, and stop when either dependency is missing (tools/setup.sh installs
# them). A wheel build (scikit-build-core sets SKBUILD) makes what the machine it runs on allows,
# because pip builds the sdist on the user's machine:
#  - the torch side where the build's Python imports torch: pip's --no-build-isolation, over the
#    torch the user has installed; pip's default isolated build has no torch;
#  - the lint where LLVM 19's static Clang libraries are installed; without them the wheel's
#    `nccl-migrate` command runs the torch-side commands alone (cmake/TorchSideCommand.cmake), and
#    the lint comes from the lint wheel (pipx install nccl-migrate).
# An explicit -D (tools/wheel.sh passes both) overrides either default.

set(NCCL_MIGRATE_LLVM_ROOT "/usr/lib/llvm-19" CACHE PATH "Root of the LLVM/Clang install")

set(_lint_default ON)
set(_backends_default ON)
if(SKBUILD)
  if(NOT EXISTS "${NCCL_MIGRATE_LLVM_ROOT}/lib/cmake/clang/ClangConfig.cmake"
     OR NOT EXISTS "${NCCL_MIGRATE_LLVM_ROOT}/lib/libclangTooling.a")
    set(_lint_default OFF)
  endif()
  execute_process(COMMAND "${Python_EXECUTABLE}" -c "import torch" RESULT_VARIABLE _no_torch OUTPUT_QUIET ERROR_QUIET)
  if(_no_torch)
    set(_backends_default OFF)
  endif()
endif()
option(NCCL_MIGRATE_BUILD_BACKENDS "Build the c10d backends and the Python module (needs torch)" ${_backends_default})
option(NCCL_MIGRATE_BUILD_LINT "Build the linter and the nccl-migrate CLI (needs LLVM/Clang 19)" ${_lint_default})

if(SKBUILD)
  if(NOT NCCL_MIGRATE_BUILD_LINT AND NOT NCCL_MIGRATE_BUILD_BACKENDS)
    message(FATAL_ERROR
      "nccl-migrate: nothing to build here: ${Python_EXECUTABLE} has no torch, and there is no LLVM 19 at "
      "${NCCL_MIGRATE_LLVM_ROOT} for the lint.\n"
      "  The torch side builds against the torch already installed, which pip's isolated build does not see: "
      "install torch (2.11 to 2.15) and the build tools, then build without isolation:\n"
      "    pip install scikit-build-core cmake ninja \"cuda-toolkit[crt,cccl]\"\n"
      "    pip install --no-build-isolation --no-binary nccl-migrate \"nccl-migrate[torch]\"\n"
      "  The lint alone needs no build: pip install nccl-migrate (the py3-none wheel).")
  endif()
  if(NOT NCCL_MIGRATE_BUILD_BACKENDS)
    message(STATUS "nccl-migrate: no torch in ${Python_EXECUTABLE} (an isolated build?); building the lint side only")
  endif()
  if(NOT NCCL_MIGRATE_BUILD_LINT)
    message(STATUS "nccl-migrate: no LLVM 19 at ${NCCL_MIGRATE_LLVM_ROOT}; building the torch side only "
                   "(the lint comes as its own wheel: pipx install nccl-migrate)")
  endif()
endif()
