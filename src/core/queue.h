/*
 * Queue operations of the core: the global queue (gq_: one locked FIFO for
 * outside spawns, ring overflow and shared-run-queue policies) and each
 * worker's local queues (wk_: the ring, the next slot, the bound list and
 * the inbox). Inline: they are the hot path of every hand-off.
 *
 * Who may call what: wk_local_put, wk_ring_put, wk_bound_* and
 * wk_inbox_drain on the worker that owns w only; the gq_ functions from any
 * thread. Handing a fiber to another CPU's inbox wakes it: that is the park
 * room's (core/park.h, usched__wk_inbox_put).
 */
#ifndef USCHED_CORE_QUEUE_H
#define USCHED_CORE_QUEUE_H

#include "core/core.h"

/* Appends n fibers to the global queue (queue.c). */
void usched__gq_push_many(struct usched *s, struct usched_task **v, unsigned n);
/* Takes the oldest fiber of the global queue (queue.c); NULL when empty. */
struct usched_task *usched__gq_pop_locked(struct usched *s);
/* Takes t out of the global queue if it is the oldest one there (queue.c). */
bool usched__gq_take_head(struct usched *s, struct usched_task *t);

static inline void usched__gq_push(struct usched *s, struct usched_task *t)
{
    usched__gq_push_many(s, &t, 1);
}

/* Owner: t at the ring's tail; a full ring spills half of itself to the
 * global queue. */
static inline void usched__wk_ring_put(struct usched *s, struct usched__wk *w, struct usched_task *t)
{
    /* The spill buffer lives in the worker, not on the (fiber) stack: a
     * 1 KiB array there would touch another page of every fiber's stack. */
    unsigned n = usched__ring_push_or_spill(&w->ring, t, (void **)w->spill);
    if (n) {
        usched__gq_push_many(s, w->spill, n);
        usched__stat_add(&w->stats, USCHED_STAT_ring_overflows, 1);
    }
}

/* Owner: bound fibers wait on their CPU's list, which no thief sees. */
static inline void usched__wk_bound_put(struct usched__wk *w, struct usched_task *t)
{
    t->qnext = NULL;
    if (w->bound_tail)
        w->bound_tail->qnext = t;
    else
        w->bound_head = t;
    w->bound_tail = t;
    atomic_store_explicit(&w->nbound, atomic_load_explicit(&w->nbound, memory_order_relaxed) + 1,
                          memory_order_release);
}

static inline struct usched_task *usched__wk_bound_get(struct usched__wk *w)
{
    struct usched_task *t = w->bound_head;
    if (!t) return NULL;
    w->bound_head = t->qnext;
    if (!w->bound_head) w->bound_tail = NULL;
    atomic_store_explicit(&w->nbound, atomic_load_explicit(&w->nbound, memory_order_relaxed) - 1,
                          memory_order_release);
    return t;
}

/* Owner: t on the ring or, bound, on the bound list. */
static inline void usched__wk_queue(struct usched *s, struct usched__wk *w, struct usched_task *t)
{
    if (t->bound >= 0)
        usched__wk_bound_put(w, t);
    else
        usched__wk_ring_put(s, w, t);
}

/* Owner: t behind every fiber queued here (a yield): the head end of the
 * ring, which the owner's LIFO pop reaches last (and thieves first), or the
 * bound list, picked every other time (find_local): a bound fiber's yield
 * loop gets half its CPU. A full ring takes it at the tail. */
static inline void usched__wk_queue_oldest(struct usched *s, struct usched__wk *w, struct usched_task *t)
{
    if (t->bound >= 0)
        usched__wk_bound_put(w, t);
    else if (!usched__ring_len(&w->ring) || usched__ring_push_head(&w->ring, t) < 0)
        usched__wk_ring_put(s, w, t); /* alone (same order, no CAS) or full */
}

/* Owner: t behind every fiber queued here, a bound one behind the ring and
 * the global queue too (a preemption, a demoted next slot). Without this
 * the bound list, picked every other time, ran a bound fiber preempted
 * every preempt_us again after one other fiber, and requests arriving
 * faster than that waited for the ring's FIFO pick (1 in 31). */
static inline void usched__wk_queue_behind(struct usched *s, struct usched__wk *w, struct usched_task *t)
{
    /* Read before t is queued: from then on a thief may run it, it may
     * exit, and its descriptor may be reused by a spawn (TSan saw that
     * spawn's write of `bound` race this read under `usched bench build`
     * with preemption). */
    bool bound = t->bound >= 0;
    usched__wk_queue_oldest(s, w, t);
    if (bound) w->bound_behind = 1;
}

/*
 * The next slot without a locked instruction on the owner's side. The owner
 * takes from its slot on every switch and displaces into it on every spawn;
 * others take from it rarely (a thief's last pass after a 3 us back-off, the
 * monitor serving a stalled CPU). So the rare side pays for the fence
 * (an asymmetric Dekker, as userspace RCU does with membarrier):
 *  N1. the owner stores next_owner = 1, then (a compiler barrier only)
 *      loads next_thief; if that is 0 it reads and writes `next` with plain
 *      loads and stores, and ends with a release store of next_owner = 0.
 *      Otherwise it clears next_owner and uses the locked exchange or CAS.
 *  N2. a taker CASes next_thief 0 -> 1 (one taker per slot at a time);
 *  N3. then calls membarrier(PRIVATE_EXPEDITED): every thread of the process
 *      that is running executes a full fence, so either the owner's store of
 *      N1 is visible now, or its load of next_thief comes after the fence
 *      and sees 1;
 *  N4. it takes the fiber (CAS) only if it then reads next_owner == 0, and
 *      clears next_thief (release). A taker that sees 1 gives up this time.
 * So the owner's plain accesses and a taker's CAS never overlap. Without
 * membarrier (old kernels, seccomp), next_asym is false: the owner uses
 * the exchange and takers a plain CAS, as before.
 */
static inline bool usched__wk_next_enter(struct usched *s, struct usched__wk *w)
{
    if (!s->next_asym) return false;
    atomic_store_explicit(&w->next_owner, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* N1: a taker's membarrier is the fence */
    if (!atomic_load_explicit(&w->next_thief, memory_order_acquire)) return true;
    atomic_store_explicit(&w->next_owner, 0, memory_order_relaxed);
    return false;
}

static inline void usched__wk_next_leave(struct usched__wk *w)
{
    atomic_store_explicit(&w->next_owner, 0, memory_order_release);
}

/* Owner: puts t (or NULL) into the next slot; returns what was there. */
static inline struct usched_task *usched__wk_next_swap(struct usched *s, struct usched__wk *w,
                                                       struct usched_task *t)
{
    if (!usched__wk_next_enter(s, w)) return atomic_exchange_explicit(&w->next, t, memory_order_acq_rel);
    struct usched_task *old = atomic_load_explicit(&w->next, memory_order_relaxed);
    atomic_store_explicit(&w->next, t, memory_order_release);
    usched__wk_next_leave(w);
    return old;
}

/* Owner: takes t out of the next slot if it is there. */
static inline bool usched__wk_next_take_if(struct usched *s, struct usched__wk *w, struct usched_task *t)
{
    if (!usched__wk_next_enter(s, w)) {
        struct usched_task *exp = t;
        return atomic_compare_exchange_strong_explicit(&w->next, &exp, NULL, memory_order_acq_rel,
                                                       memory_order_relaxed);
    }
    bool ok = atomic_load_explicit(&w->next, memory_order_relaxed) == t;
    if (ok) atomic_store_explicit(&w->next, NULL, memory_order_relaxed);
    usched__wk_next_leave(w);
    return ok;
}

/* Any thread but the owner: takes t out of w's next slot if it is still
 * there (N2-N4; queue.c). False also when the owner was at its slot. */
bool usched__wk_next_steal(struct usched *s, struct usched__wk *w, struct usched_task *t);
/* At start: registers for membarrier and sets s->next_asym (queue.c). */
void usched__next_asym_init(struct usched *s);

/* Owner: queue t locally at `slot`. Returns true when a fiber other CPUs may
 * steal landed in the ring (then an idle CPU should look). */
static inline bool usched__wk_local_put(struct usched *s, struct usched__wk *w, struct usched_task *t,
                                        int slot)
{
    if (slot == USCHED_SLOT_NEXT || slot == USCHED_SLOT_HEAD) {
        /* An empty slot takes a plain release store: only the owner writes
         * it, and thieves only CAS a fiber out, never into an empty slot.
         * (It saves a locked exchange per hand-off.) */
        struct usched_task *old = atomic_load_explicit(&w->next, memory_order_relaxed);
        if (!old) {
            atomic_store_explicit(&w->next, t, memory_order_release);
            return false;
        }
        old = usched__wk_next_swap(s, w, t);
        if (!old) return false;
        t = old; /* the displaced fiber goes to the tail */
    }
    if (t->bound >= 0) {
        /* [model: BRG] a bound fiber displaced from the slot: its CPU's
         * bound list, never the ring, which thieves see */
        usched__wk_bound_put(w, t);
        return false;
    }
    usched__wk_ring_put(s, w, t);
    return true;
}

/* The fiber this CPU's ring gives next: its descriptor's first two lines,
 * which its prologue writes (cpu, the stack it trades), asked for while the
 * one just popped runs. Stolen fibers and fibers woken elsewhere come with
 * those lines in another CPU's cache. */
static inline void usched__wk_prefetch_next(struct usched__wk *w)
{
    const char *n = usched__ring_peek_lifo(&w->ring);
    if (n) {
        usched__prefetch_w(n);
        usched__prefetch_w(n + 64);
    }
}

static inline struct usched_task *usched__task_of_node(usched__mpsc_node_t *n)
{
    return (struct usched_task *)((char *)n - offsetof(struct usched_task, node));
}

/* Owner: moves the inbox into the local queues. */
static inline void usched__wk_inbox_drain(struct usched *s, struct usched__wk *w)
{
    if (!atomic_load_explicit(&w->inbox_n, memory_order_relaxed)) return;
    /* The consumer lock (M4, monitor.c): held, the monitor is moving this
     * inbox off a stalled CPU; whatever is left is drained next time. */
    if (atomic_exchange_explicit(&w->inbox_lock, 1, memory_order_acquire)) return;
    usched__mpsc_node_t *n;
    int32_t got = 0;
    while ((n = usched__inbox_pop(&w->inbox))) {
        got++;
        usched__wk_queue(s, w, usched__task_of_node(n));
    }
    /* One subtraction per drain, not per fiber: the count is a load hint,
     * and it is high, never low, until this store lands. */
    if (got) atomic_fetch_sub_explicit(&w->inbox_n, got, memory_order_relaxed);
    atomic_store_explicit(&w->inbox_lock, 0, memory_order_release);
}

#endif
