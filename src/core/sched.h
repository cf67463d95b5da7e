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

#include "usched.h"

/* The running fiber, NULL outside fibers. */
usched_task_t *usched__current(void);

/* Parks the running fiber; after its context is saved the worker calls
 * after(arg) (may be NULL). Returns when some waker calls usched__wake. */
void usched__block(void (*after)(void *arg), void *arg);

/* Makes a blocked fiber runnable, placing it through the policy.
 * flags: USCHED_SEL_SYNC when the caller is about to block itself. Callable
 * from fibers, workers' host contexts (timers) and outside threads. */
void usched__wake(usched_task_t *t, unsigned flags);

/* Per-fiber word for the blocking primitives (e.g. a wake reason, a message
 * slot pointer). Owned by whoever holds the fiber blocked. */
void **usched__task_slot(usched_task_t *t);
uint64_t usched__task_id(const usched_task_t *t);
/* Intrusive link for wait queues (owned by the wait queue holding it). */
usched_task_t **usched__task_link(usched_task_t *t);

/* ---- timers: per-CPU heaps, fired by their worker in host context ------- */
typedef struct usched__timer {
    uint64_t deadline_ns;              /* CLOCK_MONOTONIC */
    void (*fn)(struct usched__timer *); /* called on the owning worker */
    int cpu;                            /* owning CPU (set by add) */
    void *owner;                        /* owning worker (set by add) */
    int heap_index;                     /* -1 when not queued */
} usched__timer_t;

/* Queues timer t on the calling fiber's CPU. -EPERM outside fibers. */
int usched__timer_add(usched__timer_t *t);
/* Removes t if still queued; returns true if it was removed before firing.
 * Any thread. Contract: false means the timer fired OR is firing right now
 * (the worker pops it under the heap lock and calls fn after releasing it),
 * so the timer's memory must stay valid until fn has returned: users publish
 * "fn is done" as fn's last access and wait for it (see src/sync/waitq.h). */
bool usched__timer_cancel(usched__timer_t *t);

uint64_t usched__now_ns(void);

#endif
