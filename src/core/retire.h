/*
 * Retiring fibers (retire.c): a fiber's exit, the return of its descriptor
 * and stack (to the worker's spares or caches), and the count of fibers
 * alive. Below the worker loop (sched.c) and the fiber lifecycle (fiber.c),
 * which both call it; the steps every spawn and join take are inline here.
 */
#ifndef USCHED_CORE_RETIRE_H
#define USCHED_CORE_RETIRE_H

#include "core/core.h"

/*
 * The live count without a shared read-modify-write per spawn and exit.
 * s->life.live = fibers alive + the sum of the workers' live_credit, so it never
 * reads lower than the number of fibers alive, and reads 0 only when no
 * fiber is alive and every credit is back:
 *   L1. a spawn on a worker takes one from its credit, after adding
 *       LIVE_BATCH to s->life.live when the credit was empty (outside threads add
 *       1 to s->life.live);
 *   L2. an exit on a worker adds one to its credit, and gives back all but
 *       LIVE_BATCH of it once it passes 2 * LIVE_BATCH;
 *   L3. a worker that runs out of local work gives all its credit back
 *       (find_work, before it spins or parks);
 *   L4. whoever brings s->life.live to 0 (acq_rel: every exit's effects happen
 *       before the waiter's acquire load) wakes usched_wait/destroy.
 * A fiber's spawn and exit thus cost one shared RMW per LIVE_BATCH, not
 * two each (the spawn benchmark's children exit on the thief's CPU, so the
 * line would bounce). usched_wait returns once the last worker with credit
 * idles, a spin later than with an exact count. 64: not tuned.
 */
#define LIVE_BATCH 64u

/* L2, L3's return of credit; L4 (retire.c). */
void usched__live_sub(struct usched *s, uint64_t n);

static inline void usched__live_add(struct usched *s, struct usched__wk *w) /* L1 */
{
    if (!w) {
        atomic_fetch_add_explicit(&s->life.live, 1, memory_order_relaxed);
        return;
    }
    if (!w->live_credit) {
        atomic_fetch_add_explicit(&s->life.live, LIVE_BATCH, memory_order_relaxed);
        w->live_credit = LIVE_BATCH;
    }
    w->live_credit--;
}

/* One fiber fewer alive (on worker w). */
static inline void usched__live_done(struct usched *s, struct usched__wk *w) /* L2 */
{
    if (++w->live_credit > 2 * LIVE_BATCH) {
        usched__live_sub(s, w->live_credit - LIVE_BATCH);
        w->live_credit = LIVE_BATCH;
    }
}

/* L3 (retire.c): a worker out of local work gives its live credit back. */
void usched__live_flush(struct usched *s, struct usched__wk *w);

/* t's stack and descriptor to w's caches (w NULL: to the pools). */
static inline void usched__task_to_caches(struct usched__wk *w, struct usched_task *t)
{
    usched__stack_cache_put(w ? &w->stacks : NULL, &t->stack);
    usched__desc_put(w ? &w->descs : NULL, t);
}

/* Returns the stack and descriptor of a fiber nobody refers to any more,
 * to the caches of w: the calling thread's worker as just read (NULL from
 * outside; a worker of another scheduler counts as outside). */
static inline void usched__task_free(struct usched__wk *w, struct usched_task *t)
{
    /* A fiber that never ran on a worker (joined inline) has no context. */
    if (t->cpu != -1) usched__fctx_destroy(&t->fctx);
    /* Atomic: a second (wrong) join may read it from another thread. */
    __atomic_store_n(&t->magic, USCHED_TASK_DEAD, __ATOMIC_RELAXED);
    if (w && w->s != t->s) w = NULL;
    if (w && w->nspare < USCHED_SPARES) {
        w->spare[w->nspare++] = t; /* with its stack, for a spawn here (spawn) */
        return;
    }
    usched__task_to_caches(w, t);
}

/* Returns a worker's spare fibers to its caches (an exiting worker). */
void usched__spares_drain(struct usched__wk *w);
/* A worker out of local work: all but USCHED_SPARES_IDLE of its spares to
 * its caches, at most 256 at a time (a bound on what one call does, as the
 * park's stack trim). */
void usched__spares_give(struct usched__wk *w);
static inline void usched__spares_trim(struct usched__wk *w)
{
    if (w->nspare > USCHED_SPARES_IDLE) usched__spares_give(w);
}

/* J3 (fiber.c, the join protocol): the exit of w's fiber t, once it is off
 * its stack (the worker loop's finish_prev). */
void usched__fiber_exit(struct usched *s, struct usched__wk *w, struct usched_task *t);

#endif
