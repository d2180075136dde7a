/*
** A minimal stand-in for criterion's Test() and cr_assert*() used only by the
** sanitizer builds: criterion's BoxFort arena cannot start under ThreadSanitizer
** (Snaipe/Criterion#274), and under AddressSanitizer criterion reports a test as
** passed even when LeakSanitizer fails its process at exit. Same test sources; each
** test runs in a forked child that exits through exit() so LeakSanitizer checks it,
** a failed assertion on any thread ends that child, and the run closes with the
** plain line "N passed, M failed".
*/
#ifndef LPVM_CRITERION_SHIM_H
#define LPVM_CRITERION_SHIM_H

/* criterion compares through generic helpers; these plain macros would warn. */
#pragma GCC diagnostic ignored "-Wsign-compare"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct shim_test {
  const char *suite, *name;
  void (*fn)(void);
} shim_test;

#define SHIM_MAX_TESTS 256
static shim_test shim_tests[SHIM_MAX_TESTS];
static int shim_ntests;

static inline void shim_register(const char *suite, const char *name, void (*fn)(void)) {
  if (shim_ntests < SHIM_MAX_TESTS) shim_tests[shim_ntests++] = (shim_test){suite, name, fn};
}

#define Test(suite, name)                                                   \
  static void shim_fn_##suite##_##name(void);                               \
  __attribute__((constructor)) static void shim_reg_##suite##_##name(void) { \
    shim_register(#suite, #name, shim_fn_##suite##_##name);                 \
  }                                                                         \
  static void shim_fn_##suite##_##name(void)

static inline void shim_check(
    int ok, const char *expr, const char *file, int line, const char *fmt, ...) {
  if (ok) return;
  fprintf(stderr, "%s:%d: assertion failed: %s", file, line, expr);
  if (fmt && *fmt) {
    va_list ap;
    va_start(ap, fmt);
    fputs(": ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
  }
  fputc('\n', stderr);
  fflush(stderr);
  _exit(1);
}

#define SHIM_CHECK(cond, expr, ...) shim_check(!!(cond), expr, __FILE__, __LINE__, "" __VA_ARGS__)
#define cr_assert(c, ...) SHIM_CHECK((c), #c, __VA_ARGS__)
#define cr_assert_not(c, ...) SHIM_CHECK(!(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_eq(a, b, ...) SHIM_CHECK((a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) SHIM_CHECK((a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) SHIM_CHECK((a) > (b), #a " > " #b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) SHIM_CHECK((a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) SHIM_CHECK((a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) SHIM_CHECK((a) <= (b), #a " <= " #b, __VA_ARGS__)
#define cr_assert_null(p, ...) SHIM_CHECK((p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) SHIM_CHECK((p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) SHIM_CHECK(strcmp((a), (b)) == 0, #a " eq " #b, __VA_ARGS__)
#define cr_assert_fail(...) SHIM_CHECK(0, "fail", __VA_ARGS__)

/* Arguments: criterion's are accepted and ignored, except --filter SUBSTRING. */
int main(int argc, char **argv) {
  const char *filter = NULL;
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) filter = argv[++i];
  int passed = 0, failed = 0;
  for (int i = 0; i < shim_ntests; i++) {
    shim_test *t = &shim_tests[i];
    char full[256];
    snprintf(full, sizeof full, "%s::%s", t->suite, t->name);
    if (filter && !strstr(full, filter)) continue;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      alarm(600);
      t->fn();
      exit(0);  /* not _exit: let LeakSanitizer and TSan's exit report run */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int ok = pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    printf("[%s] %s\n", ok ? "PASS" : "FAIL", full);
    if (ok) passed++;
    else failed++;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

#endif
