/*
** reasons.c -- the exit reasons the core itself produces, as ready-made terms.
*/
#include <string.h>

#include "tasks/sig.h"
#include "tasks/task_int.h"


/* The initialisers spell the characters out: a string literal would add a NUL. */
const uint8_t term_normal[] = {131, 119, 6, 'n', 'o', 'r', 'm', 'a', 'l'};
const size_t term_normal_len = sizeof term_normal;
const uint8_t term_kill[] = {131, 119, 4, 'k', 'i', 'l', 'l'};
const size_t term_kill_len = sizeof term_kill;
const uint8_t term_killed[] = {131, 119, 6, 'k', 'i', 'l', 'l', 'e', 'd'};
const size_t term_killed_len = sizeof term_killed;
const uint8_t term_noproc[] = {131, 119, 6, 'n', 'o', 'p', 'r', 'o', 'c'};
const size_t term_noproc_len = sizeof term_noproc;
const uint8_t term_noconnection[] = {131, 119, 12, 'n', 'o', 'c', 'o', 'n', 'n', 'e', 'c', 't',
                                     'i', 'o', 'n'};
const size_t term_noconnection_len = sizeof term_noconnection;
const uint8_t term_shutdown[] = {131, 119, 8, 's', 'h', 'u', 't', 'd', 'o', 'w', 'n'};
const size_t term_shutdown_len = sizeof term_shutdown;

/* The reason of a task whose reason could not be copied for lack of memory (task.c) */
const uint8_t term_nomem[] = {131, 109, 0, 0, 0, 17, 'n', 'o', 't', ' ', 'e', 'n', 'o', 'u',
                              'g', 'h', ' ', 'm', 'e', 'm', 'o', 'r', 'y'};
const size_t term_nomem_len = sizeof term_nomem;

int term_is(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
  return alen == blen && memcmp(a, b, alen) == 0;
}
