/*
 * usched: the default policy (DESIGN section 6).
 *
 * What it does. Wake-ups, in order:
 *  1. (bound fibers are placed by the core);
 *  2. a joiner woken by the exiting fiber it joined goes to the waker's
 *     next slot; a sync pair - the two fibers woke each other last, or the
 *     SYNC hint -
 *     whose waker's CPU has nothing else to run goes to the waker's next
 *     slot (hot-cache hand-off), unless the waker is wide (below);
 *  3. prev, if it is idle, shares the waker's LLC (or the wake came from
 *     outside) and, with smt=1, its whole core is idle or the LLC has no
 *     idle core;
 *  4. an idle core, then 5. an idle CPU, in the target's LLC (target = prev
 *     for a wide waker, else the waker's CPU), then in the package, the NUMA
 *     node and the machine, up to the `scope` knob: a wake-up never queues
 *     behind a busy CPU while another LLC has an idle one;
 *  6. otherwise target, unless prev is less loaded by more than one.
 * A waker is wide (1:N) when it switched between different wakees at least
 * `factor` times (wakee flips, Linux's signal; factor = the LLC size or knob
 * wake_wide_factor) and factor times more often than the wakee. Unlike
 * Linux's wake_wide the wakee need not flip itself: a dispatcher whose
 * workers always answer it is wide, so its workers spread instead of
 * queueing in the dispatcher's next slot.
 * Spawns go to the spawner's run queue (idle CPUs steal them nearest first);
 * spawns from outside threads go to an idle core or CPU. Stealing is the
 * core's: topology order, half of the victim's queue, bound fibers never.
 *
 * Machines it suits: SMT machines (it avoids busy cores' siblings) and
 * multi-LLC machines (Zen CCXs, several sockets), where it neither queues
 * behind a busy CPU while another LLC idles nor drags a fiber away from a
 * warm cache.
 *
 * Where it is weak: the pair detector only knows the last waker of each
 * fiber, so a fiber woken alternately by two partners is not a pair; the
 * idle masks are hints, so bursts may stack briefly until stealing evens
 * them out; leaving the LLC trades a cold cache for an idle CPU, which loses
 * for very short wake-ups.
 */
#include <stdint.h>

#include "policy/pol.h"
#include "usched/policy.h"

struct usched_pstate {
    struct pol_flips flips; /* as a waker */
    uint64_t last_waker;    /* id of the fiber that last woke this one */
};

static bool usched_wide(usched_pol_ctx_t *ctx, const struct usched_pstate *w,
                        const struct usched_pstate *t, int waker)
{
    uint32_t factor = pol_wide_factor(ctx, waker);
    return w->flips.flips >= factor && w->flips.flips >= t->flips.flips * factor;
}

/* Steps 4 and 5: an idle core, then an idle CPU, from the LLC (or the scope,
 * if narrower) outwards to the scope. Claims it; -1 if none. */
static int usched_find_near(usched_pol_ctx_t *ctx, int target, bool smt, int scope, int *reason)
{
    int first = scope < USCHED_LVL_LLC ? scope : USCHED_LVL_LLC;
    for (int lvl = first; lvl <= scope; lvl++) {
        int c = pol_find_claim(ctx, pol_mask(ctx, target, lvl), target, smt, target, reason);
        if (c >= 0) return c;
    }
    return -1;
}

static void usched_select_cpu(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                              struct usched_select_result *out)
{
    int waker = a->waker_cpu, prev = a->task->prev_cpu;
    bool smt = pol_smt(ctx);
    bool affine = POL_KNOB(ctx, affine);
    int scope = (int)POL_KNOB(ctx, scope);
    out->slot = USCHED_SLOT_TAIL;

    if (a->flags & USCHED_SEL_FORK) {
        if (waker >= 0) {
            /* The newest child runs next (Go's runnext): fork-join trees
             * unfold depth first, hot in cache, with few fibers alive; the
             * child it displaces goes to the queue, where idle CPUs steal. */
            out->cpu = waker;
            out->slot = USCHED_SLOT_NEXT;
            out->reason = USCHED_REASON_LOCAL;
            return;
        }
        int start = (int)(pol_rand() % (uint32_t)usched_pol_ncpus(ctx));
        int c = pol_find_claim(ctx, NULL, start, smt, -1, &out->reason);
        out->cpu = c >= 0 ? c : start;
        if (c < 0) out->reason = USCHED_REASON_STACKED;
        return;
    }

    /* 2a. a joiner woken by the exiting fiber it joined: the waker's CPU is
     * free this instant and holds the child's result in cache; the next
     * slot keeps fork-join trees depth first (and few fibers alive). */
    if (affine && waker >= 0 && (a->flags & USCHED_SEL_EXIT)) {
        out->cpu = waker;
        out->slot = USCHED_SLOT_NEXT;
        out->reason = USCHED_REASON_SYNC;
        return;
    }
    /* 2. sync pair, judged before this wake-up is recorded */
    struct usched_pstate *w = a->waker_pstate;
    struct usched_pstate *t = a->task->pstate;
    bool wide = false;
    if (w) {
        bool pair = (a->flags & USCHED_SEL_SYNC) ||
                    (w->last_waker == a->task->id && t->last_waker == a->waker_id);
        wide = usched_wide(ctx, w, t, waker);
        pol_record_wakee(&w->flips, a->task->id);
        if (affine && pair && !wide && usched_pol_cpu_load(ctx, waker) <= 1) {
            t->last_waker = a->waker_id;
            out->cpu = waker;
            out->slot = USCHED_SLOT_NEXT;
            out->reason = USCHED_REASON_SYNC;
            return;
        }
    }
    t->last_waker = a->waker_id;

    int target = (waker >= 0 && affine && !wide) ? waker : (prev >= 0 ? prev : waker);
    if (target < 0) target = 0;

    /* 3. prev */
    if (prev >= 0 && usched_pol_cpu_idle(ctx, prev) &&
        (waker < 0 || usched_pol_level_shared(ctx, prev, waker) <= USCHED_LVL_LLC)) {
        bool ok = !smt || usched_pol_core_idle(ctx, prev) ||
                  usched_pol_find_idle(ctx, pol_mask(ctx, prev, USCHED_LVL_LLC), prev, true) < 0;
        if (ok && usched_pol_claim_idle(ctx, prev)) {
            out->cpu = prev;
            out->reason = USCHED_REASON_PREV;
            return;
        }
    }
    /* 4, 5 */
    int c = usched_find_near(ctx, target, smt, scope, &out->reason);
    if (c >= 0) {
        out->cpu = c;
        return;
    }
    /* 6: every CPU busy. Stay on target unless the other is less loaded by
     * more than one (ULE's hysteresis): a cross-CPU hand-off costs cache
     * line transfers and an inbox push, more than a short queue. */
    int other = prev >= 0 ? prev : target;
    out->cpu = usched_pol_cpu_load(ctx, other) + 1 < usched_pol_cpu_load(ctx, target) ? other : target;
    out->reason = out->cpu == waker ? USCHED_REASON_LOCAL : USCHED_REASON_STACKED;
}

const struct usched_ops usched__policy_usched = {
    .name = "usched",
    .brief = "default: sync pairs on one CPU, idle cores first, nearest LLC outwards, no wasted cores",
    .task_state_size = sizeof(struct usched_pstate),
    .select_cpu = usched_select_cpu,
};
