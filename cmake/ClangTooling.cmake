# Clang LibTooling from Debian's LLVM 19 packages (the newest in bookworm main). In-tree builds
# link the shared libclang-cpp and libLLVM so the CLI links in seconds, not minutes. The
# distributed binary (NCCL_MIGRATE_STATIC_CLANG, on in wheel builds) links the Clang and LLVM
# archives it uses instead, so it runs where no LLVM is installed.
set(NCCL_MIGRATE_LLVM_ROOT "/usr/lib/llvm-19" CACHE PATH "Root of the LLVM/Clang install")
find_package(Clang CONFIG QUIET PATHS "${NCCL_MIGRATE_LLVM_ROOT}/lib/cmake/clang" NO_DEFAULT_PATH)
if(NOT Clang_FOUND)
  nccl_migrate_missing("Clang LibTooling (LLVM 19)"
    "apt-get install llvm-19-dev libclang-19-dev libclang-cpp19-dev clang-19, or set NCCL_MIGRATE_LLVM_ROOT")
endif()
message(STATUS "nccl-migrate: Clang ${LLVM_PACKAGE_VERSION} from ${NCCL_MIGRATE_LLVM_ROOT}")

# Clang's builtin headers (stddef.h, the intrinsics) live in its resource directory, which
# LibTooling would compute relative to our binary, wrongly. In-tree builds pin the real one;
# the distributed binary ships a copy and looks it up relative to itself first
# (lint/src/cpp/clang_resource_dir.cc).
find_program(NCCL_MIGRATE_CLANG clang-19 clang PATHS "${NCCL_MIGRATE_LLVM_ROOT}/bin" NO_DEFAULT_PATH)
if(NCCL_MIGRATE_CLANG)
  execute_process(COMMAND ${NCCL_MIGRATE_CLANG} -print-resource-dir
                  OUTPUT_VARIABLE NCCL_MIGRATE_CLANG_RESOURCE_DIR OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
# Where an installed binary finds the shipped copy: <prefix>/bin/nccl-migrate reads
# <prefix>/share/nccl-migrate/clang (the wheel's data directory lands in the venv's prefix).
set(NCCL_MIGRATE_CLANG_RESOURCE_FROM_BINARY "../share/nccl-migrate/clang")

add_library(nccl_migrate_clang INTERFACE)
target_include_directories(nccl_migrate_clang SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS} ${CLANG_INCLUDE_DIRS})
target_compile_definitions(nccl_migrate_clang INTERFACE
  NCCL_MIGRATE_CLANG_RESOURCE_DIR="${NCCL_MIGRATE_CLANG_RESOURCE_DIR}"
  NCCL_MIGRATE_CLANG_RESOURCE_FROM_BINARY="${NCCL_MIGRATE_CLANG_RESOURCE_FROM_BINARY}")

if(NOT NCCL_MIGRATE_STATIC_CLANG)
  target_link_libraries(nccl_migrate_clang INTERFACE clang-cpp LLVM)
  return()
endif()

# Debian's exported clang* targets link the shared libLLVM, so name the archives directly. The
# Clang libraries the lint's includes reach (Tooling, Frontend, AST matchers, Lex, Basic) and
# what they pull in; LLVM's components as llvm-config lists them for those.
set(_clang_archives clangTooling clangToolingCore clangToolingInclusions clangToolingInclusionsStdlib clangFormat
    clangRewrite clangFrontend clangDriver clangParse clangSerialization clangSema clangAPINotes clangEdit
    clangAnalysis clangASTMatchers clangAST clangSupport clangLex clangBasic)
set(_clang_archive_files "")
foreach(_lib IN LISTS _clang_archives)
  set(_file "${NCCL_MIGRATE_LLVM_ROOT}/lib/lib${_lib}.a")
  if(NOT EXISTS "${_file}")
    nccl_migrate_missing("the static Clang library ${_file}" "apt-get install libclang-19-dev")
  endif()
  list(APPEND _clang_archive_files "${_file}")
endforeach()
execute_process(
  COMMAND "${NCCL_MIGRATE_LLVM_ROOT}/bin/llvm-config" --link-static --libfiles
          support option frontendopenmp frontendoffloading frontenddriver frontendhlsl mc mcparser bitreader
          bitstreamreader profiledata core binaryformat remarks demangle targetparser windowsdriver
  OUTPUT_VARIABLE _llvm_archive_files RESULT_VARIABLE _llvm_rc ERROR_VARIABLE _llvm_err
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _llvm_rc EQUAL 0)
  nccl_migrate_missing("LLVM's static libraries (${_llvm_err})" "apt-get install llvm-19-dev")
endif()
separate_arguments(_llvm_archive_files UNIX_COMMAND "${_llvm_archive_files}")
# LLVM's compression support needs zlib and zstd: their archives, so no libz/libzstd is needed
# where the binary runs.
foreach(_lib z zstd)
  find_library(NCCL_MIGRATE_STATIC_${_lib} NAMES lib${_lib}.a)
  if(NOT NCCL_MIGRATE_STATIC_${_lib})
    nccl_migrate_missing("the static lib${_lib}.a" "apt-get install zlib1g-dev libzstd-dev")
  endif()
endforeach()
# One link group: the archives refer to each other in cycles.
target_link_libraries(nccl_migrate_clang INTERFACE
  -Wl,--start-group ${_clang_archive_files} ${_llvm_archive_files} -Wl,--end-group
  ${NCCL_MIGRATE_STATIC_z} ${NCCL_MIGRATE_STATIC_zstd} ${CMAKE_DL_LIBS})
message(STATUS "nccl-migrate: linking Clang and LLVM statically")
