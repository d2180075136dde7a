/*
** driver.c -- a small coverage-guided mutation fuzzer, so the fuzz targets run with
** nothing but gcc (CI's ASan build). A target is libFuzzer's interface,
** `int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)`, so the same file
** also links with clang's -fsanitize=fuzzer unchanged.
**
** Coverage: the code under test is compiled with gcc's -fsanitize-coverage=trace-pc,
** which calls __sanitizer_cov_trace_pc() at every basic block; the caller's address,
** hashed into a bitmap, says which edges an input reached. An input that sets a new
** bit joins the corpus, and mutations start from the corpus (seed files first).
**
** Usage (libFuzzer's flags): fuzz_X [-max_total_time=S] [-runs=N] [-seed=N]
**                                   [-max_len=N] corpus_dir_or_file...
** A crash (ASan report, signal) first writes the input to crash-<target>-<pid>.bin in
** the working folder, so it can be replayed: fuzz_X crash-....bin.
*/
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- coverage ------------------------------------------------------------------- */

#define MAP_BITS 16
static uint8_t cov_map[1u << MAP_BITS];
static size_t cov_new;   /* bits first set during the current input */

void __sanitizer_cov_trace_pc(void);
void __sanitizer_cov_trace_pc(void) {
  uintptr_t pc = (uintptr_t)__builtin_return_address(0);
  uint32_t h = (uint32_t)((pc ^ (pc >> 17)) * 0x9e3779b1u) >> (32 - MAP_BITS);
  if (!cov_map[h]) {
    cov_map[h] = 1;
    cov_new++;
  }
}

/* ---- the corpus ----------------------------------------------------------------- */

typedef struct { uint8_t *p; size_t n; } input;
static input *corpus;
static size_t ncorpus, capcorpus;
static size_t max_len = 4096;

static void corpus_add(const uint8_t *p, size_t n) {
  if (ncorpus == capcorpus) {
    capcorpus = capcorpus ? 2 * capcorpus : 64;
    corpus = realloc(corpus, capcorpus * sizeof *corpus);
    if (!corpus) abort();
  }
  uint8_t *c = malloc(n ? n : 1);
  if (!c) abort();
  memcpy(c, p, n);
  corpus[ncorpus++] = (input){c, n};
}

static void load_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return;
  uint8_t *buf = malloc(max_len);
  size_t n = buf ? fread(buf, 1, max_len, f) : 0;
  fclose(f);
  if (buf) corpus_add(buf, n);
  free(buf);
}

static void load(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "fuzz: cannot read %s\n", path);
    exit(2);
  }
  if (!S_ISDIR(st.st_mode)) {
    load_file(path);
    return;
  }
  DIR *d = opendir(path);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", path, e->d_name);
    load_file(full);
  }
  if (d) closedir(d);
}

/* ---- crashes: keep the input ---------------------------------------------------- */

static const uint8_t *cur_p;
static size_t cur_n;
static char crash_name[256];

static void save_current(void) {
  if (!cur_p) return;
  int fd = open(crash_name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  ssize_t w = write(fd, cur_p, cur_n);
  (void)w;
  close(fd);
  static const char msg[] = "fuzz: the crashing input is in ";
  w = write(2, msg, sizeof msg - 1);
  w = write(2, crash_name, strlen(crash_name));
  w = write(2, "\n", 1);
  cur_p = NULL;
}

static void on_signal(int sig) {
  save_current();
  signal(sig, SIG_DFL);
  raise(sig);
}

#if defined(__SANITIZE_ADDRESS__)
void __sanitizer_set_death_callback(void (*callback)(void));
#endif

/* ---- mutations ------------------------------------------------------------------ */

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1dull;
}

static const uint32_t interesting[] = {0, 1, 2, 3, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000,
                                       0xffff, 0x10000, 0x7fffffff, 0x80000000u,
                                       0xfffffffeu, 0xffffffffu};

/* One to four edits of buf (n bytes, room for max_len). */
static size_t mutate(uint8_t *buf, size_t n) {
  int edits = 1 + (int)(rnd() % 4);
  for (int e = 0; e < edits; e++) {
    size_t at = n ? rnd() % n : 0;
    switch (rnd() % 8) {
      case 0: if (n) buf[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
      case 1: if (n) buf[at] = (uint8_t)rnd(); break;
      case 2: if (n) buf[at] = (uint8_t)interesting[rnd() % 16]; break;
      case 3:   /* a big-endian length field */
        if (n >= 4) {
          at = rnd() % (n - 3);
          uint32_t v = interesting[rnd() % 16];
          if (rnd() % 2) v = (uint32_t)(n - at) + (uint32_t)(rnd() % 8) - 4;
          buf[at] = (uint8_t)(v >> 24), buf[at + 1] = (uint8_t)(v >> 16);
          buf[at + 2] = (uint8_t)(v >> 8), buf[at + 3] = (uint8_t)v;
        }
        break;
      case 4:   /* insert a byte */
        if (n < max_len) {
          memmove(buf + at + 1, buf + at, n - at);
          buf[at] = (uint8_t)rnd();
          n++;
        }
        break;
      case 5:   /* delete a run */
        if (n > 1) {
          size_t k = 1 + rnd() % (n - at < 8 ? n - at : 8);
          memmove(buf + at, buf + at + k, n - at - k);
          n -= k;
        }
        break;
      case 6:   /* copy a run of this input elsewhere (nesting, repetition) */
        if (n > 1) {
          size_t from = rnd() % n, k = 1 + rnd() % (n - from);
          if (n + k > max_len) k = max_len - n;
          memmove(buf + at + k, buf + at, n - at);
          memmove(buf + at, buf + (from >= at ? from + k : from), k);
          n += k;
        }
        break;
      default: {   /* splice: the tail of another corpus input */
        input *o = &corpus[rnd() % ncorpus];
        if (o->n) {
          size_t from = rnd() % o->n, k = o->n - from;
          if (at + k > max_len) k = max_len - at;
          memcpy(buf + at, o->p + from, k);
          n = at + k > n ? at + k : n;
        }
        break;
      }
    }
  }
  return n;
}

/* ---- main ----------------------------------------------------------------------- */

static int run_one(const uint8_t *p, size_t n) {
  cov_new = 0;
  cur_p = p, cur_n = n;
  LLVMFuzzerTestOneInput(p, n);
  cur_p = NULL;
  return cov_new > 0;
}

int main(int argc, char **argv) {
  double max_time = 10;
  uint64_t runs = 0, seed = (uint64_t)time(NULL);
  const char *target = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  for (int i = 1; i < argc; i++) {
    if (sscanf(argv[i], "-max_total_time=%lf", &max_time) == 1) continue;
    if (sscanf(argv[i], "-runs=%lu", (unsigned long *)&runs) == 1) continue;
    if (sscanf(argv[i], "-seed=%lu", (unsigned long *)&seed) == 1) continue;
    if (sscanf(argv[i], "-max_len=%zu", &max_len) == 1) continue;
    if (argv[i][0] == '-') {
      fprintf(stderr, "fuzz: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  for (int i = 1; i < argc; i++)
    if (argv[i][0] != '-') load(argv[i]);
  snprintf(crash_name, sizeof crash_name, "crash-%s-%ld.bin", target, (long)getpid());
  signal(SIGSEGV, on_signal), signal(SIGBUS, on_signal);
  signal(SIGABRT, on_signal), signal(SIGFPE, on_signal), signal(SIGILL, on_signal);
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_set_death_callback(save_current);
#endif
  if (ncorpus == 0) corpus_add((const uint8_t *)"", 0);
  size_t seeds = ncorpus;
  for (size_t i = 0; i < seeds; i++) run_one(corpus[i].p, corpus[i].n);   /* replay */
  rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
  uint8_t *buf = malloc(max_len);
  if (!buf) return 1;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uint64_t done = 0;
  for (;;) {
    if (runs && done >= runs) break;
    if ((done & 1023) == 0) {
      clock_gettime(CLOCK_MONOTONIC, &t);
      double el = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
      if (!runs && el >= max_time) break;
    }
    input *base = &corpus[rnd() % ncorpus];
    size_t n = base->n < max_len ? base->n : max_len;
    memcpy(buf, base->p, n);
    n = mutate(buf, n);
    if (run_one(buf, n)) corpus_add(buf, n);
    done++;
  }
  size_t bits = 0;
  for (size_t i = 0; i < sizeof cov_map; i++) bits += cov_map[i];
  printf("fuzz %s: %lu runs, seed %lu, %zu seeds, corpus %zu, coverage %zu\n", target,
         (unsigned long)done, (unsigned long)seed, seeds, ncorpus, bits);
  free(buf);
  return 0;
}
