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
 * Differences from the kernel: no priorities, so "a CPU running a worse
 * priority" never applies; the sibling test looks at every sibling rather
 * than the first one of a shrinking mask (DragonFly's scan misses a free
 * sibling it already visited); no cache-coherent deferral of batch threads.
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

#include "policy/pol.h"
#include "usched/policy.h"

struct bsd4_pstate {
    uint64_t ran_ns; /* run time since it last woke (up to its last stop) */
};

/* Per CPU, written by that CPU, read by any waker (relaxed: a hint). */
struct bsd4_cpu {
    _Atomic uint64_t run_start; /* when the current fiber started, 0 = none */
    _Atomic uint64_t ran_before; /* its run time since wake before that */
};

static _Atomic uint32_t bsd4_rotor_fallback;

static void bsd4_running(usched_pol_ctx_t *ctx, int cpu, const struct usched_task_info *task)
{
    struct bsd4_cpu *st = usched_pol_cpu_state(ctx, cpu);
    struct bsd4_pstate *t = task->pstate;
    atomic_store_explicit(&st->ran_before, t->ran_ns, memory_order_relaxed);
    atomic_store_explicit(&st->run_start, usched_pol_now_ns(), memory_order_relaxed);
}

static void bsd4_stopping(usched_pol_ctx_t *ctx, int cpu, const struct usched_task_info *task,
                          bool runnable)
{
    (void)runnable;
    struct bsd4_cpu *st = usched_pol_cpu_state(ctx, cpu);
    struct bsd4_pstate *t = task->pstate;
    uint64_t start = atomic_load_explicit(&st->run_start, memory_order_relaxed);
    t->ran_ns += usched_pol_now_ns() - start;
    atomic_store_explicit(&st->run_start, 0, memory_order_relaxed);
}

/* Run time since wake of the fiber running on cpu; UINT64_MAX if none. */
static uint64_t bsd4_ran(usched_pol_ctx_t *ctx, int cpu, uint64_t now)
{
    struct bsd4_cpu *st = usched_pol_cpu_state(ctx, cpu);
    uint64_t start = atomic_load_explicit(&st->run_start, memory_order_relaxed);
    if (!start) return UINT64_MAX;
    return atomic_load_explicit(&st->ran_before, memory_order_relaxed) + (now > start ? now - start : 0);
}

static void bsd4_select_cpu(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                            struct usched_select_result *out)
{
    struct bsd4_pstate *t = a->task->pstate;
    if (a->flags & USCHED_SEL_WAKE) t->ran_ns = 0;
    int n = usched_pol_ncpus(ctx);
    _Atomic uint32_t *rotor = usched_pol_priv(ctx);
    if (!rotor) rotor = &bsd4_rotor_fallback;
    int start = (int)(atomic_fetch_add_explicit(rotor, 1, memory_order_relaxed) % (uint32_t)n);
    int ref = a->task->prev_cpu >= 0 ? a->task->prev_cpu : a->waker_cpu;
    bool smt = pol_smt(ctx);
    uint64_t now = usched_pol_now_ns(), best_ran = UINT64_MAX;
    int best = -1;
    out->slot = USCHED_SLOT_TAIL;
    for (int k = 0; k < n; k++) {
        int c = (start + k) % n;
        if (!usched_pol_cpu_idle(ctx, c)) continue;
        if (!smt || usched_pol_core_idle(ctx, c)) {
            best = c;
            break;
        }
        /* the most interactive busy sibling */
        const uint64_t *core = pol_mask(ctx, c, USCHED_LVL_SMT);
        for (int s = pol_next(ctx, core, 0); s >= 0; s = pol_next(ctx, core, s + 1)) {
            uint64_t r = s == c ? UINT64_MAX : bsd4_ran(ctx, s, now);
            if (r < best_ran || best < 0) {
                best_ran = r;
                best = c;
            }
        }
    }
    if (best >= 0) {
        out->cpu = best;
        out->reason = pol_idle_reason(ctx, ref, best);
    } else {
        out->cpu = start;
        out->reason = USCHED_REASON_SHARED;
    }
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
    .flags = USCHED_OPS_SHARED_RQ,
    .task_state_size = sizeof(struct bsd4_pstate),
    .cpu_state_size = sizeof(struct bsd4_cpu),
    .init = bsd4_init,
    .exit = bsd4_exit,
    .select_cpu = bsd4_select_cpu,
    .running = bsd4_running,
    .stopping = bsd4_stopping,
};
