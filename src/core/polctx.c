/*
 * What a policy may read and do (include/usched/policy.h): thin, lock-free
 * views of the topology, the idle masks and the per-CPU loads. The core
 * distrusts the policy (STYLE 8): every CPU, level and group argument is
 * checked; an out-of-range one gets a neutral answer (-1, NULL, false or 0)
 * and a warning, once per scheduler. Reading a knob that does not exist is a
 * bug in the policy and aborts with its name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/export.h"
#include "core/core.h"
#include "core/idle.h"
#include "core/place.h"

#define S(ctx) ((ctx)->s)

static bool bad(const usched_pol_ctx_t *ctx, const char *fn, const char *what, int v, int n)
{
    usched__pol_warn(S(ctx), "called %s with %s %d outside [0, %d)", fn, what, v, n);
    return true;
}

/* True (and warned) when an argument is out of range. */
#define BAD_CPU(ctx, cpu) ((unsigned)(cpu) >= (unsigned)S(ctx)->ncpus && \
                           bad(ctx, __func__, "cpu", cpu, S(ctx)->ncpus))
#define BAD_LEVEL(ctx, level) ((unsigned)(level) >= USCHED_NLEVELS && \
                               bad(ctx, __func__, "level", level, USCHED_NLEVELS))
#define BAD_GROUP(ctx, level, g) \
    (BAD_LEVEL(ctx, level) || \
     ((unsigned)(g) >= (unsigned)usched__topo_ngroups(S(ctx)->topo, level) && \
      bad(ctx, __func__, "group", g, usched__topo_ngroups(S(ctx)->topo, level))))

USCHED_EXPORT int usched_pol_ncpus(const usched_pol_ctx_t *ctx)
{
    return S(ctx)->ncpus;
}

USCHED_EXPORT int usched_pol_level_shared(const usched_pol_ctx_t *ctx, int a, int b)
{
    if (BAD_CPU(ctx, a) || BAD_CPU(ctx, b)) return -1;
    return usched__topo_level_shared(S(ctx)->topo, a, b);
}

USCHED_EXPORT int usched_pol_group(const usched_pol_ctx_t *ctx, int cpu, int level)
{
    if (BAD_CPU(ctx, cpu) || BAD_LEVEL(ctx, level)) return -1;
    return usched__topo_group(S(ctx)->topo, cpu, level);
}

USCHED_EXPORT int usched_pol_ngroups(const usched_pol_ctx_t *ctx, int level)
{
    if (BAD_LEVEL(ctx, level)) return 0;
    return usched__topo_ngroups(S(ctx)->topo, level);
}

USCHED_EXPORT int usched_pol_mask_words(const usched_pol_ctx_t *ctx)
{
    return usched__topo_mask_words(S(ctx)->topo);
}

USCHED_EXPORT const uint64_t *usched_pol_group_mask(const usched_pol_ctx_t *ctx, int level, int group)
{
    if (BAD_GROUP(ctx, level, group)) return NULL;
    return usched__topo_group_mask(S(ctx)->topo, level, group);
}

USCHED_EXPORT int usched_pol_group_weight(const usched_pol_ctx_t *ctx, int level, int group)
{
    if (BAD_GROUP(ctx, level, group)) return 0;
    return usched__topo_group_weight(S(ctx)->topo, level, group);
}

USCHED_EXPORT const int *usched_pol_order(const usched_pol_ctx_t *ctx, int cpu)
{
    if (BAD_CPU(ctx, cpu)) return NULL;
    return usched__topo_order(S(ctx)->topo, cpu);
}

USCHED_EXPORT const int *usched_pol_band_end(const usched_pol_ctx_t *ctx, int cpu)
{
    if (BAD_CPU(ctx, cpu)) return NULL;
    return usched__topo_band_end(S(ctx)->topo, cpu);
}

USCHED_EXPORT int usched_pol_smt_width(const usched_pol_ctx_t *ctx)
{
    return usched__topo_smt_width(S(ctx)->topo);
}

USCHED_EXPORT bool usched_pol_cpu_idle(const usched_pol_ctx_t *ctx, int cpu)
{
    if (BAD_CPU(ctx, cpu)) return false;
    return usched__idlemask_test(&S(ctx)->idle_cpus, cpu);
}

USCHED_EXPORT bool usched_pol_core_idle(const usched_pol_ctx_t *ctx, int cpu)
{
    if (BAD_CPU(ctx, cpu)) return false;
    return usched__idlemask_test(usched__idle_cores(S(ctx)), cpu);
}

USCHED_EXPORT int usched_pol_find_idle(const usched_pol_ctx_t *ctx, const uint64_t *group_mask,
                                       int start, bool whole_core)
{
    usched_t *s = S(ctx);
    if (start < 0 || start >= s->ncpus) start = 0;
    return usched__idlemask_find(whole_core ? usched__idle_cores(s) : &s->idle_cpus, group_mask, start);
}

USCHED_EXPORT int usched_pol_count_idle(const usched_pol_ctx_t *ctx, const uint64_t *group_mask)
{
    return usched__idlemask_count(&S(ctx)->idle_cpus, group_mask);
}

USCHED_EXPORT bool usched_pol_claim_idle(usched_pol_ctx_t *ctx, int cpu)
{
    usched_t *s = S(ctx);
    if (BAD_CPU(ctx, cpu)) return false;
    if (usched__idle_claim(s, cpu)) return true;
    usched__stat_inc(usched__self_wk(), s, USCHED_STAT_claim_collisions);
    return false;
}

USCHED_EXPORT unsigned usched_pol_cpu_load(const usched_pol_ctx_t *ctx, int cpu)
{
    if (BAD_CPU(ctx, cpu)) return 0;
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
    if (ran_since_wake_ns) *ran_since_wake_ns = 0;
    if (BAD_CPU(ctx, cpu)) return 0;
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
    if (knob_id < 0 || knob_id >= USCHED_NKNOBS) {
        /* A misspelt knob name would otherwise read as -1, i.e. "true". */
        fprintf(stderr, "usched: policy '%s' read knob id %d, which does not exist "
                        "(an unknown name passed to usched_pol_knob_id?)\n",
                S(ctx)->ops->name, knob_id);
        abort();
    }
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
    /* The worker's generator when called on `cpu`; elsewhere (another CPU,
     * an outside thread) a generator of the calling thread, since another
     * worker's would be a data race. */
    static USCHED_TLS uint32_t outside;
    struct usched__wk *w = usched__self_wk();
    uint32_t *r = &outside;
    if (BAD_CPU(ctx, cpu)) cpu = -1;
    if (w && w->s == S(ctx) && w->cpu == cpu) r = &w->rng;
    uint32_t x = *r ? *r : (uint32_t)(uintptr_t)r | 1u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *r = x;
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
    if (BAD_CPU(ctx, cpu)) return NULL;
    return S(ctx)->wk[cpu]->pol_state;
}

USCHED_EXPORT void usched_pol_count(usched_pol_ctx_t *ctx, int cpu, int reason)
{
    usched_t *s = S(ctx);
    if (BAD_CPU(ctx, cpu) || ((unsigned)reason >= USCHED_NREASONS &&
                              bad(ctx, __func__, "reason", reason, USCHED_NREASONS)))
        return;
    struct usched__wk *w = usched__self_wk();
    usched__stat_inc(w && w->cpu == cpu ? w : NULL, s, USCHED_STAT_place_bound + reason);
}
