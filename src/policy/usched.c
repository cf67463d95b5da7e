/*
 * usched: the default policy (docs/policies.md).
 *
 * What it does. Wake-ups, in order:
 *  1. (bound fibers are placed by the core);
 *  2. a joiner woken by the exiting fiber it joined goes to the waker's
 *     next slot; a sync pair - the two fibers woke each other last, or the
 *     SYNC hint -
 *     whose waker's CPU has nothing else to run goes to the waker's next
 *     slot (hot-cache hand-off), unless the waker is wide (below); with
 *     the SYNC hint the core reuses that answer for up to 15 following
 *     wake-ups of the pair while nothing it read changes
 *     (USCHED_OPS_SYNC_REUSE, docs/policies.md);
 *  2h. an I/O wake-up polled from the descriptor's home set
 *     (io_poller=percpu) stays at home while the home holds at most
 *     USCHED_HOME_QUEUE fibers (an idle home runs it at once, step 2i);
 *  3. prev, if it is idle, shares the waker's LLC (or the wake came from
 *     outside) and, with smt=1, its whole core is idle or the LLC has no
 *     idle core;
 *  4. an idle core, then 5. an idle CPU, in the target's LLC (target = prev
 *     for a wide waker, else the waker's CPU), then in the package, the NUMA
 *     node and the machine, up to the `scope` knob: a wake-up never queues
 *     behind a busy CPU while another LLC has an idle one;
 *  6. otherwise target, unless prev is less loaded by more than one.
 * With smt=1 the hand-offs of step 2 (and 2a, 2i below) are skipped when the
 * waker's CPU has a busy sibling while a whole core of its LLC idles: the
 * fiber would start beside a busy sibling. The utilisation gate (knob
 * util_gate, Linux's SIS_UTIL): when the waker's LLC is busy on average,
 * steps 3 and 5 skip the LLC (4 still searches it for a whole idle core with
 * smt=1): a momentarily idle CPU of a busy LLC is left to steal.
 * A wake-up is wide when either side is a hub: it switched between
 * different wakees at least `factor` times (wakee flips, Linux's signal;
 * factor = the LLC size, at least 2, or knob wake_wide_factor) and factor times more
 * often than the other side. Unlike Linux's wake_wide the other side need
 * not flip itself: a dispatcher whose workers always answer it is wide, so
 * its workers spread instead of queueing in the dispatcher's next slot; and
 * a server shared by many clients stays on its CPU instead of following
 * each client's hand-off.
 * Spawns go to the spawner's next slot (idle CPUs steal them nearest first);
 * spawns from outside threads go to an idle core or CPU. Stealing is the
 * core's: topology order, half of the victim's queue, bound fibers never.
 * The policy sets USCHED_OPS_SMT_RULE, so with smt=1 the core wakes a CPU of
 * a whole idle core for a spawn the spawner does not run at once, and a
 * thief beside a busy sibling leaves the work to a whole idle core.
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
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "pol.h"
#include "usched/policy.h"

/* Step 2h: the most fibers (running or queued) a busy home CPU may hold
 * for an I/O wake-up polled from its set to queue there. On tbench, 1 and
 * 2 measured alike with 4 clients, 2, 4 and unbounded alike with 8 (4
 * connections a CPU); 2 covers a connection queued behind one running. */
#define USCHED_HOME_QUEUE 2u

/* The topology a decision reads, per CPU, copied once at init: the group,
 * mask and weight of each level. Through the policy interface each of these
 * is a checked call (group, then mask or weight), and a wake-up made dozens
 * of them: a fifth of `usched bench select`'s cycles went to topology and
 * policy accessors (perf), against a fourteenth under `linux`. */
struct usched_topo_cpu {
    const uint64_t *mask[USCHED_NLEVELS];
    int weight[USCHED_NLEVELS];
    int group[USCHED_NLEVELS];
    uint32_t llc_inv; /* (1024 << 16) / the LLC's weight (usched_busy_share) */
};

struct usched_priv {
    int smt_width;
    struct usched_topo_cpu cpu[];
};

/* The gate's busy share (0..1024) of `busy` CPUs of an LLC, without a
 * division on every wake-up (an idiv was the largest cost of the gate in
 * `usched bench select`'s profile): inv = (1024 << 16) / weight, read from
 * the table; within one unit of busy * 1024 / weight for any LLC below
 * 65,536 CPUs. */
static inline uint32_t usched_busy_share(int busy, uint32_t inv)
{
    return ((uint32_t)busy * inv + 0xffffu) >> 16;
}

static int usched_init(usched_pol_ctx_t *ctx)
{
    int n = usched_pol_ncpus(ctx);
    struct usched_priv *p = calloc(1, sizeof *p + (size_t)n * sizeof p->cpu[0]);
    if (!p) return -ENOMEM;
    p->smt_width = usched_pol_smt_width(ctx);
    for (int c = 0; c < n; c++)
        for (int l = 0; l < USCHED_NLEVELS; l++) {
            p->cpu[c].group[l] = usched_pol_group(ctx, c, l);
            p->cpu[c].mask[l] = pol_mask(ctx, c, l);
            p->cpu[c].weight[l] = pol_weight(ctx, c, l);
        }
    for (int c = 0; c < n; c++) {
        int w = p->cpu[c].weight[USCHED_LVL_LLC];
        p->cpu[c].llc_inv = (1024u << 16) / (uint32_t)(w > 0 ? w : 1);
    }
    usched_pol_set_priv(ctx, p);
    return 0;
}

static void usched_exit(usched_pol_ctx_t *ctx)
{
    free(usched_pol_priv(ctx));
}

/* The cached views, read through the table a decision fetched once (P).
 * CPUs come from the core (waker, prev) or from an idle search, all in
 * range. */
#define U_MASK(P, c, lvl) ((P)->cpu[c].mask[lvl])
#define U_WEIGHT(P, c, lvl) ((P)->cpu[c].weight[lvl])

/* Lowest level CPUs a and b share (usched_pol_level_shared). */
static inline int usched_shared(const struct usched_priv *P, int a, int b)
{
    const struct usched_topo_cpu *x = &P->cpu[a], *y = &P->cpu[b];
    for (int l = 0; l < USCHED_LVL_MACHINE; l++)
        if (x->group[l] == y->group[l]) return l;
    return USCHED_LVL_MACHINE;
}

struct usched_pstate {
    struct pol_flips flips; /* as a waker */
    uint64_t last_waker;    /* id of the fiber that last woke this one */
};

/* Per CPU, written only by the wake-ups decided on that CPU. */
struct usched_pcpu {
    uint32_t util; /* running average of its LLC's busy share, 0..1024 x 16 */
};

/* The utilisation gate (knob util_gate): Linux's SIS_UTIL budget, fed with
 * a running average of the share of busy CPUs in the waker's LLC, sampled
 * at the wake-ups decided on this CPU that reach the idle search (weight
 * 1/16 per sample, not tuned; PELT's time-decayed average would need clock
 * reads on every switch). True when the budget is zero: the LLC is busy on
 * average, so an idle CPU in it is idle only for a moment and will steal;
 * claiming it costs a cross-CPU hand-off for nothing. Evidence: `make run`
 * (select, 2-vCPU VM shared with other builds) placed 361k wake-ups on an
 * idle prev and 28k on other idle CPUs in one run, linux 18k; with the gate
 * (and the symmetric wide test below) usched's counters match linux's and
 * its tps is within noise of it (docs/policies.md). */
static bool usched_llc_busy(usched_pol_ctx_t *ctx, const struct usched_priv *P, int waker, bool none_idle)
{
    if (waker < 0 || !POL_KNOB(ctx, util_gate)) return false;
    struct usched_pcpu *pc = usched_pol_cpu_state(ctx, waker);
    const uint64_t *llc = U_MASK(P, waker, USCHED_LVL_LLC);
    int weight = U_WEIGHT(P, waker, USCHED_LVL_LLC);
    int idle = none_idle ? 0 : usched_pol_count_idle(ctx, llc);
    uint32_t x = usched_busy_share(weight - idle, P->cpu[waker].llc_inv);
    pc->util = pc->util - pc->util / 16 + x;
    return pol_sis_budget(weight, (int)(pc->util / 16)) == 0;
}

/* With smt=1: the waker's CPU has a busy sibling while a whole core of its
 * LLC idles, so a hand-off there would run beside a busy sibling. */
static bool usched_beside_busy(usched_pol_ctx_t *ctx, const struct usched_priv *P, int cpu)
{
    const uint64_t *core = U_MASK(P, cpu, USCHED_LVL_SMT);
    int others_idle = usched_pol_count_idle(ctx, core) - (usched_pol_cpu_idle(ctx, cpu) ? 1 : 0);
    return others_idle < U_WEIGHT(P, cpu, USCHED_LVL_SMT) - 1 &&
           usched_pol_find_idle(ctx, U_MASK(P, cpu, USCHED_LVL_LLC), cpu, true) >= 0;
}

static bool usched_wide(const struct usched_pstate *w, const struct usched_pstate *t, uint32_t factor)
{
    return w->flips.flips >= factor && w->flips.flips >= t->flips.flips * factor;
}

/* Steps 4 and 5: an idle core, then an idle CPU, from the LLC (or the scope,
 * if narrower) outwards to the scope; with `gated`, only an idle core (smt)
 * inside the LLC. Claims it; -1 if none. */
static int usched_find_near(usched_pol_ctx_t *ctx, const struct usched_priv *P, int target, bool smt,
                            int scope, bool gated, int *reason)
{
    int first = scope < USCHED_LVL_LLC ? scope : USCHED_LVL_LLC;
    int llc_weight = U_WEIGHT(P, target, USCHED_LVL_LLC), searched = 0;
    for (int lvl = first; lvl <= scope; lvl++) {
        /* Groups nest, so a level as large as the last one searched is the
         * same set of CPUs, searched the same way (one LLC is usually the
         * package and the machine too). */
        int weight = U_WEIGHT(P, target, lvl);
        if (weight == searched) continue;
        const uint64_t *m = U_MASK(P, target, lvl);
        int cores = smt ? POL_CORE_FIRST : 0;
        /* gated: the LLC, and any wider level that holds only the LLC */
        if (gated && (lvl <= USCHED_LVL_LLC || weight == llc_weight)) {
            if (!smt) continue;
            cores = POL_CORE_ONLY;
        }
        int c = pol_find_claim(ctx, m, target, cores, target, reason);
        if (c >= 0) return c;
        searched = weight;
    }
    return -1;
}

/* Everything but a spawn from a worker (usched_select_cpu, below). */
static __attribute__((noinline)) void usched_select_rest(usched_pol_ctx_t *ctx,
                                                         const struct usched_select_args *a,
                                                         struct usched_select_result *out)
{
    const struct usched_priv *P = usched_pol_priv(ctx); /* once per decision */
    int waker = a->waker_cpu, prev = a->task->prev_cpu;
    bool smt = P->smt_width > 1 && POL_KNOB(ctx, smt);
    out->slot = USCHED_SLOT_TAIL;

    if (a->flags & USCHED_SEL_FORK) {
        int start = (int)(pol_rand() % (uint32_t)usched_pol_ncpus(ctx));
        int c = pol_find_claim(ctx, NULL, start, smt, -1, &out->reason);
        out->cpu = c >= 0 ? c : start;
        if (c < 0) out->reason = USCHED_REASON_STACKED;
        return;
    }

    bool affine = POL_KNOB(ctx, affine);
    bool io = a->flags & USCHED_SEL_IO; /* the waker is the I/O poller, not a partner */
    /* 2i. an I/O wake-up found by an idle CPU's poll: that CPU is awake and
     * has nothing to run, so it runs the fiber itself, if it shares an LLC
     * with the fiber's previous CPU (waking prev instead would cost a
     * cross-CPU hand-off and maybe a futex wake per message). The claim
     * makes it take only the first of a batch; the others go by prev.
     * With io_poller=percpu, a poll of the descriptor's home set
     * (USCHED_SEL_IO_HOME): the fiber runs there whatever its previous CPU,
     * as the home is where its packets arrive and its peer runs, the pair
     * the kernel's wake-affine placement keeps on one CPU. */
    bool hot_ok = waker >= 0 && !(smt && usched_beside_busy(ctx, P, waker)); /* (b) below */
    if (io && hot_ok &&
        (prev < 0 || (a->flags & USCHED_SEL_IO_HOME) || usched_shared(P, prev, waker) <= USCHED_LVL_LLC) &&
        usched_pol_cpu_idle(ctx, waker) && usched_pol_claim_idle(ctx, waker)) {
        out->cpu = waker;
        /* its next pick: the next slot, which the owner empties without a
         * locked instruction (the ring's last fiber costs a CAS) */
        out->slot = USCHED_SLOT_NEXT;
        out->reason = USCHED_REASON_LOCAL;
        return;
    }
    /* 2h. the same from the home set while the home is busy: the fiber
     * queues there behind at most one other (the running fiber, or one
     * queued while the CPU was between fibers: the home's load, counted
     * before this one, at most USCHED_HOME_QUEUE) rather than go by its
     * previous CPU to an idle one. Its peer runs at home (on loopback it
     * just wrote the packet and waits for the answer), so an answer sent
     * from elsewhere costs the peer a cross-CPU wake-up, and the next
     * packet brings the fiber back home: tbench's server with four clients
     * on two CPUs woke 35,000 of 54,000 clients a second from the other
     * CPU without it (the kernel's tbench_srv: 2,300 of 70,000), at 0.75x
     * tbench_srv's throughput; with it 0.87x (docs/io.md). The kernel's
     * wake_affine keeps a sync wakee on a busy waker's CPU likewise while
     * that CPU is not busier than the wakee's previous one. A longer queue
     * at home goes the way of any wake-up (steps 3-6). */
    if (io && (a->flags & USCHED_SEL_IO_HOME) && hot_ok &&
        usched_pol_cpu_load(ctx, waker) <= USCHED_HOME_QUEUE) {
        out->cpu = waker;
        out->reason = USCHED_REASON_LOCAL;
        return;
    }
    /* 2a. a joiner woken by the exiting fiber it joined: the waker's CPU is
     * free this instant and holds the child's result in cache; the next
     * slot keeps fork-join trees depth first (and few fibers alive). */
    if (affine && hot_ok && (a->flags & USCHED_SEL_EXIT)) {
        out->cpu = waker;
        out->slot = USCHED_SLOT_NEXT;
        out->reason = USCHED_REASON_SYNC;
        return;
    }
    /* 2. sync pair, judged before this wake-up is recorded */
    struct usched_pstate *w = a->waker_pstate;
    struct usched_pstate *t = a->task->pstate;
    bool wide = false;
    if (w && !io) {
        bool pair = (a->flags & USCHED_SEL_SYNC) ||
                    (w->last_waker == a->task->id && t->last_waker == a->waker_id);
        /* Either side a hub: the waker a dispatcher (1:N), or the wakee a
         * server many wakers share (N:1, as a client waking a pool's
         * server) - pulling the server to each client's CPU in turn drags
         * it between CPUs and leaves its previous CPU idle; Linux's
         * wake_wide is symmetric too. */
        uint32_t factor = pol_wide_factor(ctx, U_WEIGHT(P, waker, USCHED_LVL_LLC));
        /* At least 2: with a factor of 1 (an LLC of one CPU, as many
         * virtual machines report) any two fibers that have each switched
         * wakee once - a ping-pong pair after its first round - would be
         * wide until their flips decay a second later, and the pair would
         * cross CPUs on every wake-up (3,100 against 80 ns a round trip
         * on such a machine). A knob set to 1 is taken as set. */
        if (factor < 2 && POL_KNOB(ctx, wake_wide_factor) <= 0) factor = 2;
        wide = usched_wide(w, t, factor) || usched_wide(t, w, factor);
        pol_record_wakee(&w->flips, a->task->id);
        if (affine && pair && !wide && hot_ok && usched_pol_cpu_load(ctx, waker) <= 1) {
            t->last_waker = a->waker_id;
            out->cpu = waker;
            out->slot = USCHED_SLOT_NEXT;
            out->reason = USCHED_REASON_SYNC;
            return;
        }
    }
    t->last_waker = a->waker_id;

    int target = (waker >= 0 && affine && !wide && !io) ? waker : (prev >= 0 ? prev : waker);
    if (target < 0) target = 0;
    /* No CPU idle anywhere (a loaded machine: most wake-ups of a server
     * pool under load): steps 3-5 would search and find nothing, so they
     * are skipped. */
    bool none_idle = usched_pol_find_idle(ctx, NULL, target, false) < 0;
    /* The utilisation gate, for a target in the waker's (busy) LLC: sampled
     * on the wake-ups that get this far (the hand-offs above search
     * nothing), a busy LLC's sample when nothing is idle. */
    bool gated = !io && usched_llc_busy(ctx, P, waker, none_idle) &&
                 usched_shared(P, target, waker) <= USCHED_LVL_LLC;
    if (!none_idle) {
        /* 3. prev */
        if (prev >= 0 && !(gated && usched_shared(P, prev, waker) <= USCHED_LVL_LLC) &&
            usched_pol_cpu_idle(ctx, prev) &&
            (waker < 0 || io || usched_shared(P, prev, waker) <= USCHED_LVL_LLC)) {
            bool ok = !smt || usched_pol_core_idle(ctx, prev) ||
                      usched_pol_find_idle(ctx, U_MASK(P, prev, USCHED_LVL_LLC), prev, true) < 0;
            if (ok && usched_pol_claim_idle(ctx, prev)) {
                out->cpu = prev;
                out->reason = USCHED_REASON_PREV;
                return;
            }
        }
        /* 4, 5 */
        int c = usched_find_near(ctx, P, target, smt, (int)POL_KNOB(ctx, scope), gated, &out->reason);
        if (c >= 0) {
            out->cpu = c;
            return;
        }
    }
    /* 6: every CPU busy. Stay on target unless the other is less loaded by
     * more than one (ULE's hysteresis): a cross-CPU hand-off costs cache
     * line transfers and an inbox push, more than a short queue. */
    int other = prev >= 0 ? prev : target;
    out->cpu = other != target && usched_pol_cpu_load(ctx, other) + 1 < usched_pol_cpu_load(ctx, target)
                   ? other
                   : target; /* one CPU: no queue lengths to read */
    out->reason = out->cpu == waker ? USCHED_REASON_LOCAL : USCHED_REASON_STACKED;
}

static void usched_select_cpu(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                              struct usched_select_result *out)
{
    if ((a->flags & USCHED_SEL_FORK) && a->waker_cpu >= 0) {
        /* The newest child runs next (Go's runnext): fork-join trees unfold
         * depth first, hot in cache, with few fibers alive; the child it
         * displaces goes to the queue, where idle CPUs steal. The commonest
         * decision, so it reads no knob and saves no registers; with
         * USCHED_OPS_FORK_NEXT the core makes it without this call. */
        out->cpu = a->waker_cpu;
        out->slot = USCHED_SLOT_NEXT;
        out->reason = USCHED_REASON_LOCAL;
        return;
    }
    usched_select_rest(ctx, a, out);
}

const struct usched_ops usched__policy_usched = {
    .name = "usched",
    .brief = "default: sync pairs on one CPU, idle cores first, nearest LLC outwards, no wasted cores",
    .flags = USCHED_OPS_SMT_RULE | USCHED_OPS_SYNC_REUSE | USCHED_OPS_FORK_NEXT,
    .task_state_size = sizeof(struct usched_pstate),
    .cpu_state_size = sizeof(struct usched_pcpu),
    .init = usched_init,
    .exit = usched_exit,
    .select_cpu = usched_select_cpu,
};
