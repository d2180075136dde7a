/*
** io.h -- io/ as the runtime (rt/) sees it: the poller starts with the first port
** (io_poller_ensure, inside io/) and the runtime stops it with the VM.
*/
#ifndef LPVM_IO_H
#define LPVM_IO_H

/* Stop and join the poller thread; called by lpvm_stop once every task is dead. */
void io_poller_stop(void);

/* Stop distribution if it runs (unregister from EPMD, close every connection);
** called by lpvm_stop before it kills the tasks. */
void io_dist_stop(void);
#endif
