# The oldest glibc the wheel's native files run on, whatever glibc builds them: they ask for no
# symbol version newer than NCCL_MIGRATE_GLIBC_FLOOR. Each symbol that a newer glibc would pin
# (for our code or for the static Clang, LLVM and libstdc++ archives) is sent by ld's --wrap to a
# replacement in cmake/glibc-floor/ that asks only for what the floor has; docs/install.md lists
# them and what stands in the way of a lower floor. tools/wheel.sh tags the lint wheel with the
# floor and tools/check-wheel.sh checks that no shipped file asks for more.
set(NCCL_MIGRATE_GLIBC_FLOOR "2.26" CACHE INTERNAL "The oldest glibc the wheel's native files run on")
if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$")
  message(FATAL_ERROR "nccl-migrate: the wheel's glibc floor (cmake/glibc-floor/) names x86-64's symbol versions; "
                      "this build is for ${CMAKE_SYSTEM_PROCESSOR}")
endif()

set(_floor_dir "${CMAKE_CURRENT_LIST_DIR}/glibc-floor")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_floor_dir}/symbols.c")
# The wrapped names, from the lines that define their replacements: NM_PIN(name, ...) and
# NM_WRAPPER <type> __wrap_name(...).
file(STRINGS "${_floor_dir}/symbols.c" _floor_lines REGEX "^(NM_PIN\\(|NM_WRAPPER [^(]*__wrap_)")
set(_floor_wrapped "")
foreach(_line IN LISTS _floor_lines)
  if(_line MATCHES "^NM_PIN\\(([A-Za-z0-9_]+),")
    list(APPEND _floor_wrapped "${CMAKE_MATCH_1}")
  elseif(_line MATCHES "__wrap_([A-Za-z0-9_]+)\\(")
    list(APPEND _floor_wrapped "${CMAKE_MATCH_1}")
  endif()
endforeach()
set_property(GLOBAL PROPERTY NCCL_MIGRATE_GLIBC_FLOOR_WRAPPED "${_floor_wrapped}")
if(NOT _floor_wrapped)
  message(FATAL_ERROR "GlibcFloor.cmake: found no NM_PIN or NM_WRAPPER line in ${_floor_dir}/symbols.c")
endif()

add_library(nccl_migrate_glibc_floor OBJECT "${_floor_dir}/symbols.c")
add_library(nccl_migrate_glibc_floor_start OBJECT "${_floor_dir}/start.c")
set_target_properties(nccl_migrate_glibc_floor nccl_migrate_glibc_floor_start PROPERTIES
  C_STANDARD 11 C_EXTENSIONS ON C_VISIBILITY_PRESET hidden)

# nccl_migrate_glibc_floor(<target>): links <target> (the executable or a module) for the floor.
function(nccl_migrate_glibc_floor target)
  get_property(_wrapped GLOBAL PROPERTY NCCL_MIGRATE_GLIBC_FLOOR_WRAPPED)
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:nccl_migrate_glibc_floor>)
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "EXECUTABLE")
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:nccl_migrate_glibc_floor_start>)
    list(APPEND _wrapped __libc_start_main)
  endif()
  list(TRANSFORM _wrapped PREPEND "LINKER:--wrap=")
  target_link_options(${target} PRIVATE ${_wrapped})
  # Before glibc 2.34 the pinned pthread and dl functions live in libpthread.so.0 and libdl.so.2,
  # and the math ones in libm.so.6: name all three, even where (2.34 on) they are empty. The C++
  # runtime is linked in, but the unwinder is the system's libgcc_s.so.1: the static one asks for
  # glibc 2.35's _dl_find_object, and every glibc system has libgcc_s (glibc's own thread
  # cancellation loads it).
  target_link_libraries(${target} PRIVATE "-Wl,--push-state,--no-as-needed" "-l:libpthread.so.0" "-l:libdl.so.2"
                        "-l:libm.so.6" "-Wl,--pop-state")
  target_link_options(${target} PRIVATE -static-libstdc++ -shared-libgcc)
endfunction()
