# The Python parser of the linter: the tree-sitter C runtime and the tree-sitter-python grammar,
# fetched from PyPI as pinned, hash-checked source archives at configure time and compiled into
# the linter. Nothing of them is committed. Both speak grammar ABI 14: the 0.23.x grammar sdists
# ship scanner.c (0.25.0's does not), and the 0.24 runtime's parser.h is the header they were
# generated against.
set(NCCL_MIGRATE_TS_RUNTIME_VERSION 0.24.0)
set(NCCL_MIGRATE_TS_RUNTIME_SHA256 abd95af65ca2f4f7eca356343391ed669e764f37748b5352946f00f7fc78e734)
set(NCCL_MIGRATE_TS_PYTHON_VERSION 0.23.6)
set(NCCL_MIGRATE_TS_PYTHON_SHA256 354bfa0a2f9217431764a631516f85173e9711af2c13dbd796a8815acfe505d9)

set(_ts_dir "${CMAKE_BINARY_DIR}/_deps/tree-sitter")
find_package(Python3 COMPONENTS Interpreter REQUIRED)

# pip is the registry client that reaches PyPI here; it downloads the sdist without building it.
function(_nccl_migrate_fetch_sdist package version sha256 out_var)
  string(REPLACE "-" "_" _stem "${package}")
  set(_archive "${_ts_dir}/${_stem}-${version}.tar.gz")
  if(NOT EXISTS "${_archive}")
    file(GLOB _alt "${_ts_dir}/${package}-${version}.tar.gz")
    if(_alt)
      list(GET _alt 0 _archive)
    endif()
  endif()
  if(NOT EXISTS "${_archive}")
    message(STATUS "nccl-migrate: fetching ${package}==${version} source from PyPI")
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -m pip download --quiet --no-deps --no-binary :all:
              --dest "${_ts_dir}" "${package}==${version}"
      RESULT_VARIABLE _rc ERROR_VARIABLE _err)
    file(GLOB _found "${_ts_dir}/${_stem}-${version}.tar.gz" "${_ts_dir}/${package}-${version}.tar.gz")
    if(NOT _rc EQUAL 0 OR NOT _found)
      nccl_migrate_missing("the source archive of ${package}==${version}"
        "make PyPI reachable for pip, or place ${_stem}-${version}.tar.gz in ${_ts_dir} (pip error: ${_err})")
    endif()
    list(GET _found 0 _archive)
  endif()
  file(SHA256 "${_archive}" _actual)
  if(NOT _actual STREQUAL sha256)
    file(REMOVE "${_archive}")
    message(FATAL_ERROR "nccl-migrate: ${_archive} has sha256 ${_actual}, expected ${sha256}; "
                        "it was removed, re-run cmake to fetch it again.")
  endif()
  set(_src "${_ts_dir}/src/${package}-${version}")
  if(NOT EXISTS "${_src}")
    file(ARCHIVE_EXTRACT INPUT "${_archive}" DESTINATION "${_ts_dir}/src")
    file(GLOB _extracted LIST_DIRECTORIES true "${_ts_dir}/src/${_stem}-${version}" "${_ts_dir}/src/${package}-${version}")
    list(GET _extracted 0 _dir)
    if(NOT _dir STREQUAL _src)
      file(RENAME "${_dir}" "${_src}")
    endif()
  endif()
  set(${out_var} "${_src}" PARENT_SCOPE)
endfunction()

_nccl_migrate_fetch_sdist(tree-sitter ${NCCL_MIGRATE_TS_RUNTIME_VERSION} ${NCCL_MIGRATE_TS_RUNTIME_SHA256} _runtime)
_nccl_migrate_fetch_sdist(tree-sitter-python ${NCCL_MIGRATE_TS_PYTHON_VERSION} ${NCCL_MIGRATE_TS_PYTHON_SHA256} _grammar)

# The grammar's sources include <tree_sitter/parser.h> (with alloc.h and array.h), which the
# tree-sitter CLI copies from the runtime's lib/src when it generates a grammar; the 0.23.6
# sdist omits them, so take them from the pinned runtime.
set(_grammar_include "${_ts_dir}/grammar-include")
foreach(_header parser.h alloc.h array.h)
  configure_file("${_runtime}/tree_sitter/core/lib/src/${_header}" "${_grammar_include}/tree_sitter/${_header}" COPYONLY)
endforeach()

add_library(tree_sitter_python STATIC
  "${_runtime}/tree_sitter/core/lib/src/lib.c"
  "${_grammar}/src/parser.c"
  "${_grammar}/src/scanner.c")
set_target_properties(tree_sitter_python PROPERTIES C_STANDARD 11 POSITION_INDEPENDENT_CODE ON)
target_include_directories(tree_sitter_python
  PRIVATE "${_grammar_include}" "${_runtime}/tree_sitter/core/lib/src" "${_grammar}/src"
  SYSTEM PUBLIC "${_runtime}/tree_sitter/core/lib/include")
target_compile_options(tree_sitter_python PRIVATE -w -O2)
target_compile_definitions(tree_sitter_python PRIVATE _POSIX_C_SOURCE=200112L _DEFAULT_SOURCE)
message(STATUS "nccl-migrate: tree-sitter ${NCCL_MIGRATE_TS_RUNTIME_VERSION} + tree-sitter-python ${NCCL_MIGRATE_TS_PYTHON_VERSION}")
