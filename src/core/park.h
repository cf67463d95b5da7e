/*
 * The park room (park.c): how a worker without work goes to sleep and how
 * another thread wakes it, in one place - the parking steps P1-P4, the
 * waking steps W1-W3, wakep, and every counter of parks and wake-ups - and
 * below it the park backends: what a parked worker waits in.
 *
 * Backends. A worker that parks waits in one of them and its state word
 * says which (WK_PARKED: the futex backend, WK_PARKED_POLL: the I/O
 * backend), so a waker that sees the state knows whom to ask for the wake-up.
 *   futex         the core's own (park.c): a futex wait on the worker's
 *                 state word; for every park while no fiber waits on a
 *                 descriptor, and for every park but one while fibers do.
 *   epoll         src/io's (src/io/poller.c), registered at load with
 *                 usched__park_register. io_poller=shared: one epoll
 *                 instance per scheduler, one parked CPU at a time in it
 *                 (the poller role), the others on their futex;
 *                 io_poller=percpu: an epoll instance per CPU, each CPU
 *                 blocked in its own while fibers wait on its descriptors.
 *                 The core knows it only through this table; it never
 *                 calls src/io by name.
 * docs/architecture.md says where an io_uring backend would plug in.
 */
#ifndef USCHED_CORE_PARK_H
#define USCHED_CORE_PARK_H

#include "core/queue.h"

/* What claim says (P1'). */
enum {
    USCHED__PARK_FUTEX = 0,    /* park on the futex */
    USCHED__PARK_CLAIMED = 1,  /* this CPU took the backend's role: wait in it */
    USCHED__PARK_DEFERRED = 2, /* the role waits (*defer_until): park on the futex until then */
    USCHED__PARK_RENEWED = 3,  /* likewise, a deferral that ran out renewed */
};

/*
 * A park backend. Of the registered (I/O) backend the core calls start and
 * fini from usched_start and usched_destroy (after the workers stopped),
 * and the others only while s->io is set (the backend's per-scheduler
 * state, created by the backend on the first descriptor wait, read with
 * acquire). The futex backend has only wait and wake.
 */
struct usched__park_backend {
    const char *name;
    int wake_stat; /* the counter of the wake-ups it makes (USCHED_STAT_*) */
    void (*start)(struct usched *s);
    void (*fini)(struct usched *s);
    /* A busy CPU, at every pick it runs a fiber (tick and time bound);
     * an idle one before it steals (poll: non-blocking; own false: not
     * the set w itself blocks in when it parks, io_poller=percpu). */
    void (*tick)(struct usched__wk *w);
    void (*poll)(struct usched__wk *w, bool own);
    /* P1': may w wait in this backend? USCHED__PARK_*; renew: the last park
     * was a deferral that ran out. */
    int (*claim)(struct usched *s, struct usched__wk *w, bool renew, uint64_t *defer_until);
    /* P3 found work after a successful claim: give the role back. */
    void (*unclaim)(struct usched *s, struct usched__wk *w);
    /* P4: wait until woken or deadline_ns (CLOCK_MONOTONIC, UINT64_MAX:
     * none); gives the role back before it returns. */
    void (*wait)(struct usched__wk *w, uint64_t deadline_ns);
    /* After P4 and the unpark: wake the fibers of what the wait saw. */
    void (*dispatch)(struct usched__wk *w);
    /* W3: w was CASed out of its parked state; make its wait return. True
     * when it made a wake-up (counted in wake_stat by the caller). w is NULL
     * at shutdown: every waiter of the backend. */
    bool (*wake)(struct usched *s, struct usched__wk *w);
    /* P3'' (may be NULL): w, about to wait on its futex, has work in this
     * backend after all (a descriptor wait it must block in the backend
     * for, added since its claim): P3 then counts it as work seen. */
    bool (*pending)(struct usched *s, struct usched__wk *w);
    /* The stall monitor's look at w, a stalled CPU (may be NULL): fibers
     * wait on descriptors that no CPU will see unless one is woken. */
    bool (*unwatched)(struct usched *s, struct usched__wk *w);
};

/* The I/O backend, NULL until one registers (once, at load, before any
 * scheduler starts); set while any scheduler's s->io is. */
extern const struct usched__park_backend *usched__park_io;
void usched__park_register(const struct usched__park_backend *b);

/* usched_start / usched_destroy: the registered backend's start and fini. */
void usched__park_start(struct usched *s);
void usched__park_fini(struct usched *s);

/* The I/O backend's polls, when s has one: a busy CPU's tick (acquire pairs
 * with the release that publishes s->io) and an idle CPU's poll. */
static inline void usched__park_io_tick(struct usched__wk *w)
{
    if (atomic_load_explicit(&w->s->io, memory_order_acquire)) usched__park_io->tick(w);
}

/* Fibers wait on descriptors homed on w's CPU (io_poller=percpu). */
static inline bool usched__park_io_own_waiters(struct usched__wk *w)
{
    return atomic_load_explicit(&w->s->io, memory_order_acquire) && usched__park_io->pending &&
           usched__park_io->pending(w->s, w);
}

static inline void usched__park_io_poll(struct usched__wk *w)
{
    if (atomic_load_explicit(&w->s->io, memory_order_acquire)) usched__park_io->poll(w, true);
}

/* The same, leaving out w's own set (io_poller=percpu): for a CPU about to
 * park, which blocks in that set when fibers wait on it. */
static inline void usched__park_io_poll_others(struct usched__wk *w)
{
    if (atomic_load_explicit(&w->s->io, memory_order_acquire)) usched__park_io->poll(w, false);
}

/* w is stalled: fibers wait on descriptors that no CPU will see unless one
 * is woken (the backend's unwatched). Any thread may ask. */
static inline bool usched__park_io_unwatched(struct usched__wk *w)
{
    return atomic_load_explicit(&w->s->io, memory_order_acquire) && usched__park_io->unwatched &&
           usched__park_io->unwatched(w->s, w);
}

/* P1-P4 (park.c): w, idle and not spinning, parks until a waker kicks it,
 * its earliest timer, or a poller deferral's end. True when P3 saw work or
 * the scheduler stopping (visible: what w could run or steal); w is awake
 * again and the caller looks for it. False after a sleep; *recheck then
 * says it was a poller deferral's end, not a kick (renew it next time). */
bool usched__park(struct usched *s, struct usched__wk *w, bool renew,
                  bool (*visible)(struct usched *s, struct usched__wk *w), bool *recheck);

/* W3 (park.c), once the caller saw `cpu` PARKED or PARKED_POLL: claim the
 * wake-up with a CAS and wake it through its backend. True if this caller
 * woke it. */
bool usched__wk_wake_parked(struct usched *s, struct usched__wk *from, int cpu);
/* Wakes one parked CPU, nearest to `near` first, when nobody spins (Go's
 * wakep; park.c). True: it woke one. */
bool usched__wk_wakep_any(struct usched *s, struct usched__wk *from, int near);
static inline bool usched__wk_wakep(struct usched *s, struct usched__wk *from, int near)
{
    /* The only worker, running: nobody to wake, and no fence to pay (a
     * spawn on one CPU called wakep for every child). */
    if (from && s->ncpus == 1) return false;
    return usched__wk_wakep_any(s, from, near);
}
/* Wakes every worker (shutdown). */
void usched__wk_kick_all(struct usched *s);
/* W-M's wake-up of the stall monitor sleeping at M3 (monitor.c), also its
 * stop: clears mon_idle and wakes it if it was set. */
void usched__park_wake_monitor(struct usched *s);

/* W3 [model: W3]: wake CPU `cpu` if it is parked (on its futex or in the
 * poller). True if this caller woke it (false: it was not parked, or
 * another waker claimed it first). */
static inline bool usched__wk_kick(struct usched *s, struct usched__wk *from, int cpu)
{
    uint32_t st = atomic_load_explicit(&s->wk[cpu]->state, memory_order_seq_cst);
    return (st == WK_PARKED || st == WK_PARKED_POLL) && usched__wk_wake_parked(s, from, cpu);
}

/* W1-W3: hand t to CPU `cpu` from another thread. */
static inline void usched__wk_inbox_put(struct usched *s, struct usched__wk *from, struct usched_task *t,
                                        int cpu)
{
    struct usched__wk *w = s->wk[cpu];
    if (from) from->handoff = 1; /* the partner is likely to answer: spin for it */
    atomic_fetch_add_explicit(&w->inbox_n, 1, memory_order_relaxed);
    /* W1 and W2 [model: W2] in one instruction: the push's exchange is a seq_cst
     * read-modify-write, so with the seq_cst load of the state in W3 (and
     * the parker's seq_cst store P1 and seq_cst inbox check P3) both
     * sides' accesses are in one total order: no separate fence needed. */
    usched__inbox_push(&w->inbox, &t->node); /* W1, W2 */
    usched__wk_kick(s, from, cpu);            /* W3 */
}

#endif
