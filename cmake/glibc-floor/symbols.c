/* What lets the wheel's binary and C/C++ module, linked on a newer glibc, load on the glibc of the
 * wheel's floor (NCCL_MIGRATE_GLIBC_FLOOR in cmake/GlibcFloor.cmake). Linked into wheel builds
 * only: ld's --wrap sends every reference to a symbol named below, in our code and in the static
 * Clang, LLVM and libstdc++ archives alike, to its __wrap_ definition here. GlibcFloor.cmake
 * reads the names from the NM_PIN and NM_WRAPPER lines, so this file is the one list.
 * docs/install.md says, symbol by symbol, who asks for each one and why its replacement behaves
 * the same. */
#define _GNU_SOURCE
#include <malloc.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define NM_WRAPPER __attribute__((visibility("hidden")))

/* A function that glibc moved between its libraries or gave a new version without changing what
 * it takes or returns: the wrapper jumps (the caller's return address intact, which dlopen and
 * dlsym read) to the older version, which glibc still exports. */
#define NM_PIN(name, version)                                  \
  __asm__(".symver nm_pinned_" #name ", " #name "@" version "\n" \
          ".section .text.nm_wrap_" #name ",\"ax\",@progbits\n"  \
          ".globl __wrap_" #name "\n"                            \
          ".hidden __wrap_" #name "\n"                           \
          ".type __wrap_" #name ", @function\n"                  \
          "__wrap_" #name ":\n"                                  \
          "\tjmp nm_pinned_" #name "@PLT\n"                      \
          ".size __wrap_" #name ", .-__wrap_" #name "\n"         \
          ".previous\n")

/* glibc 2.34 moved libpthread and libdl into libc, giving their functions a GLIBC_2.34 version
 * (pthread_sigmask had got GLIBC_2.32 that way); the older versions are the same functions, which
 * glibc before 2.34 has in libpthread.so.0 and libdl.so.2 (GlibcFloor.cmake links both in). */
NM_PIN(pthread_create, "GLIBC_2.2.5");
NM_PIN(pthread_detach, "GLIBC_2.2.5");
NM_PIN(pthread_join, "GLIBC_2.2.5");
NM_PIN(pthread_once, "GLIBC_2.2.5");
NM_PIN(__pthread_key_create, "GLIBC_2.2.5");
/* libstdc++'s condition_variable.o (std::notify_all_at_thread_exit's per-thread list) */
NM_PIN(pthread_key_create, "GLIBC_2.2.5");
NM_PIN(pthread_key_delete, "GLIBC_2.2.5");
NM_PIN(pthread_getspecific, "GLIBC_2.2.5");
NM_PIN(pthread_setspecific, "GLIBC_2.2.5");
NM_PIN(pthread_attr_setstacksize, "GLIBC_2.2.5");
NM_PIN(pthread_rwlock_rdlock, "GLIBC_2.2.5");
NM_PIN(pthread_rwlock_wrlock, "GLIBC_2.2.5");
NM_PIN(pthread_rwlock_unlock, "GLIBC_2.2.5");
NM_PIN(pthread_sigmask, "GLIBC_2.2.5");
NM_PIN(pthread_getname_np, "GLIBC_2.12");
NM_PIN(pthread_setname_np, "GLIBC_2.12");
NM_PIN(dlopen, "GLIBC_2.2.5");
NM_PIN(dlsym, "GLIBC_2.2.5");
NM_PIN(dlclose, "GLIBC_2.2.5");
NM_PIN(dlerror, "GLIBC_2.2.5");
NM_PIN(dladdr, "GLIBC_2.2.5");

/* glibc 2.29 gave these a version without the SVID error-handling wrapper (matherr). Under the
 * default (POSIX) error handling, the only one a program that defines no matherr gets, the older
 * versions return the same values and set errno the same way. */
NM_PIN(exp, "GLIBC_2.2.5");
NM_PIN(log, "GLIBC_2.2.5");
NM_PIN(log2, "GLIBC_2.2.5");
NM_PIN(pow, "GLIBC_2.2.5");

/* glibc 2.33 made stat and its kin functions of their own; before, <sys/stat.h> made them calls
 * to __xstat and kin with a layout version (1 on x86-64), which glibc still exports. */
#define NM_STAT_VERSION 1
int nm_xstat(int, const char*, struct stat*);
int nm_lxstat(int, const char*, struct stat*);
int nm_fxstat(int, int, struct stat*);
int nm_fxstatat(int, int, const char*, struct stat*, int);
int nm_xstat64(int, const char*, struct stat64*);
int nm_lxstat64(int, const char*, struct stat64*);
int nm_fxstat64(int, int, struct stat64*);
int nm_fxstatat64(int, int, const char*, struct stat64*, int);
__asm__(".symver nm_xstat, __xstat@GLIBC_2.2.5\n"
        ".symver nm_lxstat, __lxstat@GLIBC_2.2.5\n"
        ".symver nm_fxstat, __fxstat@GLIBC_2.2.5\n"
        ".symver nm_fxstatat, __fxstatat@GLIBC_2.4\n"
        ".symver nm_xstat64, __xstat64@GLIBC_2.2.5\n"
        ".symver nm_lxstat64, __lxstat64@GLIBC_2.2.5\n"
        ".symver nm_fxstat64, __fxstat64@GLIBC_2.2.5\n"
        ".symver nm_fxstatat64, __fxstatat64@GLIBC_2.4\n");
NM_WRAPPER int __wrap_stat(const char* path, struct stat* out) { return nm_xstat(NM_STAT_VERSION, path, out); }
NM_WRAPPER int __wrap_lstat(const char* path, struct stat* out) { return nm_lxstat(NM_STAT_VERSION, path, out); }
NM_WRAPPER int __wrap_fstat(int fd, struct stat* out) { return nm_fxstat(NM_STAT_VERSION, fd, out); }
NM_WRAPPER int __wrap_fstatat(int dirfd, const char* path, struct stat* out, int flags) {
  return nm_fxstatat(NM_STAT_VERSION, dirfd, path, out, flags);
}
NM_WRAPPER int __wrap_stat64(const char* path, struct stat64* out) { return nm_xstat64(NM_STAT_VERSION, path, out); }
NM_WRAPPER int __wrap_lstat64(const char* path, struct stat64* out) { return nm_lxstat64(NM_STAT_VERSION, path, out); }
NM_WRAPPER int __wrap_fstat64(int fd, struct stat64* out) { return nm_fxstat64(NM_STAT_VERSION, fd, out); }
NM_WRAPPER int __wrap_fstatat64(int dirfd, const char* path, struct stat64* out, int flags) {
  return nm_fxstatat64(NM_STAT_VERSION, dirfd, path, out, flags);
}

/* glibc 2.36's arc4random, which libstdc++'s std::random_device calls: the same kernel entropy,
 * through getentropy (glibc 2.25), or /dev/urandom where the kernel has no getrandom (before
 * Linux 3.17, as under an old host's kernel), as glibc's does. Like glibc's, it never returns
 * without a value: with neither, it stops the program with a message. */
static int nm_urandom(void* out, size_t size) {
  FILE* urandom = fopen("/dev/urandom", "rb");
  if (urandom == NULL) return -1;
  size_t got = fread(out, 1, size, urandom);
  fclose(urandom);
  return got == size ? 0 : -1;
}

NM_WRAPPER uint32_t __wrap_arc4random(void) {
  uint32_t value;
  if (getentropy(&value, sizeof value) != 0 && nm_urandom(&value, sizeof value) != 0) {
    fputs("nccl-migrate: cannot get entropy from the kernel (getrandom and /dev/urandom both failed)\n", stderr);
    abort();
  }
  return value;
}

/* glibc 2.33's mallinfo2, which LLVM reads for its memory statistics: mallinfo's counters,
 * widened (they wrap above 2 GiB, which only those statistics would show). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
NM_WRAPPER struct mallinfo2 __wrap_mallinfo2(void) {
  struct mallinfo old = mallinfo();
  struct mallinfo2 wide = {
      .arena = (unsigned)old.arena, .ordblks = (unsigned)old.ordblks, .smblks = (unsigned)old.smblks,
      .hblks = (unsigned)old.hblks, .hblkhd = (unsigned)old.hblkhd, .usmblks = (unsigned)old.usmblks,
      .fsmblks = (unsigned)old.fsmblks, .uordblks = (unsigned)old.uordblks, .fordblks = (unsigned)old.fordblks,
      .keepcost = (unsigned)old.keepcost};
  return wide;
}
#pragma GCC diagnostic pop

/* glibc 2.32's sigabbrev_np, which the linter's worker isolation names crashes with: the
 * abbreviation of each Linux signal (SIGIO is SIGPOLL there, which glibc names POLL), and NULL for
 * any other number, real-time signals included, as glibc's. */
NM_WRAPPER const char* __wrap_sigabbrev_np(int sig) {
  switch (sig) {
#define NM_SIGNAL(name) \
  case SIG##name:       \
    return #name;
    NM_SIGNAL(HUP) NM_SIGNAL(INT) NM_SIGNAL(QUIT) NM_SIGNAL(ILL) NM_SIGNAL(TRAP) NM_SIGNAL(ABRT)
    NM_SIGNAL(BUS) NM_SIGNAL(FPE) NM_SIGNAL(KILL) NM_SIGNAL(USR1) NM_SIGNAL(SEGV) NM_SIGNAL(USR2)
    NM_SIGNAL(PIPE) NM_SIGNAL(ALRM) NM_SIGNAL(TERM) NM_SIGNAL(STKFLT) NM_SIGNAL(CHLD) NM_SIGNAL(CONT)
    NM_SIGNAL(STOP) NM_SIGNAL(TSTP) NM_SIGNAL(TTIN) NM_SIGNAL(TTOU) NM_SIGNAL(URG) NM_SIGNAL(XCPU)
    NM_SIGNAL(XFSZ) NM_SIGNAL(VTALRM) NM_SIGNAL(PROF) NM_SIGNAL(WINCH) NM_SIGNAL(POLL) NM_SIGNAL(PWR)
    NM_SIGNAL(SYS)
#undef NM_SIGNAL
    default:
      return NULL;
  }
}

/* glibc 2.32's __libc_single_threaded, which libstdc++ reads to skip atomic operations while a
 * process has one thread. Ours always says "maybe several threads": libstdc++ then always uses
 * the atomic operations, which are right in every case. It is a definition, not a wrapper: ours
 * comes before libc's for every reference in the link. */
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;
