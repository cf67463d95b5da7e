/*
 * Wait queues (see waitq.h for the protocol Q1-Q4) and sleep.
 *
 * The queue lock is a test-and-test-and-set spinlock: it is held for a few
 * dozen instructions (link, unlink, claim), never across a park, since a
 * fiber releases it from its worker's host context once switched out. A
 * holder may be an outside thread the kernel preempted, so a contender
 * yields its thread after a while instead of spinning on.
 *
 * Outside threads wait on their waiter's state word with FUTEX_WAIT; a waker
 * stores the new state (the claim) and then FUTEX_WAKEs that address. The
 * thread may already have returned by then: the wake is then spurious for
 * whatever waits on that stack address later, which futex users tolerate
 * (glibc's own semaphores rely on the same argument).
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arch/arch.h"
#include "base/error.h"
#include "base/futex.h"
#include "base/export.h"
#include "sync/waitq.h"

/* Spins (pause + load) on a busy wait-queue lock, or on a claim in flight,
 * before the thread yields its CPU: the lock is held for a few dozen
 * instructions, so 256 rounds outlast any holder that is running; only a
 * preempted holder makes the spinner yield. Not measured or swept. */
enum { SPIN_BEFORE_YIELD = 256 };

int usched__sync_check_slow(const void *obj, const uint32_t *magic, const char *what, const char *call)
{
    if (!obj) return usched__error(EINVAL, "%s: %s is NULL", call, what);
    uint32_t m = __atomic_load_n(magic, __ATOMIC_RELAXED);
    if (m == USCHED__SYNC_DEAD) return usched__error(EINVAL, "%s: the %s was destroyed", call, what);
    if (m != USCHED__SYNC_MAGIC) return usched__error(EINVAL, "%s: the %s is not initialised", call, what);
    return 0;
}

int usched__sync_init(void *obj, size_t size, uint32_t *magic, const char *what)
{
    if (!obj) return usched__error(EINVAL, "%s_init: %s is NULL", what, what);
    memset(obj, 0, size);
    __atomic_store_n(magic, USCHED__SYNC_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

int usched__sync_destroy_idle(struct usched__waitq *q, uint32_t *magic, const char *what)
{
    usched__wq_lock(q);
    uint32_t nw = q->nwaiters;
    if (nw) {
        usched__wq_unlock(q);
        return usched__error(EBUSY, "%s_destroy: %u fiber%s or thread%s waiting", what, nw,
                             nw == 1 ? "" : "s", nw == 1 ? "" : "s");
    }
    __atomic_store_n(magic, USCHED__SYNC_DEAD, __ATOMIC_RELAXED);
    usched__wq_unlock(q);
    return 0;
}

static USCHED_TLS char thread_ident_anchor;

uintptr_t usched__sync_ident(void)
{
    usched_task_t *t = usched__current();
    if (t) return (uintptr_t)t;
    return (uintptr_t)&thread_ident_anchor | 1u;
}

void usched__wq_lock_slow(struct usched__waitq *q)
{
    for (unsigned spins = 0;;) {
        while (__atomic_load_n(&q->lock, __ATOMIC_RELAXED)) {
            if (++spins < SPIN_BEFORE_YIELD) {
                usched__cpu_relax();
            } else {
                spins = 0;
                sched_yield();
            }
        }
        if (!__atomic_exchange_n(&q->lock, 1, __ATOMIC_ACQUIRE)) return;
    }
}

static void unlock_after_park(void *arg)
{
    usched__wq_unlock(arg);
}

struct usched__waiter *usched__wq_pop_near(struct usched__waitq *q)
{
    struct usched__waiter *h = q->head, *w = h;
    if (!h) return NULL;
    if (h->next && h->passed < WQ_NEAR_PASS) {
        usched__near_t here = usched__near_cpu();
        int best = here.cpu >= 0 ? usched__near_dist(here, h->task) : 0;
        /* the first of the nearest: the head unless another is nearer */
        struct usched__waiter *x = h->next;
        for (int n = 1; best > 0 && x && n < WQ_NEAR_LOOK; x = x->next, n++) {
            int d = usched__near_dist(here, x->task);
            if (d < best) {
                best = d;
                w = x;
            }
        }
        if (w != h) {
            h->passed++;
            usched__near_taken(here);
        }
    }
    usched__wq_remove(q, w);
    return w;
}

void usched__wq_claim_timed(struct usched__waiter *w)
{
    uint32_t exp = WQ_PENDING;
    /* The timeout may race: one CAS decides (pairs as in usched__wq_claim). */
    if (!atomic_compare_exchange_strong_explicit(&w->state, &exp, WQ_WOKEN, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        fprintf(stderr, "usched: wait queue: a queued waiter was claimed twice (state %u)\n", exp);
        abort();
    }
}

void usched__wq_futex_wake(_Atomic uint32_t *word)
{
    usched__futex(word, FUTEX_WAKE, 1, NULL);
}

usched_task_t *usched__wq_claim_all(struct usched__waitq *q, int result, usched_task_t *chain)
{
    struct usched__waiter *w;
    while ((w = usched__wq_pop(q))) {
        usched__wtok_t tok = usched__wq_claim(w, result);
        if (tok.task) {
            /* Claimed: the link is ours until the wake. */
            *usched__task_link(tok.task) = chain;
            chain = tok.task;
        } else {
            usched__wq_wake(tok, 0);
        }
    }
    return chain;
}

void usched__wq_wake_chain(usched_task_t *chain, unsigned flags)
{
    while (chain) {
        usched_task_t *t = chain;
        chain = *usched__task_link(t);
        usched__wake(t, flags);
    }
}

/* Q3: claims w for its timeout under its lock; unlinks it if won. */
static bool claim_timeout(struct usched__waiter *w)
{
    if (w->lk) usched__wq_lock(w->lk);
    uint32_t exp = WQ_PENDING;
    bool won = atomic_compare_exchange_strong_explicit(&w->state, &exp, WQ_TIMEDOUT,
                                                       memory_order_acq_rel, memory_order_acquire);
    if (won && w->q) usched__wq_remove(w->q, w);
    if (w->lk) usched__wq_unlock(w->lk);
    return won;
}

/* Q3 for fibers: runs where the armed timer fires - on the worker that armed
 * it, in its host context or on the stack of a fiber it runs (timers fire
 * between picks, at a lone yield's look, and after a fiber's switch), or on
 * the stall monitor's thread, which fires a stalled CPU's timers
 * (core/monitor.c, T1-T3). So it takes only the wait queue's lock and wakes
 * the fiber; it never blocks. */
static void timer_fired(usched__timer_t *t)
{
    struct usched__waiter *w = (struct usched__waiter *)((char *)t - offsetof(struct usched__waiter, timer));
    usched_task_t *task = w->task;
    bool won = claim_timeout(w);
    /* Last touch of the waiter (Q4); if we won, it stays parked until the
     * wake below, so the frame is still there. */
    atomic_store_explicit(&w->timer_done, 1, memory_order_release);
    if (won) usched__wake(task, 0);
}

uint64_t usched__deadline_after(uint64_t timeout_ns)
{
    if (timeout_ns == UINT64_MAX) return UINT64_MAX;
    uint64_t now = usched__now_ns();
    return timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}

static int wait_fiber(struct usched__waitq *lk, struct usched__waiter *w, uint64_t deadline)
{
    bool armed = false;
    if (deadline != UINT64_MAX) {
        w->timed = 1;
        w->timer.heap_index = -1;
        w->timer.owner = NULL;
        atomic_store_explicit(&w->timer_done, 0, memory_order_relaxed);
        w->timer.deadline_ns = deadline;
        w->timer.fn = timer_fired;
        int rc = usched__timer_add(&w->timer);
        if (rc < 0) {
            if (w->q) usched__wq_remove(w->q, w);
            if (lk) usched__wq_unlock(lk);
            return rc;
        }
        armed = true;
    }
    /* Q1: the lock is released once this fiber is switched out. */
    usched__block_on(w->blk, lk ? unlock_after_park : NULL, lk);
    if (armed && !usched__timer_cancel(&w->timer)) {
        /* Q4: the callback left the heap; wait until it is done with w. */
        for (unsigned spins = 0; !atomic_load_explicit(&w->timer_done, memory_order_acquire);)
            if (++spins < SPIN_BEFORE_YIELD)
                usched__cpu_relax();
            else
                sched_yield(), spins = 0;
    }
    if (atomic_load_explicit(&w->state, memory_order_acquire) == WQ_TIMEDOUT) return -ETIMEDOUT;
    return w->result;
}

static int wait_thread(struct usched__waitq *lk, struct usched__waiter *w, uint64_t deadline)
{
    w->timed = deadline != UINT64_MAX;
    if (lk) usched__wq_unlock(lk);
    for (;;) {
        uint32_t st = atomic_load_explicit(&w->state, memory_order_acquire);
        if (st != WQ_PENDING) break;
        if (deadline == UINT64_MAX) {
            usched__futex(&w->state, FUTEX_WAIT, WQ_PENDING, NULL);
            continue;
        }
        uint64_t now = usched__now_ns();
        if (now >= deadline) {
            /* Q3 for threads: claim our own timeout. */
            if (claim_timeout(w)) return -ETIMEDOUT;
            continue;
        }
        uint64_t d = deadline - now;
        struct timespec ts = usched__ns_timespec(d);
        usched__futex(&w->state, FUTEX_WAIT, WQ_PENDING, &ts);
    }
    return w->result;
}

int usched__wq_wait_until(struct usched__waitq *lk, struct usched__waiter *w, uint64_t deadline_ns)
{
    if (w->task) return wait_fiber(lk, w, deadline_ns);
    return wait_thread(lk, w, deadline_ns);
}

int usched__wq_wait(struct usched__waitq *lk, struct usched__waiter *w, uint64_t timeout_ns)
{
    return usched__wq_wait_until(lk, w, usched__deadline_after(timeout_ns));
}

/* ---- sleep -------------------------------------------------------------- */

USCHED_EXPORT int usched_sleep_ns(uint64_t ns)
{
    if (!usched__current()) {
        /* Outside a fiber: the thread sleeps (nanosleep). */
        struct timespec ts = usched__ns_timespec(ns);
        while (nanosleep(&ts, &ts) != 0)
            if (errno != EINTR) return usched__error(errno, "sleep: nanosleep failed");
        return 0;
    }
    if (ns == 0) {
        usched_yield();
        return 0;
    }
    struct usched__waiter w;
    usched__waiter_init(&w, USCHED__TBLK_sleep);
    int rc = usched__wq_wait(NULL, &w, ns);
    if (rc == -ETIMEDOUT) return 0;
    if (rc < 0) return usched__error(-rc, "sleep: cannot arm a timer");
    return rc;
}
