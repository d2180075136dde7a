/*
** bench_memcpy.c -- the floor under a string message: what copying its bytes costs.
** A Lua string of Size bytes sent to another process is copied at least once on each
** side (into the message, out of it into the receiver's heap); this times 2 memcpy of
** Size bytes, K times, to set beside estone/bench_binary.lua's `string` figure: into
** fresh malloc'd buffers (as a new message and a new Lua string are; a 100 KB block
** freed back may return its pages to the OS, so this counts page faults too), then
** into two buffers allocated once. Asserts nothing.
** usage: bench_memcpy [Size [K]]
** prints: RESULT test=malloc_memcpy2 ... and RESULT test=memcpy2 size=.. k=.. total_s=.. per_msg_ns=..
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv) {
  size_t size = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
  long k = argc > 2 ? strtol(argv[2], NULL, 10) : 20000;
  char *src = malloc(size);
  if (!src || k <= 0) return 1;
  memset(src, 'x', size);
  uint64_t sum = 0, t0 = mono_ns();
  for (long i = 0; i < k; i++) {
    char *msg = malloc(size), *str = malloc(size);   /* the message, the receiver's string */
    if (!msg || !str) return 1;
    memcpy(msg, src, size);
    memcpy(str, msg, size);
    sum += (unsigned char)str[i % (long)size];        /* the copies are used */
    free(msg);
    free(str);
  }
  uint64_t t1 = mono_ns();
  printf("RESULT test=malloc_memcpy2 size=%zu k=%ld total_s=%.6f per_msg_ns=%.1f check=%llu\n",
         size, k, (double)(t1 - t0) / 1e9, (double)(t1 - t0) / (double)k,
         (unsigned long long)sum);
  /* the copies alone, into buffers allocated once (warm in cache when they fit) */
  char *a = malloc(size), *b = malloc(size);
  if (!a || !b) return 1;
  t0 = mono_ns();
  for (long i = 0; i < k; i++) {
    memcpy(a, src, size);
    __asm__ volatile("" ::: "memory");
    memcpy(b, a, size);
    __asm__ volatile("" ::: "memory");
    sum += (unsigned char)b[i % (long)size];
  }
  t1 = mono_ns();
  printf("RESULT test=memcpy2 size=%zu k=%ld total_s=%.6f per_msg_ns=%.1f check=%llu\n", size,
         k, (double)(t1 - t0) / 1e9, (double)(t1 - t0) / (double)k, (unsigned long long)sum);
  free(a);
  free(b);
  free(src);
  return 0;
}
