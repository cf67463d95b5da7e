/*
 * ule: FreeBSD's ULE placement (sched_pickcpu, cpu_search_lowest) and idle
 * stealing (tdq_idled, tdq_steal).
 *
 * What it does. Spawns and wake-ups (prev = the spawner's CPU for a spawn):
 *  1. prev, if it is idle, the fiber stopped there within the L2 affinity
 *     window (2 x knob affinity_us) and, with smt=1, prev's whole core is
 *     idle;
 *  2. the least-loaded idle CPU of prev's cache group - the LLC if the fiber
 *     ran within 3 x affinity_us, else the L2 within 2 x affinity_us, else
 *     none - found by cpu_search_lowest: groups are compared by their summed
 *     load (load x 256 per CPU, -128 for prev, random jitter below 128 per
 *     CPU), so with smt=1 a core whose sibling is busy loses to an idle core;
 *  3. the same search for an idle CPU over the machine, then 4. for the least
 *     loaded CPU;
 *  5. the local (waker's) CPU instead, if the pick is busy and the local CPU
 *     is not busier by more than one.
 * With smt=0 step 1 drops the whole-core test and the searches compare the
 * CPUs of an SMT core one by one, as ULE does without CG_FLAG_THREAD groups.
 * A descriptor's home (io_poller=percpu) keeps the fiber's CPU while nothing
 * else waits there (step 1's affinity: the fiber's last CPU, idle once it
 * blocks), else takes the packet's CPU (the waker's, as step 5 would) when
 * that is not busier by more than one.
 * Idle CPUs steal from the busiest CPU with load >= steal_thresh (default 2,
 * the running fiber included), nearest group first.
 *
 * Differences from the kernel: no priorities (every fiber is timeshare), so
 * "runs a lower priority" means idle; affinity in microseconds rather than
 * ticks. Like ULE, an idle CPU takes one fiber per steal (want_steal
 * returns 1; the core takes it with one CAS).
 *
 * Machines it suits: SMT and multi-level cache machines with long-running
 * fibers, where the summed-load search spreads work evenly across cores.
 * Where it is weak: the affinity windows forget a cache after a few
 * milliseconds; the random jitter makes runs non-reproducible; no sync-pair
 * hand-off, so ping-pong pairs cross CPUs on every message.
 */
#include <limits.h>
#include <stdint.h>

#include "pol.h"
#include "usched/policy.h"

struct ule_search {
    usched_pol_ctx_t *ctx;
    int maxload; /* eligible CPUs have load <= maxload */
    int prefer;  /* gets the -128 bonus */
    bool smt;    /* treat SMT cores as groups */
};

struct ule_res {
    int cpu;
    int load;
};

/* TDQ_LOAD: queued plus running. A CPU out of the idle mask counts as
 * running even between fibers (e.g. waking a joiner from an exiting fiber). */
static int ule_load(usched_pol_ctx_t *ctx, int c)
{
    unsigned l = usched_pol_cpu_load(ctx, c);
    return (int)(l ? l : !usched_pol_cpu_idle(ctx, c));
}

/* cpu_search_lowest over the group with mask m at `level`: returns the
 * group's summed load and the chosen CPU in r (-1 if none eligible). */
static int ule_lowest(const struct ule_search *s, const uint64_t *m, int level, struct ule_res *r)
{
    usched_pol_ctx_t *ctx = s->ctx;
    int total = 0, bload = INT_MAX;
    r->cpu = -1;
    r->load = INT_MAX;
    int child = level - 1;
    if (level == USCHED_LVL_SMT || (child == USCHED_LVL_SMT && !s->smt)) {
        for (int c = pol_next(ctx, m, 0); c >= 0; c = pol_next(ctx, m, c + 1)) {
            int l = ule_load(ctx, c);
            int p = c == s->prefer ? 128 : 0;
            int load = l * 256;
            total += load - p;
            if (l > s->maxload) continue;
            load -= (int)(pol_rand() % 128);
            if (load - p < bload) {
                bload = load - p;
                r->cpu = c;
            }
        }
        r->load = bload;
        return total;
    }
    for (int c = pol_next(ctx, m, 0); c >= 0; c = pol_next(ctx, m, c + 1)) {
        if (!pol_is_rep(ctx, m, c, child)) continue;
        struct ule_res lr;
        int load = ule_lowest(s, pol_mask(ctx, c, child), child, &lr);
        total += load;
        if (lr.cpu >= 0 && (load < bload || (load == bload && lr.load < r->load))) {
            bload = load;
            r->cpu = lr.cpu;
            r->load = lr.load;
        }
    }
    return total;
}

/* Searches and claims (for idle picks); -1 if nothing eligible. */
static int ule_pick(struct ule_search *s, int anchor, int level, int *reason, int ref)
{
    for (int tries = 0; tries < 4; tries++) {
        struct ule_res r;
        ule_lowest(s, pol_mask(s->ctx, anchor, level), level, &r);
        if (r.cpu < 0) return -1;
        if (s->maxload > 0) {
            *reason = usched_pol_cpu_idle(s->ctx, r.cpu) ? pol_idle_reason(s->ctx, ref, r.cpu)
                                                          : USCHED_REASON_LEAST_LOADED;
            if (!usched_pol_cpu_idle(s->ctx, r.cpu) || usched_pol_claim_idle(s->ctx, r.cpu))
                return r.cpu;
            continue;
        }
        *reason = pol_idle_reason(s->ctx, ref, r.cpu);
        if (usched_pol_claim_idle(s->ctx, r.cpu)) return r.cpu;
    }
    return -1;
}

static void ule_select_cpu(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                           struct usched_select_result *out)
{
    int self = a->waker_cpu;
    bool fork = a->flags & USCHED_SEL_FORK;
    int prev = fork ? self : a->task->prev_cpu;
    struct ule_search s = {.ctx = ctx, .maxload = 0, .prefer = prev, .smt = pol_smt(ctx)};
    uint64_t aff = (uint64_t)POL_KNOB(ctx, affinity_us) * 1000;
    uint64_t now = usched_pol_now_ns();
    /* a spawn inherits the spawner's cache: it "ran" on prev just now */
    uint64_t last = a->task->last_ran_ns; /* ts_rltick (USCHED_OPS_TRACK_TIME) */
    uint64_t ago = fork ? 0 : (last && now > last ? now - last : last ? 0 : UINT64_MAX);
    out->slot = USCHED_SLOT_TAIL;

    /* 1. affinity shortcut */
    if (prev >= 0 && ago < 2 * aff && usched_pol_cpu_idle(ctx, prev) &&
        (!s.smt || usched_pol_core_idle(ctx, prev)) && usched_pol_claim_idle(ctx, prev)) {
        out->cpu = prev;
        out->reason = fork ? USCHED_REASON_LOCAL : USCHED_REASON_PREV;
        return;
    }
    /* 2. prev's cache group, while its affinity window lasts */
    int c = -1, group = -1;
    if (prev >= 0 && ago < 3 * aff && pol_weight(ctx, prev, USCHED_LVL_LLC) > 1 &&
        pol_weight(ctx, prev, USCHED_LVL_LLC) > pol_weight(ctx, prev, USCHED_LVL_SMT))
        group = USCHED_LVL_LLC;
    else if (prev >= 0 && ago < 2 * aff &&
             pol_weight(ctx, prev, USCHED_LVL_L2) > pol_weight(ctx, prev, USCHED_LVL_SMT))
        group = USCHED_LVL_L2;
    if (group >= 0) c = ule_pick(&s, prev, group, &out->reason, prev);
    /* 3. an idle CPU anywhere, 4. the least loaded CPU */
    int anchor = prev >= 0 ? prev : (self >= 0 ? self : 0);
    if (c < 0) c = ule_pick(&s, anchor, USCHED_LVL_MACHINE, &out->reason, prev);
    bool busy_pick = c < 0;
    if (busy_pick) {
        s.maxload = INT_MAX;
        c = ule_pick(&s, anchor, USCHED_LVL_MACHINE, &out->reason, prev);
        busy_pick = out->reason == USCHED_REASON_LEAST_LOADED;
    }
    if (c < 0) {
        c = anchor;
        out->reason = USCHED_REASON_STACKED;
    }
    /* 5. prefer self when the pick is busy and self not busier by more than 1 */
    if (self >= 0 && c != self && busy_pick &&
        ule_load(ctx, self) <= ule_load(ctx, c) + 1) {
        c = self;
        out->reason = USCHED_REASON_LOCAL;
    }
    out->cpu = c;
}

static int ule_steal_order(usched_pol_ctx_t *ctx, const struct usched_steal_args *a, int *out)
{
    return pol_steal_busiest_first(ctx, a->cpu, out, a->max);
}

/* tdq_idled: one fiber from a victim whose load (queued + running) reaches
 * steal_thresh. */
static int ule_want_steal(usched_pol_ctx_t *ctx, const struct usched_victim_args *a)
{
    return (int64_t)a->load + 1 >= POL_KNOB(ctx, steal_thresh) ? 1 : 0;
}

/* The home of a descriptor: the fiber's CPU (steps 1 and 5 of a wake-up
 * by the packet's CPU, asked before the fiber blocks: its load still counts
 * the fiber). */
static int ule_io_home(usched_pol_ctx_t *ctx, const struct usched_home_args *a)
{
    int prev = a->fiber_cpu, self = a->packet_cpu;
    int left = ule_load(ctx, prev) - 1; /* once the fiber blocks */
    if (left <= 0 || self < 0 || self == prev) return prev;
    return ule_load(ctx, self) <= left + 1 ? self : prev;
}

const struct usched_ops usched__policy_ule = {
    .name = "ule",
    .brief = "FreeBSD ULE: affine prev on an idle core, least-loaded group search, steal from the busiest",
    .flags = USCHED_OPS_TRACK_TIME,
    .select_cpu = ule_select_cpu,
    .steal_order = ule_steal_order,
    .want_steal = ule_want_steal,
    .io_home = ule_io_home,
};
