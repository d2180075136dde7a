/*
** fuzz_term.c -- fuzz target: the external term reader (tasks/term_dec.c) and the
** formatter (tasks/term_fmt.c), the code that reads bytes from other processes and,
** later, other nodes. Beyond "no crash, no sanitizer report" it checks the promises
** readers rely on:
**   - a reader that allocates by every count it is given gets at most the input's
**     length in total (issue 10, item 7: no allocation before validation);
**   - lpvm_term_check accepts exactly what lpvm_skip walks to the end;
**   - a term that checks re-encodes (lpvm_put_term) to the same bytes.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/term.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Read the whole term with the typed gets, as a decoder does. */
static uint64_t walk(const uint8_t *data, size_t size) {
  lpvm_tread r;
  uint64_t claimed = 0, todo = 1;
  uint32_t n;
  const char *s;
  const uint8_t *b;
  size_t len;
  int64_t i;
  double d;
  lpvm_id id;
  uint64_t ref;
  if (lpvm_tread_init(&r, data, size)) return 0;
  while (todo > 0) {
    todo--;
    int rc;
    switch (lpvm_get_type(&r)) {
      case LPVM_T_TUPLE:
        if ((rc = lpvm_get_tuple(&r, &n)) == 0) claimed += n, todo += n;
        break;
      case LPVM_T_LIST:
        if ((rc = lpvm_get_list(&r, &n)) == 0) claimed += n, todo += (uint64_t)n + 1;
        break;
      case LPVM_T_MAP:
        if ((rc = lpvm_get_map(&r, &n)) == 0) claimed += 2 * (uint64_t)n, todo += 2 * (uint64_t)n;
        break;
      case LPVM_T_ATOM: rc = lpvm_get_atom(&r, &s, &len); break;
      case LPVM_T_INT: rc = lpvm_get_int(&r, &i); break;
      case LPVM_T_FLOAT: rc = lpvm_get_float(&r, &d); break;
      case LPVM_T_BINARY: rc = lpvm_get_binary(&r, &b, &len); break;
      case LPVM_T_STRING:
        if ((rc = lpvm_get_string(&r, &b, &len)) == 0) claimed += len;
        break;
      case LPVM_T_NIL: rc = lpvm_get_nil(&r); break;
      case LPVM_T_PID: case LPVM_T_PORT:
        rc = lpvm_get_pid(&r, &id);
        if (rc) rc = lpvm_skip(&r);
        break;
      case LPVM_T_REF:
        rc = lpvm_get_ref(&r, &ref);
        if (rc) rc = lpvm_skip(&r);
        break;
      case LPVM_T_BIGINT: case LPVM_T_OTHER: rc = lpvm_skip(&r); break;
      default: rc = -1; break;
    }
    if (rc) break;
  }
  return claimed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (walk(data, size) > size) abort();   /* allocation would outgrow the input */
  char small[16], big[512];
  lpvm_term_format(data, size, small, sizeof small);
  lpvm_term_format(data, size, big, sizeof big);
  lpvm_tread r;
  int skipped = lpvm_tread_init(&r, data, size) == 0 && lpvm_skip(&r) == 0 && r.p == r.end;
  int checked = lpvm_term_check(data, size) == 0;
  if (skipped != checked) abort();
  if (checked) {   /* splice it into a builder: the same bytes come out */
    lpvm_tbuf b;
    lpvm_tbuf_init(&b);
    lpvm_put_term(&b, data, size);
    if (b.err == 0 && (b.len != size || memcmp(b.data, data, size) != 0)) abort();
    lpvm_tbuf_free(&b);
  }
  return 0;
}
