/*
** testutil.h -- helpers shared by the C tests.
*/
#ifndef LPVM_TESTUTIL_H
#define LPVM_TESTUTIL_H

#include <stddef.h>

#ifndef LPVM_STRESS_SCALE
#define LPVM_STRESS_SCALE 1
#endif

/* Stress sizes shrink under sanitizers (one setting: LPVM_STRESS_SCALE), but never
** below `min` so every path is still exercised. */
static inline size_t test_scaled(size_t n, size_t min) {
  double v = (double)n * (double)(LPVM_STRESS_SCALE);
  return v < (double)min ? min : (size_t)v;
}

#endif
