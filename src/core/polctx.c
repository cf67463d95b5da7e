/*
 * What a policy may read and do (include/usched/policy.h): thin, lock-free
 * views of the topology, the idle masks and the per-CPU loads.
 */
#include <stdlib.h>
#include <time.h>

#include "core/core.h"
#include "core/export.h"

#define S(ctx) ((ctx)->s)

USCHED_EXPORT int usched_pol_ncpus(const usched_pol_ctx_t *ctx)
{
    return S(ctx)->ncpus;
}

USCHED_EXPORT int usched_pol_level_shared(const usched_pol_ctx_t *ctx, int a, int b)
{
    return usched__topo_level_shared(S(ctx)->topo, a, b);
}

USCHED_EXPORT int usched_pol_group(const usched_pol_ctx_t *ctx, int cpu, int level)
{
    return usched__topo_group(S(ctx)->topo, cpu, level);
}

USCHED_EXPORT int usched_pol_ngroups(const usched_pol_ctx_t *ctx, int level)
{
    return usched__topo_ngroups(S(ctx)->topo, level);
}

USCHED_EXPORT int usched_pol_mask_words(const usched_pol_ctx_t *ctx)
{
    return usched__topo_mask_words(S(ctx)->topo);
}

USCHED_EXPORT const uint64_t *usched_pol_group_mask(const usched_pol_ctx_t *ctx, int level, int group)
{
    return usched__topo_group_mask(S(ctx)->topo, level, group);
}

USCHED_EXPORT int usched_pol_group_weight(const usched_pol_ctx_t *ctx, int level, int group)
{
    return usched__topo_group_weight(S(ctx)->topo, level, group);
}

USCHED_EXPORT const int *usched_pol_order(const usched_pol_ctx_t *ctx, int cpu)
{
    return usched__topo_order(S(ctx)->topo, cpu);
}

USCHED_EXPORT const int *usched_pol_band_end(const usched_pol_ctx_t *ctx, int cpu)
{
    return usched__topo_band_end(S(ctx)->topo, cpu);
}

USCHED_EXPORT int usched_pol_smt_width(const usched_pol_ctx_t *ctx)
{
    return usched__topo_smt_width(S(ctx)->topo);
}

USCHED_EXPORT bool usched_pol_cpu_idle(const usched_pol_ctx_t *ctx, int cpu)
{
    return usched__idlemask_test(&S(ctx)->idle_cpus, cpu);
}

USCHED_EXPORT bool usched_pol_core_idle(const usched_pol_ctx_t *ctx, int cpu)
{
    return usched__idlemask_test(&S(ctx)->idle_cores, cpu);
}

USCHED_EXPORT int usched_pol_find_idle(const usched_pol_ctx_t *ctx, const uint64_t *group_mask,
                                       int start, bool whole_core)
{
    usched_t *s = S(ctx);
    if (start < 0 || start >= s->ncpus) start = 0;
    return usched__idlemask_find(whole_core ? &s->idle_cores : &s->idle_cpus, group_mask, start);
}

USCHED_EXPORT int usched_pol_count_idle(const usched_pol_ctx_t *ctx, const uint64_t *group_mask)
{
    return usched__idlemask_count(&S(ctx)->idle_cpus, group_mask);
}

USCHED_EXPORT bool usched_pol_claim_idle(usched_pol_ctx_t *ctx, int cpu)
{
    usched_t *s = S(ctx);
    if (cpu < 0 || cpu >= s->ncpus) return false;
    if (usched__idlemask_clear(&s->idle_cpus, cpu)) {
        usched__idlemask_clear(&s->idle_cores, cpu);
        return true;
    }
    struct usched__wk *w = usched__self_wk();
    if (w && w->s == s)
        usched__stat_add(&w->stats, USCHED_STAT_claim_collisions, 1);
    else
        usched__stat_add_atomic(&s->outside_stats, USCHED_STAT_claim_collisions, 1);
    return false;
}

USCHED_EXPORT unsigned usched_pol_cpu_load(const usched_pol_ctx_t *ctx, int cpu)
{
    struct usched__wk *w = S(ctx)->wk[cpu];
    unsigned n = usched__ring_len(&w->ring);
    n += (unsigned)atomic_load_explicit(&w->inbox_n, memory_order_relaxed);
    n += atomic_load_explicit(&w->nbound, memory_order_relaxed);
    n += atomic_load_explicit(&w->next, memory_order_relaxed) != NULL;
    n += atomic_load_explicit(&w->current, memory_order_relaxed) != NULL;
    return n;
}

USCHED_EXPORT uint64_t usched_pol_cpu_current(const usched_pol_ctx_t *ctx, int cpu,
                                              uint64_t *ran_since_wake_ns)
{
    struct usched__wk *w = S(ctx)->wk[cpu];
    struct usched_task *t = atomic_load_explicit(&w->current, memory_order_acquire);
    if (ran_since_wake_ns) {
        /* Run time since its wake-up: before this run, plus this run so far.
         * Needs USCHED_OPS_TRACK_TIME in the policy's flags (else 0). */
        uint64_t start = atomic_load_explicit(&w->cur_start_ns, memory_order_relaxed);
        uint64_t before = atomic_load_explicit(&w->cur_ran_ns, memory_order_relaxed);
        uint64_t now = usched__now_ns();
        *ran_since_wake_ns = t && start && now > start ? before + (now - start) : 0;
    }
    /* The id comes from the worker, not the descriptor (which may be
     * released and reused under our feet). */
    return t ? atomic_load_explicit(&w->cur_id, memory_order_relaxed) : 0;
}

USCHED_EXPORT int usched_pol_knob_id(const char *name)
{
    return name ? usched__knob_lookup(name) : -1;
}

USCHED_EXPORT int64_t usched_pol_knob(const usched_pol_ctx_t *ctx, int knob_id)
{
    if (knob_id < 0 || knob_id >= USCHED_NKNOBS) return -1;
    return usched__knob_get(&S(ctx)->knobs, knob_id);
}

USCHED_EXPORT uint64_t usched_pol_now_ns(void)
{
    return usched__now_ns();
}

USCHED_EXPORT uint64_t usched_pol_now_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

USCHED_EXPORT uint32_t usched_pol_random(usched_pol_ctx_t *ctx, int cpu)
{
    struct usched__wk *w = S(ctx)->wk[cpu];
    uint32_t x = w->rng ? w->rng : 0x2545f491u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    w->rng = x;
    return x;
}

USCHED_EXPORT void usched_pol_set_priv(usched_pol_ctx_t *ctx, void *priv)
{
    S(ctx)->pol_priv = priv;
}

USCHED_EXPORT void *usched_pol_priv(const usched_pol_ctx_t *ctx)
{
    return S(ctx)->pol_priv;
}

USCHED_EXPORT void *usched_pol_cpu_state(const usched_pol_ctx_t *ctx, int cpu)
{
    return S(ctx)->wk[cpu]->pol_state;
}

USCHED_EXPORT void usched_pol_count(usched_pol_ctx_t *ctx, int cpu, int reason)
{
    usched_t *s = S(ctx);
    if (reason < 0 || reason >= USCHED_NREASONS) return;
    struct usched__wk *w = usched__self_wk();
    if (w && w->s == s && w->cpu == cpu)
        usched__stat_add(&w->stats, USCHED_STAT_place_bound + reason, 1);
    else
        usched__stat_add_atomic(&s->outside_stats, USCHED_STAT_place_bound + reason, 1);
}
