/*
** timer.h -- the timer service: one thread driving a hierarchical timing wheel.
**
** Any thread starts and cancels timers; requests go through a lock-free in-queue
** that only the timer thread drains (Hedqvist 1998, 5.2.7 and section 6), so a
** timer cancelled before the thread sees it never touches the wheel. Every timer
** has exactly one outcome: it fires (its callback runs once, on the timer thread)
** or its cancel returns 1. Never both, never neither.
**
** A timer handle is reference counted: the starter owns one reference and must
** drop it with timer_release() (after or without timer_cancel()); the service owns
** the other until the timer has fired or been dropped.
*/
#ifndef LPVM_TIMER_H
#define LPVM_TIMER_H

#include <stddef.h>
#include <stdint.h>

typedef struct lpvm_timer lpvm_timer;

/* Runs on the timer thread when the timer fires. Must not block for long and must
** not call timer_service_stop(). p, a and b are the values given to timer_start. */
typedef void (*timer_fire_fn)(void *p, uint64_t a, uint64_t b);

/* Clock in milliseconds; NULL means CLOCK_MONOTONIC. Tests inject their own and
** drive time with timer_service_poke(). */
typedef uint64_t (*timer_clock_fn)(void);

int timer_service_start(timer_clock_fn clock);
/* Stops the thread; timers still pending are dropped without firing. A handle still
** held stays valid: its first timer_cancel returns 1 (it never fired). Must not race
** with timer_start or timer_cancel on other threads. */
void timer_service_stop(void);
/* Wake the timer thread to re-read the clock (for injected clocks). */
void timer_service_poke(void);
uint64_t timer_now_ms(void);

/* Start a timer that fires after `ms` milliseconds (0 = as soon as possible), never
** earlier. NULL when out of memory or when the service is not running. */
lpvm_timer *timer_start(uint64_t ms, timer_fire_fn fn, void *p, uint64_t a, uint64_t b);
/* The same, and *due is its deadline by timer_now_ms()'s clock (send-after's
** read_timer: what it has left is due minus now, with no clock read at the start). */
lpvm_timer *timer_start_due(uint64_t ms, timer_fire_fn fn, void *p, uint64_t a, uint64_t b,
                            uint64_t *due);
/* 1 if this call cancelled it (it will never fire), 0 if it fired or was already
** cancelled. Does not drop the caller's reference. */
int timer_cancel(lpvm_timer *t);
/* Drop the starter's reference. */
void timer_release(lpvm_timer *t);

/* Wait until the timer thread has taken every request made before the call and fired
** every timer due by the clock as read after the call. Tests use it to step an
** injected clock: set the time, then sync. LPVM_ESTATE if the service is not running
** or when called from a timer callback. */
int timer_service_sync(void);

/* Bytes of one timer record (the service's allocation per timer). */
size_t timer_record_bytes(void);

/* Statistics, for benchmarks and the idle test. The timer thread keeps them: they
** are as of its last pass (timer_service_sync makes them current). */
typedef struct timer_stats {
  uint64_t wakeups;      /* times the timer thread woke up */
  uint64_t fired;
  uint64_t cancelled;    /* cancels that won */
  uint64_t never_wheeled;/* cancelled before the thread saw them */
  uint64_t pending;      /* in the wheel now */
} timer_stats;
void timer_service_stats(timer_stats *out);

#endif
