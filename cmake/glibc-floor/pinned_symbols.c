/* Lets the wheel's binary and module, linked on a newer glibc, run on glibc 2.28 and later.
 * Linked only into wheel builds (cmake/GlibcFloor.cmake), which route every reference to the
 * symbols below through these definitions with ld's --wrap. docs/install.md says, symbol by
 * symbol, why each one is here and what still stands between the wheel and an older glibc. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>

#define NM_HIDDEN __attribute__((visibility("hidden")))

/* A function that moved or got a new version without changing what it takes or returns: its
 * wrapper jumps to the older version, which every glibc from 2.2.5 on still exports. */
#define NM_PIN(name, version)                                                 \
  __asm__(".symver nm_pinned_" #name ", " #name "@" version "\n"              \
          ".section .text.nm_wrap_" #name ",\"ax\",@progbits\n"               \
          ".globl __wrap_" #name "\n"                                         \
          ".hidden __wrap_" #name "\n"                                        \
          ".type __wrap_" #name ", @function\n"                               \
          "__wrap_" #name ":\n"                                               \
          "\tjmp nm_pinned_" #name "@PLT\n"                                   \
          ".size __wrap_" #name ", .-__wrap_" #name "\n"                      \
          ".previous\n")

/* glibc 2.34 moved libpthread and libdl into libc and gave their functions a GLIBC_2.34 version;
 * the GLIBC_2.2.5 ones are the same code, found in libpthread.so.0 and libdl.so.2 on older
 * systems (GlibcFloor.cmake keeps both in DT_NEEDED for that). */
#define NM_PTHREAD_AND_DL_PINS(X) \
  X(pthread_create) X(pthread_detach) X(pthread_join) X(pthread_once) X(pthread_key_create) \
  X(__pthread_key_create) X(pthread_getspecific) X(pthread_setspecific) X(pthread_key_delete) \
  X(pthread_getattr_np) X(pthread_attr_setstacksize) X(pthread_sigmask) X(pthread_kill) \
  X(pthread_mutexattr_init) X(pthread_mutexattr_settype) X(pthread_mutexattr_destroy) \
  X(pthread_cond_clockwait) X(pthread_setname_np) X(pthread_getname_np) \
  X(dlopen) X(dlsym) X(dlclose) X(dlerror) X(dladdr) X(dladdr1) X(dlinfo) X(dlvsym) \
  X(dl_iterate_phdr)
#define NM_PIN_BASE(name) NM_PIN(name, "GLIBC_2.2.5");

/* glibc 2.29 gave these new versions that drop the SVID error-handling wrapper (matherr); the
 * results and errno are the same under the default POSIX error handling. */
#define NM_MATH_PINS(X) X(exp) X(log) X(pow) X(exp2) X(log2)
