# What a wheel holds (scikit-build-core installs these into it; pyproject.toml): the nccl-migrate
# binary as the console command, Clang's builtin headers where that binary looks for them, and
# the nccl_migrate package with its native modules built against this build's torch. A build
# without the lint side gets a command that runs the torch-side commands alone instead.

# The [torch] extra admits a range of torch releases; a build against a torch outside it would
# make a package that pip then installs next to a torch it was never built for.
include(TorchRange)
if(NCCL_MIGRATE_BUILD_BACKENDS)
  nccl_migrate_check_torch_range("${NCCL_MIGRATE_TORCH_VERSION}")
endif()

if(NCCL_MIGRATE_BUILD_LINT)
  if(NOT NCCL_MIGRATE_STATIC_CLANG)
    message(FATAL_ERROR "nccl-migrate: a wheel's binary must link Clang statically; drop -DNCCL_MIGRATE_STATIC_CLANG=OFF")
  endif()
  # Installed to the environment's bin/ as it is: no Python wrapper between the user and lint.
  install(TARGETS nccl-migrate RUNTIME DESTINATION "${SKBUILD_SCRIPTS_DIR}")
  # The C/C++ frontends' module where the installed binary looks for it (lint/CMakeLists.txt),
  # out of bin/, which pipx and others expose on the user's PATH.
  install(TARGETS nccl_migrate_lint_cpp LIBRARY DESTINATION "${SKBUILD_DATA_DIR}/${NCCL_MIGRATE_LINT_CPP_MODULE_DIR}")
  install(DIRECTORY "${NCCL_MIGRATE_CLANG_RESOURCE_DIR}/include"
          DESTINATION "${SKBUILD_DATA_DIR}/share/nccl-migrate/clang")
else()
  include(TorchSideCommand)
endif()

set(_python_source "${PROJECT_SOURCE_DIR}/python")
install(FILES "${_python_source}/nccl_migrate_autoload.py" "${_python_source}/nccl_migrate_launcher.py"
        DESTINATION "${SKBUILD_PLATLIB_DIR}")
install(DIRECTORY "${_python_source}/nccl_migrate" DESTINATION "${SKBUILD_PLATLIB_DIR}"
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
if(NCCL_MIGRATE_BUILD_BACKENDS)
  # torch's libraries are loaded by `import torch` before ours, so $ORIGIN (for the backends
  # library beside _C) is the only search path the modules need.
  set_target_properties(nccl_migrate_python nccl_migrate_backends PROPERTIES INSTALL_RPATH "$ORIGIN")
  install(TARGETS nccl_migrate_python nccl_migrate_backends LIBRARY DESTINATION "${SKBUILD_PLATLIB_DIR}/nccl_migrate")
  install(FILES "${NCCL_MIGRATE_PACKAGE_OUTPUT_DIR}/nccl_migrate/torch_build.json"
          DESTINATION "${SKBUILD_PLATLIB_DIR}/nccl_migrate")
endif()
