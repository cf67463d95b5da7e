/*
 * A worker's pick among its own queues (find_local): what the worker loop
 * (sched.c) runs next, and the first look of the idle path (steal.c).
 * Inline in both: it runs at every switch.
 *
 * Finding work, on each CPU, in order:
 *   inbox -> next slot (at most next_cap runs in a row while other fibers
 *   wait here) -> bound list / ring, newest first (the oldest every 31st
 *   pick; the global queue first every 61st; a bound fiber that was
 *   preempted after the ring) -> global queue -> steal in the
 *   policy's order -> spin -> park (the last four: steal.c, park.c).
 */
#ifndef USCHED_CORE_LOCAL_H
#define USCHED_CORE_LOCAL_H

#include "core/steal.h"

/* find_local, prologue and finish_prev are forced inline: each switch runs
 * all three, and their own frames (six saved registers each) were 139 of a
 * rendezvous round trip's 1,133 instructions (bench/micro/count_locked.py). */
#define USCHED__HOT_INLINE inline __attribute__((always_inline))

static USCHED__HOT_INLINE struct usched_task *usched__find_local(usched_t *s, struct usched__wk *w)
{
    usched__wk_inbox_drain(s, w);
    w->tick++;
    struct usched_task *t;
    if (w->tick % USCHED_GLOBAL_EVERY == 0 && (t = usched__gq_pull(s, w))) return t;
    if (atomic_load_explicit(&w->next, memory_order_relaxed)) {
        uint32_t cap = (uint32_t)usched__knob_get(&s->knobs, USCHED_KNOB_next_cap);
        t = usched__wk_next_swap(s, w, NULL);
        if (t) {
            /* Past the cap with nothing else queued here, demoting would
             * only pop it back (a ring push and a CAS for nothing). */
            if (w->next_runs < cap || (!usched__ring_len(&w->ring) && !w->bound_head)) {
                w->next_runs++;
                return t;
            }
            /* Demote: a ping-pong pair must not starve the queue. */
            usched__stat_add(&w->stats, USCHED_STAT_next_demoted, 1);
            usched__wk_queue_behind(s, w, t);
        }
    }
    w->next_runs = 0;
    /* The bound list every other pick, or when the ring is empty; after a
     * bound fiber was preempted (or demoted from the next slot), only when the ring and the
     * global queue are empty (below), or once in USCHED_GLOBAL_EVERY picks
     * so an endless stream of work cannot starve it (Go checks its global
     * queue, where a preempted goroutine goes, as often); half-way between
     * the global queue's turns, since a preemption sets the tick to the
     * next of those. */
    if (w->bound_head) {
        if (__builtin_expect(!w->bound_behind, 1)) {
            if ((w->tick & 1) || !usched__ring_len(&w->ring)) return usched__wk_bound_get(w);
        } else if ((!usched__ring_len(&w->ring) && !atomic_load_explicit(&s->gq.n, memory_order_relaxed)) ||
                   w->tick % USCHED_GLOBAL_EVERY == USCHED_GLOBAL_EVERY / 2) {
            w->bound_behind = 0;
            return usched__wk_bound_get(w);
        }
    }
    /* Work first: the newest fiber (the child spawned last, the fiber woken
     * last), so fork-join trees unfold depth first; every 31st pick the
     * oldest, so no fiber waits forever behind newer ones. */
    if ((w->tick % USCHED_FIFO_EVERY == 0 && (t = usched__ring_pop(&w->ring))) ||
        (t = usched__ring_pop_lifo(&w->ring))) {
        usched__wk_prefetch_next(w);
        return t;
    }
    if (w->bound_behind) {
        if (atomic_load_explicit(&s->gq.n, memory_order_relaxed) && (t = usched__gq_pull(s, w))) return t;
        w->bound_behind = 0;
    }
    return usched__wk_bound_get(w);
}

#endif
