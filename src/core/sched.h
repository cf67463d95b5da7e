/*
 * The core's internal interface for the blocking primitives (src/sync) and
 * the CLI-facing parts of the library. Policies never include this.
 *
 * Blocking protocol (Go's gopark with an unlock function):
 *   1. the fiber records itself in a wait structure under that structure's
 *      lock;
 *   2. it calls usched__block(unlock, lock): the core switches to the
 *      worker's host context and only then calls unlock(lock);
 *   3. a waker takes the same lock, removes the fiber, releases the lock and
 *      calls usched__wake(fiber, flags).
 * Because the lock is released only after the fiber's registers are saved, a
 * waker can never resume a fiber that is still running on its stack.
 */
#ifndef USCHED_SCHED_H
#define USCHED_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "core/place.h"
#include "core/timer.h"
#include "usched.h"

/* The worker loop (sched.c): a worker thread's body (arg: its struct
 * usched__wk), and a fiber's first frame. Waking workers: core/park.h. */
void *usched__worker_main(void *arg);
void usched__fiber_entry(void *arg);

/* The running fiber, NULL outside fibers. */
usched_task_t *usched__current(void);

/* Parks the running fiber; after its context is saved the worker calls
 * after(arg) (may be NULL). Returns when some waker calls usched__wake. */
void usched__block(void (*after)(void *arg), void *arg);
/* The same, saying what it waits for (blk: USCHED__TBLK_*, core/trace.h),
 * which a trace shows. */
void usched__block_on(int blk, void (*after)(void *arg), void *arg);

/* Waking a fiber (usched__wake, its flags, near wake-ups): core/place.h. */


/* Intrusive link for wait queues (owned by the wait queue holding it). */
usched_task_t **usched__task_link(usched_task_t *t);

/* ---- timers ------------------------------------------------------------ */

/* Queues timer t (core/timer.h) on the calling fiber's CPU; its worker fires
 * it from its host context. 0, -EPERM outside fibers, or -ENOMEM.
 * usched__timer_cancel (core/timer.h) removes it from any thread. */
int usched__timer_add(usched__timer_t *t);

/* Trace: the running fiber is about to wait for descriptor fd (trace.c). */
void usched__trace_io_wait(int fd);

#endif
