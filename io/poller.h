/*
** poller.h -- the I/O poll: an epoll set, waited in by an idle worker (poller.c),
** turning readiness into messages.
**
** A port registers each descriptor it waits on with a tag (0..3) and its own id.
** Registrations are one-shot (EPOLLONESHOT): when a descriptor becomes ready the
** poll sends the port one message {'$io', Tag, Events} and the kernel disables
** the registration until the port arms it again. So a port has at most one such
** message in flight per descriptor, the poll never touches port memory (it only
** knows ids, and a dead id just drops the message), and a port that does not want
** to read (active false) is simply not armed: the kernel's buffers push back.
*/
#ifndef LPVM_IO_POLLER_H
#define LPVM_IO_POLLER_H

#include <stdint.h>

#include "io/io.h"
#include "lpvm/task.h"

/* Readiness bits in {'$io', Tag, Events}. */
#define IO_IN  1u
#define IO_OUT 2u
#define IO_ERR 4u   /* error or hang-up: the next read or write says which */

/* One watched descriptor of a port. */
typedef struct io_fdw {
  int fd;            /* -1: none */
  uint8_t tag;       /* 0..3, echoed in the readiness message */
  uint8_t added;     /* in the epoll set */
  uint8_t nopoll;    /* epoll refused it (a regular file): always ready */
  uint32_t armed;    /* events the registration waits for; 0 = disabled */
} io_fdw;

void io_fdw_init(io_fdw *w, int fd, int tag);

/* 0 when the poll is open (the VM runs), else LPVM_ESTATE. */
int io_poller_ensure(void);

/* Arm w for `events` (IO_IN | IO_OUT) on behalf of port `id`; one shot. Does
** nothing if it is armed for exactly those events already. */
int io_watch(io_fdw *w, lpvm_id id, uint32_t events);
/* Forget w (before closing its descriptor). */
void io_unwatch(io_fdw *w);
/* A readiness message for w arrived: its registration is disabled now. */
static inline void io_fired(io_fdw *w) { w->armed = 0; }

/* Is m a readiness message? Then *tag and *ev are filled. */
int io_ready_parse(lpvm_msg *m, int *tag, uint32_t *ev);

#endif
