/* The wheel build's glibc replacements (cmake/glibc-floor/) against glibc's own functions on the
 * machine that builds the wheel: linked with the same --wrap options, each __wrap_ function must
 * give what __real_ (glibc's) gives, failures included. tests/dist/glibc_floor.sh builds and runs
 * it; start.c's part is checked there, from what this program prints before and after main. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char* __real_sigabbrev_np(int);
const char* __wrap_sigabbrev_np(int);
int __real_stat(const char*, struct stat*);
int __wrap_stat(const char*, struct stat*);
int __real_lstat(const char*, struct stat*);
int __wrap_lstat(const char*, struct stat*);
int __real_fstat(int, struct stat*);
int __wrap_fstat(int, struct stat*);
int __real_fstatat(int, const char*, struct stat*, int);
int __wrap_fstatat(int, const char*, struct stat*, int);
struct mallinfo2 __real_mallinfo2(void);
struct mallinfo2 __wrap_mallinfo2(void);
uint32_t __wrap_arc4random(void);
double __real_exp(double);
double __wrap_exp(double);
double __real_log(double);
double __wrap_log(double);
double __real_log2(double);
double __wrap_log2(double);
double __real_pow(double, double);
double __wrap_pow(double, double);
extern char __libc_single_threaded;

static int failures;
#define CHECK(cond, ...)                     \
  do {                                       \
    if (!(cond)) {                           \
      printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                   \
      printf("\n");                          \
      failures++;                            \
    }                                        \
  } while (0)

static int constructor_runs;
__attribute__((constructor)) static void count_constructor(void) { constructor_runs++; }

static void check_signal_names(void) {
  for (int sig = -1; sig <= 80; sig++) {
    const char* glibc = __real_sigabbrev_np(sig);
    const char* ours = __wrap_sigabbrev_np(sig);
    CHECK((glibc == NULL) == (ours == NULL) && (glibc == NULL || strcmp(glibc, ours) == 0),
          "sigabbrev_np(%d): glibc %s, ours %s", sig, glibc ? glibc : "NULL", ours ? ours : "NULL");
  }
}

static int same_stat(const struct stat* a, const struct stat* b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mode == b->st_mode && a->st_nlink == b->st_nlink &&
         a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Both answers for one call: the same result, the same errno on failure, the same fields. */
#define CHECK_STAT(call_real, call_ours, what)                                                   \
  do {                                                                                           \
    struct stat a, b;                                                                            \
    memset(&a, 0, sizeof a);                                                                     \
    memset(&b, 0, sizeof b);                                                                     \
    errno = 0;                                                                                   \
    int ra = call_real;                                                                          \
    int ea = errno;                                                                              \
    errno = 0;                                                                                   \
    int rb = call_ours;                                                                          \
    int eb = errno;                                                                              \
    CHECK(ra == rb && ea == eb && (ra != 0 || same_stat(&a, &b)), "%s: glibc %d/%d, ours %d/%d", what, ra, ea, rb, eb); \
  } while (0)

static void check_stat_family(const char* dir) {
  char file[512], link[512], missing[512];
  snprintf(file, sizeof file, "%s/file", dir);
  snprintf(link, sizeof link, "%s/link", dir);
  snprintf(missing, sizeof missing, "%s/missing", dir);
  FILE* f = fopen(file, "w");
  fputs("twelve bytes", f);
  fclose(f);
  CHECK(symlink(file, link) == 0, "symlink %s", link);
  int fd = open(file, O_RDONLY);
  CHECK_STAT(__real_stat(file, &a), __wrap_stat(file, &b), "stat file");
  CHECK_STAT(__real_stat(link, &a), __wrap_stat(link, &b), "stat link");
  CHECK_STAT(__real_lstat(link, &a), __wrap_lstat(link, &b), "lstat link");
  CHECK_STAT(__real_stat(missing, &a), __wrap_stat(missing, &b), "stat missing");
  CHECK_STAT(__real_lstat(missing, &a), __wrap_lstat(missing, &b), "lstat missing");
  CHECK_STAT(__real_fstat(fd, &a), __wrap_fstat(fd, &b), "fstat fd");
  CHECK_STAT(__real_fstat(-1, &a), __wrap_fstat(-1, &b), "fstat -1");
  CHECK_STAT(__real_fstatat(AT_FDCWD, link, &a, AT_SYMLINK_NOFOLLOW), __wrap_fstatat(AT_FDCWD, link, &b, AT_SYMLINK_NOFOLLOW),
             "fstatat link nofollow");
  struct stat st;
  CHECK(__wrap_stat(file, &st) == 0 && st.st_size == 12, "stat file size %lld", (long long)st.st_size);
  close(fd);
}

static void check_math(void) {
  const double xs[] = {0.0, -0.0, 1e-310, 0.5, 1.0, 2.0, 10.0, 709.0, 710.0, 1000.0, -1.0, -1000.0, INFINITY, -INFINITY, NAN};
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
    double x = xs[i];
#define SAME(real_call, ours_call, name)                                                               \
  do {                                                                                                 \
    errno = 0;                                                                                         \
    double ra = real_call;                                                                             \
    int ea = errno;                                                                                    \
    errno = 0;                                                                                         \
    double rb = ours_call;                                                                             \
    int eb = errno;                                                                                    \
    CHECK(((isnan(ra) && isnan(rb)) || memcmp(&ra, &rb, sizeof ra) == 0) && ea == eb,                  \
          "%s(%g): glibc %a errno %d, ours %a errno %d", name, x, ra, ea, rb, eb);                      \
  } while (0)
    SAME(__real_exp(x), __wrap_exp(x), "exp");
    SAME(__real_log(x), __wrap_log(x), "log");
    SAME(__real_log2(x), __wrap_log2(x), "log2");
    SAME(__real_pow(x, 0.5), __wrap_pow(x, 0.5), "pow(x, 0.5)");
    SAME(__real_pow(x, -3.0), __wrap_pow(x, -3.0), "pow(x, -3)");
    SAME(__real_pow(2.0, x), __wrap_pow(2.0, x), "pow(2, x)");
  }
}

static void check_mallinfo(void) {
  void* block = malloc(100000);
  struct mallinfo2 a = __real_mallinfo2();
  struct mallinfo2 b = __wrap_mallinfo2();
  CHECK(a.uordblks == b.uordblks && a.arena == b.arena && a.hblkhd == b.hblkhd && a.fordblks == b.fordblks,
        "mallinfo2: glibc uordblks %zu arena %zu, ours %zu %zu", a.uordblks, a.arena, b.uordblks, b.arena);
  free(block);
}

static void check_random(void) {
  uint32_t first = __wrap_arc4random();
  int differ = 0;
  for (int i = 0; i < 16; i++) differ |= __wrap_arc4random() != first;
  CHECK(differ, "arc4random gave %u seventeen times", first);
}

static void* thread_body(void* arg) { return (char*)arg + 1; }

/* The pinned functions, called by name: --wrap sends these calls to the pinned versions. */
static void check_pinned(void) {
  pthread_t thread;
  void* result = NULL;
  static char marker[2];
  CHECK(pthread_create(&thread, NULL, thread_body, marker) == 0 && pthread_join(thread, &result) == 0 &&
            result == marker + 1,
        "pthread_create/join");
  void* libm = dlopen("libm.so.6", RTLD_NOW);
  CHECK(libm != NULL && dlsym(libm, "cos") != NULL, "dlopen/dlsym libm.so.6: %s", dlerror());
  CHECK(dlopen("libnccl-migrate-no-such-library.so", RTLD_NOW) == NULL && strstr(dlerror(), "no-such-library") != NULL,
        "dlopen of a missing library: dlerror names it");
  if (libm) dlclose(libm);
  pthread_key_t key;
  static char value;
  CHECK(pthread_key_create(&key, NULL) == 0 && pthread_getspecific(key) == NULL && pthread_setspecific(key, &value) == 0 &&
            pthread_getspecific(key) == &value && pthread_key_delete(key) == 0,
        "pthread_key_create/setspecific/getspecific/key_delete");
  CHECK(__libc_single_threaded == 0, "__libc_single_threaded is %d, wanted 0", __libc_single_threaded);
}

int main(int argc, char** argv, char** envp) {
  CHECK(constructor_runs == 1, "constructors ran %d times before main, wanted 1", constructor_runs);
  CHECK(argc == 3 && strcmp(argv[2], "second") == 0 && argv[argc] == NULL, "argc %d", argc);
  CHECK(envp != NULL && getenv("NCCL_MIGRATE_FLOOR_TEST") != NULL && strcmp(getenv("NCCL_MIGRATE_FLOOR_TEST"), "yes") == 0,
        "environment not passed to main");
  check_signal_names();
  check_stat_family(argv[1]);
  check_math();
  check_mallinfo();
  check_random();
  check_pinned();
  printf("%d failures\n", failures);
  return failures ? 1 : 3;  /* 3: main's value must reach the exit status */
}

__attribute__((destructor)) static void say_destructor_ran(void) { printf("destructor ran\n"); }
