/*
 * usched: the default policy (DESIGN section 6).
 *
 * What it does. Wake-ups, in order: a sync pair (the two fibers woke each
 * other last, or the SYNC hint) stays on the waker's CPU in its next slot
 * when that CPU has nothing else to run; else prev if it is idle, shares the
 * waker's LLC and (smt=1) its whole core is idle or the LLC has no idle core;
 * else an idle core, then an idle CPU, in the target's LLC (target = prev for
 * a wide waker, else the waker's CPU), then in the package, the NUMA node and
 * the machine, up to the `scope` knob; else the less loaded of target and
 * prev. Spawns go to the spawner's run queue (idle CPUs steal them nearest
 * first); spawns from outside threads go to an idle core or CPU.
 *
 * Machines it suits: SMT machines (it avoids busy cores' siblings), multi-LLC
 * machines (Zen CCXs, several sockets), where it neither queues behind a busy
 * CPU while another LLC idles nor drags a fiber away from a warm cache.
 *
 * Where it is weak: the pair detector only knows the last waker of each fiber,
 * so 1:N patterns rely on the wake_wide flip count; placement follows idle
 * masks, which are hints, so bursts may still stack briefly until stealing
 * evens them out.
 */
#include <stdint.h>

#include "usched/policy.h"

struct usched_pstate {
    uint64_t last_waker; /* id of the fiber that last woke this one */
    uint64_t last_wakee; /* id of the fiber this one last woke */
    uint32_t flips;      /* wakee flips (decayed), Linux's wake_wide signal */
    uint32_t flips_decay_ms;
};

static int usched_llc_size(usched_pol_ctx_t *ctx, int cpu)
{
    return usched_pol_group_weight(ctx, USCHED_LVL_LLC, usched_pol_group(ctx, cpu, USCHED_LVL_LLC));
}

/* Linux's wake_wide: a waker flipping among many wakees spreads them. */
static int usched_wake_wide(usched_pol_ctx_t *ctx, const struct usched_select_args *a)
{
    struct usched_pstate *w = a->waker_pstate;
    struct usched_pstate *t = a->task->pstate;
    if (!w || a->waker_cpu < 0) return 0;
    int64_t f = usched_pol_knob(ctx, usched_pol_knob_id("wake_wide_factor"));
    uint32_t factor = f > 0 ? (uint32_t)f : (uint32_t)usched_llc_size(ctx, a->waker_cpu);
    uint32_t master = w->flips, slave = t->flips;
    if (master < slave) {
        uint32_t tmp = master;
        master = slave;
        slave = tmp;
    }
    return !(slave < factor || master < slave * factor);
}

static void usched_note_wake(const struct usched_select_args *a)
{
    struct usched_pstate *w = a->waker_pstate;
    struct usched_pstate *t = a->task->pstate;
    if (w && w->last_wakee != a->task->id) {
        w->last_wakee = a->task->id;
        if (w->flips < 1u << 20) w->flips++;
    }
    if (w) {
        uint32_t now_ms = (uint32_t)(usched_pol_now_ns() / 1000000);
        if (now_ms - w->flips_decay_ms > 1000) {
            w->flips >>= 1;
            w->flips_decay_ms = now_ms;
        }
    }
    t->last_waker = a->waker_id;
}

static const int idle_reason[USCHED_NLEVELS] = {
    USCHED_REASON_IDLE_SMT, USCHED_REASON_IDLE_L2, USCHED_REASON_IDLE_LLC,
    USCHED_REASON_IDLE_PACKAGE, USCHED_REASON_IDLE_NUMA, USCHED_REASON_IDLE_MACHINE};

/* Finds and claims an idle place near `target`, LLC first, then wider levels
 * up to `scope`. Returns the CPU or -1. */
static int usched_find_near(usched_pol_ctx_t *ctx, int target, int smt, int scope, int *reason)
{
    for (int lvl = USCHED_LVL_LLC; lvl <= scope; lvl++) {
        const uint64_t *m = usched_pol_group_mask(ctx, lvl, usched_pol_group(ctx, target, lvl));
        for (int tries = 0; tries < 4; tries++) {
            int c = -1;
            int core_first = smt && usched_pol_smt_width(ctx) > 1;
            if (core_first) c = usched_pol_find_idle(ctx, m, target, true);
            bool whole = c >= 0;
            if (c < 0) c = usched_pol_find_idle(ctx, m, target, false);
            if (c < 0) break;
            if (usched_pol_claim_idle(ctx, c)) {
                *reason = whole ? USCHED_REASON_IDLE_CORE
                                : idle_reason[usched_pol_level_shared(ctx, target, c)];
                return c;
            }
        }
    }
    if (scope < USCHED_LVL_LLC) {
        int c = target;
        if (usched_pol_cpu_idle(ctx, c) && usched_pol_claim_idle(ctx, c)) {
            *reason = USCHED_REASON_IDLE_SMT;
            return c;
        }
    }
    return -1;
}

static void usched_select_cpu(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                              struct usched_select_result *out)
{
    int waker = a->waker_cpu, prev = a->task->prev_cpu;
    int smt = (int)usched_pol_knob(ctx, usched_pol_knob_id("smt"));
    int affine = (int)usched_pol_knob(ctx, usched_pol_knob_id("affine"));
    int scope = (int)usched_pol_knob(ctx, usched_pol_knob_id("scope"));
    out->slot = USCHED_SLOT_TAIL;

    if (a->flags & USCHED_SEL_FORK) {
        if (waker >= 0) {
            out->cpu = waker;
            out->reason = USCHED_REASON_LOCAL;
            return;
        }
        int start = (int)(usched_pol_now_ns() % (uint64_t)usched_pol_ncpus(ctx));
        int c = usched_find_near(ctx, start, smt, USCHED_LVL_MACHINE, &out->reason);
        out->cpu = c >= 0 ? c : start;
        if (c < 0) out->reason = USCHED_REASON_STACKED;
        return;
    }

    usched_note_wake(a);
    if (waker >= 0 && affine) {
        struct usched_pstate *w = a->waker_pstate;
        struct usched_pstate *t = a->task->pstate;
        bool pair = (a->flags & USCHED_SEL_SYNC) ||
                    (w && w->last_waker == a->task->id && t->last_waker == a->waker_id);
        if (pair && usched_pol_cpu_load(ctx, waker) <= 1) {
            out->cpu = waker;
            out->slot = USCHED_SLOT_NEXT;
            out->reason = USCHED_REASON_SYNC;
            return;
        }
    }
    int wide = usched_wake_wide(ctx, a);
    int target = (waker >= 0 && affine && !wide) ? waker : (prev >= 0 ? prev : waker);
    if (target < 0) target = 0;

    if (prev >= 0 && usched_pol_cpu_idle(ctx, prev) &&
        (waker < 0 || usched_pol_level_shared(ctx, prev, waker) <= USCHED_LVL_LLC)) {
        const uint64_t *llc = usched_pol_group_mask(ctx, USCHED_LVL_LLC,
                                                    usched_pol_group(ctx, prev, USCHED_LVL_LLC));
        bool ok = !smt || usched_pol_smt_width(ctx) == 1 || usched_pol_core_idle(ctx, prev) ||
                  usched_pol_find_idle(ctx, llc, prev, true) < 0;
        if (ok && usched_pol_claim_idle(ctx, prev)) {
            out->cpu = prev;
            out->reason = USCHED_REASON_PREV;
            return;
        }
    }
    int c = usched_find_near(ctx, target, smt, scope, &out->reason);
    if (c >= 0) {
        out->cpu = c;
        return;
    }
    int other = prev >= 0 ? prev : target;
    out->cpu = usched_pol_cpu_load(ctx, other) < usched_pol_cpu_load(ctx, target) ? other : target;
    out->reason = out->cpu == waker ? USCHED_REASON_LOCAL : USCHED_REASON_STACKED;
}

const struct usched_ops usched__policy_usched = {
    .name = "usched",
    .brief = "topology-aware default: sync pairs together, idle cores first, nearest LLC, no wasted cores",
    .task_state_size = sizeof(struct usched_pstate),
    .select_cpu = usched_select_cpu,
};
