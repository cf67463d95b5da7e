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

#include "core/timer.h"
#include "usched.h"

/* The running fiber, NULL outside fibers. */
usched_task_t *usched__current(void);

/* Parks the running fiber; after its context is saved the worker calls
 * after(arg) (may be NULL). Returns when some waker calls usched__wake. */
void usched__block(void (*after)(void *arg), void *arg);
/* The same, saying what it waits for (blk: USCHED__TBLK_*, core/trace.h),
 * which a trace shows. */
void usched__block_on(int blk, void (*after)(void *arg), void *arg);

/* Why a fiber wakes up (usched__wake's flags). They have the values of the
 * matching USCHED_SEL_* flags of include/usched/policy.h (asserted in
 * core/place.c), which the core passes on to the policy's select_cpu. */
enum {
    USCHED__WAKE_SYNC = 0x4,  /* the waker is about to block (a hand-off) */
    USCHED__WAKE_EXIT = 0x20, /* with SYNC: the waker is exiting, its CPU frees now */
    USCHED__WAKE_IO = 0x40,   /* the fiber's file descriptor became ready */
};

/* Makes a blocked fiber runnable, placing it through the policy.
 * flags: USCHED__WAKE_*. Callable from fibers, workers' host contexts
 * (timers, the I/O poller) and outside threads. */
void usched__wake(usched_task_t *t, unsigned flags);

/* Near wake-ups (knob near_wake): of the fibers waiting for one thing, the
 * one to hand a message to is the one that last ran nearest the caller's
 * CPU. A waker looks up its CPU once (usched__near_cpu: cpu -1 when the
 * knob is off or the caller is not a fiber, and then there is nothing to
 * prefer), measures candidates with usched__near_dist and, when it passes
 * over a longer waiter for a nearer one, counts it with usched__near_taken
 * (both only with a near_cpu that gave a CPU: wk is then the caller's
 * worker, and the count is its own). */
struct usched__wk;
typedef struct usched__near {
    struct usched__wk *wk;
    int cpu;
} usched__near_t;
usched__near_t usched__near_cpu(void);
/* 0: t last ran on n's CPU; 1 + the lowest topology level the two CPUs
 * share (USCHED_LVL_*) otherwise; USCHED__NEAR_FAR for an outside thread's
 * waiter (t NULL), a fiber of another scheduler or one that never ran. */
enum { USCHED__NEAR_FAR = 1 << 16 };
int usched__near_dist(usched__near_t n, const usched_task_t *t);
void usched__near_taken(usched__near_t n);

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
