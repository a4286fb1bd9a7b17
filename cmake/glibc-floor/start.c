/* The executable's start-up on glibc as old as the wheel's floor, linked into the wheel's
 * nccl-migrate only (cmake/GlibcFloor.cmake wraps __libc_start_main for it).
 *
 * glibc 2.34 changed how a program starts: its crt1.o passes no constructor-running function to
 * __libc_start_main@GLIBC_2.34, which runs the program's constructors itself. An older glibc has
 * only __libc_start_main@GLIBC_2.2.5, which runs the function it is given and nothing else. So we
 * call that version, which every glibc still exports, with a function that does what the crt
 * files of glibc before 2.34 did (__libc_csu_init): _init, then each .init_array entry. glibc
 * 2.34 and later run a function given to that version the same way. */
#include <stddef.h>

typedef void (*nm_constructor)(int, char**, char**);
typedef int (*nm_main)(int, char**, char**);

extern void _init(void);
extern const nm_constructor __init_array_start[] __attribute__((visibility("hidden")));
extern const nm_constructor __init_array_end[] __attribute__((visibility("hidden")));

int nm_libc_start_main(nm_main main, int argc, char** argv, nm_constructor init, void (*fini)(void),
                       void (*rtld_fini)(void), void* stack_end);
__asm__(".symver nm_libc_start_main, __libc_start_main@GLIBC_2.2.5");

static void nm_run_constructors(int argc, char** argv, char** envp) {
  _init();
  size_t count = (size_t)(__init_array_end - __init_array_start);
  for (size_t i = 0; i < count; i++) __init_array_start[i](argc, argv, envp);
}

/* init and fini are NULL from 2.34's crt1.o; destructors run through the loader as before. */
__attribute__((visibility("hidden"))) int __wrap___libc_start_main(nm_main main, int argc, char** argv,
                                                                    nm_constructor init, void (*fini)(void),
                                                                    void (*rtld_fini)(void), void* stack_end) {
  (void)init;
  (void)fini;
  return nm_libc_start_main(main, argc, argv, nm_run_constructors, NULL, rtld_fini, stack_end);
}
