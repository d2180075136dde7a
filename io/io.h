/*
** io.h -- io/ as the runtime (rt/) sees it: the poll's lifetime, the four functions
** through which an idle worker waits in it (rt hands them to sched_start: sched/
** does not include io/), and distribution's stop.
*/
#ifndef LPVM_IO_H
#define LPVM_IO_H

/* Open the epoll set and its wake-up eventfd (lpvm_start, before the workers start);
** 0 or LPVM_ESYS. */
int io_poll_open(void);
/* Close them; called by lpvm_stop once the workers have ended. */
void io_poll_close(void);

/* Wait up to timeout_ms (-1: no limit, 0: only look) for readiness; what came is
** kept for this thread's io_poll_deliver. Returns how many readiness events came: 0
** when the wait timed out or io_poll_wake ended it. One thread at a time waits. */
int io_poll_wait(int timeout_ms);
/* Send each port the readiness its calling thread's last io_poll_wait got. */
void io_poll_deliver(void);
/* End the wait in progress, or the next one if none is (any thread). */
void io_poll_wake(void);
/* Nonzero while some descriptor is in the set. */
int io_poll_watching(void);

/* Stop distribution if it runs (unregister from EPMD, close every connection);
** called by lpvm_stop before it kills the tasks. */
void io_dist_stop(void);
#endif
