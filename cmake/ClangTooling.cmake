# Clang LibTooling from Debian's LLVM 19 packages (the newest in bookworm main). We link the
# shared libclang-cpp and libLLVM so the CLI links in seconds, not minutes.
set(NCCL_MIGRATE_LLVM_ROOT "/usr/lib/llvm-19" CACHE PATH "Root of the LLVM/Clang install")
find_package(Clang CONFIG QUIET PATHS "${NCCL_MIGRATE_LLVM_ROOT}/lib/cmake/clang" NO_DEFAULT_PATH)
if(NOT Clang_FOUND)
  nccl_migrate_missing("Clang LibTooling (LLVM 19)"
    "apt-get install llvm-19-dev libclang-19-dev libclang-cpp19-dev clang-19, or set NCCL_MIGRATE_LLVM_ROOT")
endif()
message(STATUS "nccl-migrate: Clang ${LLVM_PACKAGE_VERSION} from ${NCCL_MIGRATE_LLVM_ROOT}")

# LibTooling computes the builtin-header directory relative to the tool binary, which is wrong
# for a tool outside the LLVM tree; pin it to the real one at build time.
find_program(NCCL_MIGRATE_CLANG clang-19 clang PATHS "${NCCL_MIGRATE_LLVM_ROOT}/bin" NO_DEFAULT_PATH)
if(NCCL_MIGRATE_CLANG)
  execute_process(COMMAND ${NCCL_MIGRATE_CLANG} -print-resource-dir
                  OUTPUT_VARIABLE NCCL_MIGRATE_CLANG_RESOURCE_DIR OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()

add_library(nccl_migrate_clang INTERFACE)
target_include_directories(nccl_migrate_clang SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS} ${CLANG_INCLUDE_DIRS})
target_link_libraries(nccl_migrate_clang INTERFACE clang-cpp LLVM)
target_compile_definitions(nccl_migrate_clang INTERFACE
  NCCL_MIGRATE_CLANG_RESOURCE_DIR="${NCCL_MIGRATE_CLANG_RESOURCE_DIR}")
