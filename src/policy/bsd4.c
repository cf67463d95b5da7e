/*
 * bsd4: DragonFly BSD's usched_bsd4 (bsd4_setrunqueue): one shared run queue,
 * and a choice of which free CPU to kick.
 *
 * What it does. Every runnable fiber goes to the shared locked FIFO
 * (USCHED_OPS_SHARED_RQ); select_cpu only picks the CPU to wake, scanning
 * free (idle) CPUs from a rotating start. With smt=1: the first CPU whose
 * whole core is free; failing that, the free CPU whose busy SMT sibling runs
 * the fiber that has run the shortest time since it last woke (the most
 * interactive one, likely to block soon and leave the core to us). With
 * smt=0: the first free CPU. No free CPU: the CPU at the rotating start
 * (kicked only if it is parked; otherwise the fiber waits in the queue for
 * the next CPU that looks).
 *
 * The kicked CPU is claimed (out of the idle mask until it runs and parks
 * again), as the kernel clears it from bsd4_rdyprocmask: the next wake-up
 * neither kicks it again nor counts its core as whole and free.
 *
 * Differences from the kernel: no priorities, so "a CPU running a worse
 * priority" never applies and the most interactive sibling is the one whose
 * fiber has run the shortest time since it woke (the kernel compares the
 * siblings' user priorities, which estcpu lowers as a thread computes); the
 * sibling test looks at every sibling rather than the first one of a
 * shrinking mask (DragonFly's scan misses a free sibling it already
 * visited); no cache-coherent deferral of batch threads; any CPU may take
 * the fiber from the shared queue, so the claimed CPU may wake to find it
 * gone (it then publishes itself idle again before it parks; see
 * docs/policies.md).
 *
 * Machines it suits: small machines with few CPUs and SMT, where one queue
 * gives perfect load balance. Where it is weak: one global lock on every
 * enqueue and pick (it is why DragonFly replaced it with usched_dfly); no
 * cache affinity at all - a fiber runs wherever a CPU frees up.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "pol.h"
#include "usched/policy.h"

/* Run time since wake-up of the fiber running on cpu (USCHED_OPS_TRACK_TIME);
 * UINT64_MAX if none runs. */
static uint64_t bsd4_ran(usched_pol_ctx_t *ctx, int cpu)
{
    uint64_t ran = 0;
    return usched_pol_cpu_current(ctx, cpu, &ran) ? ran : UINT64_MAX;
}

/* The free CPU to kick, scanning from `start` (smt: a whole free core
 * first, else the free CPU beside the most interactive busy sibling); -1 if
 * none is free. */
static int bsd4_scan(usched_pol_ctx_t *ctx, int n, int start, bool smt)
{
    uint64_t best_ran = UINT64_MAX;
    int best = -1;
    for (int k = 0; k < n; k++) {
        int c = (start + k) % n;
        if (!usched_pol_cpu_idle(ctx, c)) continue;
        if (!smt || usched_pol_core_idle(ctx, c)) return c;
        /* the most interactive busy sibling */
        const uint64_t *core = pol_mask(ctx, c, USCHED_LVL_SMT);
        for (int s = pol_next(ctx, core, 0); s >= 0; s = pol_next(ctx, core, s + 1)) {
            uint64_t r = s == c ? UINT64_MAX : bsd4_ran(ctx, s);
            if (r < best_ran || best < 0) {
                best_ran = r;
                best = c;
            }
        }
    }
    return best;
}

static void bsd4_select_cpu(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                            struct usched_select_result *out)
{
    int n = usched_pol_ncpus(ctx);
    _Atomic uint32_t *rotor = usched_pol_priv(ctx);
    int start = (int)(atomic_fetch_add_explicit(rotor, 1, memory_order_relaxed) % (uint32_t)n);
    int ref = a->task->prev_cpu >= 0 ? a->task->prev_cpu : a->waker_cpu;
    bool smt = pol_smt(ctx);
    out->slot = USCHED_SLOT_SHARED; /* every fiber goes to the shared queue */
    /* The kicked CPU is claimed, as the kernel takes it out of its ready
     * mask: until it runs, it is neither free nor half of a free core for
     * the next wake-up. Unclaimed, two wake-ups in a row both saw its core
     * whole free and started their fibers on its two siblings while
     * another core idled (policy_smt's back-to-back case). A claim lost to
     * another waker scans again. */
    for (int tries = 0; tries < 4; tries++) {
        int c = bsd4_scan(ctx, n, start, smt);
        if (c < 0) break;
        int why = pol_idle_reason(ctx, ref, c); /* before the claim clears c's core */
        if (usched_pol_claim_idle(ctx, c)) {
            out->cpu = c;
            out->reason = why;
            return;
        }
    }
    out->cpu = start;
    out->reason = USCHED_REASON_SHARED;
}

static int bsd4_init(usched_pol_ctx_t *ctx)
{
    _Atomic uint32_t *rotor = calloc(1, 64);
    if (!rotor) return -ENOMEM;
    usched_pol_set_priv(ctx, rotor);
    return 0;
}

static void bsd4_exit(usched_pol_ctx_t *ctx)
{
    free(usched_pol_priv(ctx));
}

const struct usched_ops usched__policy_bsd4 = {
    .name = "bsd4",
    .brief = "DragonFly usched_bsd4: shared queue; kick a free core, else the sibling of the most interactive fiber",
    .flags = USCHED_OPS_SHARED_RQ | USCHED_OPS_TRACK_TIME,
    .init = bsd4_init,
    .exit = bsd4_exit,
    .select_cpu = bsd4_select_cpu,
};
