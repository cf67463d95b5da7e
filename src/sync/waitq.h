/*
 * Wait queues: the one mechanism every blocking primitive of src/sync is
 * built on (channel, mutex, condvar, semaphore, waitgroup, sleep).
 *
 * A waiter lives on the stack of whoever waits: a fiber (it parks with
 * usched__block) or an outside thread (it sleeps on a futex). Each waiter has
 * one state word; the single transition out of WQ_PENDING (a CAS) decides who
 * owns the wake-up: a waker (WQ_WOKEN), the waiter's own timeout
 * (WQ_TIMEDOUT). Claims are made under the queue's lock, by whoever also
 * unlinks the waiter, so a claimed waiter is never on a queue.
 *
 * Protocol (numbers referred to in waitq.c):
 *   Q1. the waiter takes q's lock, checks its condition, links itself
 *       (usched__wq_push) and calls usched__wq_wait, which releases the lock:
 *       a fiber only once its registers are saved (usched__block's `after`),
 *       so no waker resumes a fiber still running on its stack;
 *   Q2. a waker takes the lock, pops/claims a waiter (usched__wq_pop or
 *       usched__wq_claim), writes its result/message, releases the lock and
 *       calls usched__wq_wake with the token the claim returned. After the
 *       claim it never reads the waiter again: an outside thread may return
 *       as soon as it sees the state change;
 *   Q3. a timeout (a core timer in a worker's host context, or the futex
 *       timeout of an outside thread) takes the lock and claims the waiter
 *       with WQ_TIMEDOUT; if the claim fails, a waker won and the timeout
 *       touches nothing but its own "done" word;
 *   Q4. a fiber woken with a timer armed cancels it; if the timer already
 *       left the heap, its callback is running or about to run on the owning
 *       worker, and the fiber waits for the callback's "done" word before
 *       its stack frame (the waiter) goes away.
 * Wake-ups go through usched__wake, so the policy places the woken fiber
 * (with USCHED__WAKE_SYNC where the waker is about to block).
 */
#ifndef USCHED_SYNC_WAITQ_H
#define USCHED_SYNC_WAITQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/sched.h"
#include "core/trace.h"
#include "usched.h"

enum { WQ_PENDING = 0, WQ_WOKEN = 1, WQ_TIMEDOUT = 2 };

/* Magic of an initialised mutex/cond/sem/wg/channel ("sync"). */
#define USCHED__SYNC_MAGIC 0x73796e63u
#define USCHED__SYNC_DEAD 0x64656164u

struct usched__waiter {
    struct usched__waiter *next, *prev; /* queue links (under the queue's lock) */
    struct usched__waitq *q;            /* queue it waits on, NULL for a plain sleep */
    struct usched__waitq *lk;           /* queue whose lock word guards q (usually q) */
    usched_task_t *task;                /* the fiber; NULL for an outside thread */
    uintptr_t ident;                    /* usched__sync_ident() of the waiter */
    _Atomic uint32_t state;             /* WQ_*: one CAS out of PENDING; futex word of threads */
    int timed;                          /* a timeout may race the wakers (set before unlock) */
    int result;                         /* written by the claimer before the CAS */
    void *msg;                          /* channel message (either direction) */
    uint8_t blk;                        /* what it waits for (USCHED__TBLK_*, for traces) */
    uint8_t passed;                     /* times passed over at the head (usched__wq_pop_near) */
    usched__timer_t timer;              /* armed by a timed fiber wait */
    _Atomic uint32_t timer_done;        /* set by the timer callback as its last touch */
};

/* What a waker needs after the claim (it must not read the waiter then). */
typedef struct usched__wtok {
    usched_task_t *task;      /* fiber to wake, or NULL */
    _Atomic uint32_t *futex;  /* outside thread's state word, or NULL */
} usched__wtok_t;

/* Identity of the caller: its fiber, or (low bit set) its thread. Never 0. */
uintptr_t usched__sync_ident(void);

void usched__wq_lock_slow(struct usched__waitq *q);

/* The queue lock: a test-and-test-and-set spinlock (see waitq.c). */
static inline void usched__wq_lock(struct usched__waitq *q)
{
    if (__builtin_expect(!__atomic_exchange_n(&q->lock, 1, __ATOMIC_ACQUIRE), 1)) return;
    usched__wq_lock_slow(q);
}

static inline void usched__wq_unlock(struct usched__waitq *q)
{
    __atomic_store_n(&q->lock, 0, __ATOMIC_RELEASE);
}

/* The operations below that every blocking call and every wake-up runs are
 * inline: out of line, their calls cost a channel round trip 28 of its
 * 994 instructions (bench/micro/count_locked.py). */

/* Prepares a waiter for the calling fiber or thread. */
/* blk: what it waits for (USCHED__TBLK_*, core/trace.h), shown in traces. */
static inline void usched__waiter_init(struct usched__waiter *w, int blk)
{
    w->blk = (uint8_t)blk;
    w->next = w->prev = NULL;
    w->q = w->lk = NULL;
    w->task = usched__current();
    w->ident = w->task ? (uintptr_t)w->task : usched__sync_ident();
    atomic_store_explicit(&w->state, WQ_PENDING, memory_order_relaxed);
    w->result = 0;
    w->msg = NULL;
    w->timed = 0;
    w->passed = 0;
}

/* Under the lock: link w at the tail (w->lk = q: set w->lk after this when
 * another queue's lock guards q). */
static inline void usched__wq_push(struct usched__waitq *q, struct usched__waiter *w)
{
    struct usched__waiter *tail = q->tail;
    w->q = w->lk = q;
    w->next = NULL;
    w->prev = tail;
    if (tail)
        tail->next = w;
    else
        q->head = w;
    q->tail = w;
    __atomic_store_n(&q->nwaiters, q->nwaiters + 1, __ATOMIC_RELAXED);
}

/* Under the lock: unlinks w (which must be queued on q). */
static inline void usched__wq_remove(struct usched__waitq *q, struct usched__waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        q->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        q->tail = w->prev;
    w->next = w->prev = NULL;
    __atomic_store_n(&q->nwaiters, q->nwaiters - 1, __ATOMIC_RELAXED);
}

/* Under the lock: unlinks and returns the first waiter (NULL if none). The
 * caller then sets its msg if any and claims it (usched__wq_claim). */
static inline struct usched__waiter *usched__wq_pop(struct usched__waitq *q)
{
    struct usched__waiter *w = q->head;
    if (w) usched__wq_remove(q, w);
    return w;
}

/* Under the lock: as usched__wq_pop, but for a fiber that hands the waiter a
 * message, which any of them may take: of the WQ_NEAR_LOOK oldest waiters,
 * the first of those that last ran nearest the caller's CPU (the same CPU,
 * else the lowest topology level shared; knob near_wake), so that the
 * hand-off is a local switch, or stays in a core or cache, instead of a
 * wake-up further away; the head is taken once it has been passed over
 * WQ_NEAR_PASS times (bounded unfairness). */
enum { WQ_NEAR_LOOK = 4, WQ_NEAR_PASS = 16 };
struct usched__waiter *usched__wq_pop_near(struct usched__waitq *q);

/* The claim of a timed waiter, which its timeout may race (waitq.c). */
void usched__wq_claim_timed(struct usched__waiter *w);

/* Under the lock: claims a waiter already unlinked (usched__wq_pop) with
 * `result`: returns its wake token. */
static inline usched__wtok_t usched__wq_claim(struct usched__waiter *w, int result)
{
    usched__wtok_t tok = {.task = w->task, .futex = w->task ? NULL : &w->state};
    w->result = result;
    if (__builtin_expect(w->timed, 0))
        usched__wq_claim_timed(w);
    else
        /* Nobody else can claim it: a release store (pairs with the
         * waiter's acquire load, fiber resume or futex loop) is enough. */
        atomic_store_explicit(&w->state, WQ_WOKEN, memory_order_release);
    return tok;
}

/* FUTEX_WAKE of one outside thread waiting on its state word (waitq.c). */
void usched__wq_futex_wake(_Atomic uint32_t *word);

/* After the lock is released: wakes a claimed waiter. flags: USCHED__WAKE_SYNC
 * when the caller is about to block. */
static inline void usched__wq_wake(usched__wtok_t tok, unsigned flags)
{
    if (tok.task)
        usched__wake(tok.task, flags);
    else if (tok.futex)
        usched__wq_futex_wake(tok.futex);
}

/* Under the lock: pops and claims every waiter with `result`. Outside
 * threads are futex-woken at once (their waiter may vanish once claimed);
 * fibers are chained through their task link onto `chain`, which is
 * returned: wake it with usched__wq_wake_chain after releasing the lock. */
usched_task_t *usched__wq_claim_all(struct usched__waitq *q, int result, usched_task_t *chain);
void usched__wq_wake_chain(usched_task_t *chain, unsigned flags);

/* Q1: called with lk's lock held and w pushed (or, for a plain sleep,
 * lk == NULL and w not queued); releases the lock and waits until claimed. timeout_ns ==
 * UINT64_MAX waits forever. Returns w->result, or -ETIMEDOUT, or -ENOMEM if
 * no timer could be armed (w is then unlinked). */
int usched__wq_wait(struct usched__waitq *lk, struct usched__waiter *w, uint64_t timeout_ns);
/* The same until deadline_ns (CLOCK_MONOTONIC, UINT64_MAX: forever; one in
 * the past times out at once), for a caller that holds a deadline. */
int usched__wq_wait_until(struct usched__waitq *lk, struct usched__waiter *w, uint64_t deadline_ns);
/* The deadline timeout_ns from now (UINT64_MAX: none; saturates). */
uint64_t usched__deadline_after(uint64_t timeout_ns);

/* Waiters queued (under the lock, or as a hint without it). */
static inline uint32_t usched__wq_len(const struct usched__waitq *q)
{
    return __atomic_load_n(&q->nwaiters, __ATOMIC_RELAXED);
}

/* Checks an object argument of public call `call` ("mutex_lock"): 0, or
 * -EINVAL with the detail "<call>: <what> is NULL" / "... the <what> is not
 * initialised" / "... the <what> was destroyed". */
int usched__sync_check_slow(const void *obj, const uint32_t *magic, const char *what, const char *call);
/* Inline for the live object (every channel and mutex operation checks
 * one: the call cost about 35 instructions of a rendezvous round trip's
 * 2000, bench/micro/count_locked.py); the slow path words the error. */
static inline int usched__sync_check(const void *obj, const uint32_t *magic, const char *what,
                                     const char *call)
{
    if (__builtin_expect(obj != NULL, 1) && __atomic_load_n(magic, __ATOMIC_RELAXED) == USCHED__SYNC_MAGIC)
        return 0;
    return usched__sync_check_slow(obj, magic, what, call);
}

/* The _init calls: -EINVAL for NULL ("<what>_init: <what> is NULL"), else
 * zeroes the object's `size` bytes and marks it live. */
int usched__sync_init(void *obj, size_t size, uint32_t *magic, const char *what);

/* The _destroy calls of objects that are only waited on: -EBUSY while q
 * has waiters, else marks the object destroyed. */
int usched__sync_destroy_idle(struct usched__waitq *q, uint32_t *magic, const char *what);

#endif
