/*
** errno_atom.c -- errno values as the atoms Erlang uses for them ("econnrefused").
**
** glibc names every errno (strerrorname_np, 2.32); lower-cased, that is Erlang's
** inet/file reason. The table is built once and never changes, so the strings can
** be handed out without copies or locks.
*/
#include <ctype.h>
#include <pthread.h>
#include <string.h>

#include "lpvm/port.h"

#define MAX_ERRNO 160

static char names[MAX_ERRNO][20];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void) {
  for (int e = 1; e < MAX_ERRNO; e++) {
    const char *n = strerrorname_np(e);
    if (!n) continue;
    size_t i = 0;
    for (; n[i] && i < sizeof names[e] - 1; i++) names[e][i] = (char)tolower((unsigned char)n[i]);
    names[e][i] = 0;
  }
}

const char *lpvm_errno_atom(int err) {
  pthread_once(&once, build);
  if (err < 0) err = -err;
  if (err <= 0 || err >= MAX_ERRNO || !names[err][0]) return "unknown";
  return names[err];
}
