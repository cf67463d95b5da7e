/*
 * Timers: one binary min-heap per CPU under a spin lock. The owning worker
 * fires due timers from its host context (between fibers, and before it
 * parks, with the futex timeout set to the earliest deadline); any thread
 * may cancel. Blocking primitives reach them through usched__timer_add and
 * usched__timer_cancel (core/sched.h); the worker loop owns the heap.
 */
#ifndef USCHED_CORE_TIMER_H
#define USCHED_CORE_TIMER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct usched__timer {
    uint64_t deadline_ns;              /* CLOCK_MONOTONIC */
    void (*fn)(struct usched__timer *); /* called on the owning worker */
    int cpu;                            /* owning CPU (set by add) */
    void *owner;                        /* owning heap (set by add) */
    int heap_index;                     /* -1 when not queued */
    uint64_t task_id;                   /* fiber that armed it (set by usched__timer_add) */
} usched__timer_t;

/* One CPU's timers: a heap under `lock` (owner fires, any thread cancels). */
typedef struct usched__timers {
    _Atomic uint32_t lock;
    _Atomic uint32_t n;        /* queued timers; read without the lock as a hint */
    /* heap[0]'s deadline, UINT64_MAX when empty: written under the lock,
     * read without it. Exact for the owner, the only thread that adds; for
     * another thread a value it held a moment ago (a cancel only moves it
     * later, so the owner at worst takes the lock for nothing). */
    _Atomic uint64_t first;
    usched__timer_t **heap;
    int cap;
} usched__timers_t;

void usched__timers_init(usched__timers_t *h);
void usched__timers_fini(usched__timers_t *h);
/* Queues t on heap h of CPU `cpu`. 0 or -ENOMEM. */
int usched__timers_add(usched__timers_t *h, usched__timer_t *t, int cpu);
/* Fires every timer due at `now` (owner only). */
void usched__timers_run(usched__timers_t *h, uint64_t now);
/* Fires due timers at `now` one at a time while may_fire(head, arg), asked
 * under the heap's lock, allows it; returns how many fired. For a thread
 * other than the owner (the stall monitor, core/monitor.c T1-T3). */
int usched__timers_run_guarded(usched__timers_t *h, uint64_t now,
                               bool (*may_fire)(const usched__timer_t *t, void *arg), void *arg);
/* Earliest deadline, UINT64_MAX if none (without the lock: `first`). */
uint64_t usched__timers_next(usched__timers_t *h);

static inline bool usched__timers_pending(const usched__timers_t *h)
{
    return atomic_load_explicit(&h->n, memory_order_relaxed) != 0;
}

/* Removes t if still queued; returns true if it was removed before firing.
 * Any thread. Contract: false means the timer fired OR is firing right now
 * (the worker pops it under the heap lock and calls fn after releasing it),
 * so the timer's memory must stay valid until fn has returned: users publish
 * "fn is done" as fn's last access and wait for it (see src/sync/waitq.h). */
bool usched__timer_cancel(usched__timer_t *t);

/* CLOCK_MONOTONIC, ns. */
uint64_t usched__now_ns(void);

#endif
