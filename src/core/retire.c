/*
 * Retiring fibers: the exit (J3 of the join protocol, fiber.c) and the live
 * count's shared steps (L3, L4; retire.h has L1 and L2 inline).
 */
#include <limits.h>
#include <string.h>

#include "core/place.h"
#include "core/retire.h"

void usched__live_sub(usched_t *s, uint64_t n)
{
    if (atomic_fetch_sub_explicit(&s->life.live, n, memory_order_acq_rel) == n && /* L4 */
        atomic_load_explicit(&s->life.nwaiting, memory_order_seq_cst)) {
        atomic_fetch_add(&s->life.seq, 1);
        usched__futex(&s->life.seq, FUTEX_WAKE, INT_MAX, NULL);
    }
}

void usched__live_flush(usched_t *s, struct usched__wk *w) /* L3 */
{
    uint64_t n = w->live_credit;
    if (!n) return;
    w->live_credit = 0;
    usched__live_sub(s, n);
}

void usched__spares_drain(struct usched__wk *w)
{
    while (w->nspare) usched__task_to_caches(w, w->spare[--w->nspare]);
}

void usched__spares_give(struct usched__wk *w)
{
    /* The oldest spares go (the bottom of the stack, coldest); the newest
     * stay where the next spawns take them. */
    int n = w->nspare - USCHED_SPARES_IDLE;
    if (n > 256) n = 256;
    for (int i = 0; i < n; i++) usched__task_to_caches(w, w->spare[i]);
    memmove(&w->spare[0], &w->spare[n], (size_t)(w->nspare - n) * sizeof w->spare[0]);
    w->nspare -= n;
}


void usched__fiber_exit(usched_t *s, struct usched__wk *w, struct usched_task *t)
{
    usched__stat_add(&w->stats, USCHED_STAT_exits, 1);
    uint32_t old = atomic_fetch_or_explicit(&t->jstate, USCHED__J_DONE, memory_order_acq_rel); /* J3 */
    if (old & USCHED__J_DETACHED) {
        usched__task_free(w, t);
    } else if (old & USCHED__J_WAIT) {
        /* The joiner frees t once woken (J5): read what is needed first. */
        struct usched_task *j = t->joiner;
        struct usched__owaiter *ow = t->owaiter;
        if (j) usched__wake(j, USCHED__WAKE_SYNC | USCHED__WAKE_EXIT); /* a hand-off: this fiber is gone */
        if (ow) {
            atomic_store_explicit(&ow->done, 1, memory_order_release);
            usched__futex(&ow->done, FUTEX_WAKE, 1, NULL);
        }
    }
    usched__live_done(s, w);
}
