/*
** test_timeouts.c -- a task's timer fires however busy its mailbox is (issue 10,
** item 2), and a message queued before the timer fired can still be taken first.
*/
#include <stdatomic.h>

#include "testvm.h"
#include "timers/timer.h"

/* ---- a flood does not hold a timeout back -------------------------------------------- */

#define FLOOD_CREDIT 10000   /* messages in flight at most: the test's memory stays flat */
#define TIMER_MS 100

static _Atomic int flood_stop;
static _Atomic long flood_sent, flood_taken;
static _Atomic long fired_after_ms = -1;
static lpvm_id victim_id;
static uint64_t victim_t0;

static const char tick[] = "\x83\x64\x00\x04tick";   /* 'tick' */
static const char one[] = "\x83\x61\x01";            /* 1 */

/* The victim handles every message it gets (a server busy with casts), and keeps
** one message of its own always in flight (a process polling itself), so there is
** never a moment with no mail: the timer must fire anyway. */
static int victim_setup(lpvm_task *t) {
  victim_t0 = lpvm_now_ms();
  cr_assert_eq(lpvm_set_timer(t, TIMER_MS), 0);
  lpvm_send(t, lpvm_self(t), tick, sizeof tick - 1);
  return LPVM_WAIT;
}
static int victim_event(lpvm_task *t) {
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    if (lpvm_msg_len(m) == sizeof tick - 1) lpvm_send(t, lpvm_self(t), tick, sizeof tick - 1);
    else atomic_fetch_add(&flood_taken, 1);
    lpvm_msg_free(m);
  }
  return LPVM_WAIT;
}
static int victim_timeout(lpvm_task *t) {
  (void)t;
  atomic_store(&fired_after_ms, (long)(lpvm_now_ms() - victim_t0));
  atomic_store(&flood_stop, 1);
  return LPVM_EXIT;
}
static const lpvm_task_def victim_def = {.type = "victim", .prio = 20,
                                         .setup = victim_setup,
                                         .handle_event = victim_event,
                                         .handle_timeout = victim_timeout};

/* A producer sends as fast as its credit allows, a slice at a time. */
static int producer_idle(lpvm_task *t) {
  if (atomic_load(&flood_stop)) return LPVM_EXIT;
  for (int i = 0; i < 64; i++) {
    if (atomic_load(&flood_sent) - atomic_load(&flood_taken) >= FLOOD_CREDIT) break;
    if (lpvm_send(t, victim_id, one, sizeof one - 1) != 0) return LPVM_EXIT;
    atomic_fetch_add(&flood_sent, 1);
  }
  return LPVM_IDLE;
}
static const lpvm_task_def producer_def = {.type = "producer", .prio = 20,
                                           .setup = producer_idle, .idle = producer_idle};

Test(timeouts, timer_fires_while_two_producers_flood_the_mailbox) {
  vm_start_n(2, 1);
  cr_assert_eq(lpvm_spawn_task(NULL, &victim_def, NULL, 0, &victim_id), 0);
  for (int i = 0; i < 2; i++) cr_assert_eq(lpvm_spawn_task(NULL, &producer_def, NULL, 0, NULL), 0);
  /* generous: the bound only says "it fired", never how fast (a loaded machine) */
  for (int i = 0; i < 10000 && atomic_load(&fired_after_ms) < 0; i++) sleep_ms(1);
  long after = atomic_load(&fired_after_ms);
  atomic_store(&flood_stop, 1);
  cr_assert(after >= TIMER_MS, "the %d ms timer fired after %ld ms", TIMER_MS, after);
  cr_assert(atomic_load(&flood_taken) > 0, "the victim was flooded");
  cr_assert(wait_no_tasks(5000));
  vm_stop();
}

/* ---- what was queued before the timer fired still comes first -------------------------- */

static const char msg_a[] = "\x83\x61\x0a", msg_b[] = "\x83\x61\x0b", msg_c[] = "\x83\x61\x0c",
                  msg_d[] = "\x83\x61\x0d";
static _Atomic int scanned = -1, moved_ok = -1, timeouts;

static int mark_setup(lpvm_task *t) {
  lpvm_send(t, lpvm_self(t), msg_a, 3);
  lpvm_send(t, lpvm_self(t), msg_b, 3);
  lpvm_send(t, lpvm_self(t), msg_c, 3);
  cr_assert_eq(lpvm_set_timer(t, 1), 0);
  sleep_ms(5);
  cr_assert_eq(timer_service_sync(), 0);  /* the timer has fired... */
  lpvm_send(t, lpvm_self(t), msg_d, 3);   /* ...and then d arrives */
  return LPVM_WAIT;
}
/* A selective receive that matches nothing: it looks at messages until the timeout
** says every message older than the timeout has been seen. */
static int mark_event(lpvm_task *t) {
  int n = 0;
  lpvm_msg *seen = NULL, *m;
  cr_assert_eq(lpvm_timeout_reached(t, NULL), 0, "a, b, c came before the timeout");
  while (!lpvm_timeout_reached(t, seen) && (m = lpvm_mbox_next(t, seen)) != NULL) {
    seen = m;
    n++;
  }
  atomic_store(&scanned, n);
  /* taking the newest pre-timeout message (c) moves the boundary back to b */
  lpvm_msg *b = lpvm_mbox_next(t, lpvm_mbox_next(t, NULL));
  lpvm_mbox_take(t, seen);
  lpvm_msg_free(seen);
  atomic_store(&moved_ok, lpvm_timeout_reached(t, b) && !lpvm_timeout_reached(t, NULL));
  return LPVM_WAIT;
}
static int mark_timeout(lpvm_task *t) {
  atomic_fetch_add(&timeouts, 1);
  cr_assert_eq(lpvm_timeout_reached(t, NULL), 0, "handle_timeout clears the fired timer");
  return LPVM_EXIT;
}
static const lpvm_task_def mark_def = {.type = "mark", .prio = 20, .setup = mark_setup,
                                       .handle_event = mark_event,
                                       .handle_timeout = mark_timeout};

Test(timeouts, scan_stops_at_the_newest_message_older_than_the_timeout) {
  vm_start_n(1, 1);
  cr_assert_eq(lpvm_spawn_task(NULL, &mark_def, NULL, 0, NULL), 0);
  cr_assert(wait_no_tasks(5000));
  cr_assert_eq(atomic_load(&scanned), 3, "a, b, c looked at, d not needed");
  cr_assert_eq(atomic_load(&moved_ok), 1);
  cr_assert_eq(atomic_load(&timeouts), 1);
  vm_stop();
}

/* A message that matches, queued before the timer fired, wins over the timeout. */
static _Atomic int took_match, match_timeouts;
static int match_setup(lpvm_task *t) {
  lpvm_send(t, lpvm_self(t), msg_a, 3);
  cr_assert_eq(lpvm_set_timer(t, 1), 0);
  sleep_ms(5);
  cr_assert_eq(timer_service_sync(), 0);
  return LPVM_WAIT;
}
static int match_event(lpvm_task *t) {
  lpvm_msg *m = lpvm_recv(t);
  if (m) {
    lpvm_msg_free(m);
    lpvm_cancel_timer(t);   /* what a receive does when it matches */
    atomic_fetch_add(&took_match, 1);
    return LPVM_EXIT;
  }
  return LPVM_WAIT;
}
static int match_timeout(lpvm_task *t) {
  (void)t;
  atomic_fetch_add(&match_timeouts, 1);
  return LPVM_EXIT;
}
static const lpvm_task_def match_def = {.type = "match", .prio = 20, .setup = match_setup,
                                        .handle_event = match_event,
                                        .handle_timeout = match_timeout};

Test(timeouts, message_queued_before_the_timeout_wins) {
  vm_start_n(1, 1);
  cr_assert_eq(lpvm_spawn_task(NULL, &match_def, NULL, 0, NULL), 0);
  cr_assert(wait_no_tasks(5000));
  cr_assert_eq(atomic_load(&took_match), 1);
  cr_assert_eq(atomic_load(&match_timeouts), 0);
  vm_stop();
}
