/* Helpers for the I/O tests that look inside the per-fd state (src/io). */
#ifndef USCHED_TEST_IO_INTERNAL_H
#define USCHED_TEST_IO_INTERNAL_H

#include "io/io_impl.h"

/* Waiters queued on fd in direction dir (IO_RD, IO_WR, IO_ANY). */
static inline int io_waiters(int fd, int dir)
{
    struct usched__pd *pd = usched__pd_get(fd);
    usched__pd_lock(pd);
    int n = (int)usched__wq_len(&pd->q[dir]);
    usched__pd_unlock(pd);
    return n;
}

#endif
