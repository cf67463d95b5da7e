/*
 * Helpers shared by the built-in policies. A policy sees only
 * include/usched/policy.h; this header adds small inline conveniences on top
 * of it (knob look-up, mask walks, idle search with claiming, wakee flips).
 */
#ifndef USCHED_POLICY_POL_H
#define USCHED_POLICY_POL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "usched/policy.h"

/* Knob value by name; the id is looked up once per call site (relaxed atomic:
 * every thread computes the same id, so the race is benign and declared). A
 * misspelt name aborts, naming it, at its first read. */
#define POL_KNOB(ctx, name)                                                     \
    ({                                                                          \
        static int id_ = -2;                                                    \
        int i_ = __atomic_load_n(&id_, __ATOMIC_RELAXED);                       \
        if (i_ == -2) {                                                         \
            i_ = usched_pol_knob_id(#name);                                     \
            __atomic_store_n(&id_, i_, __ATOMIC_RELAXED);                       \
        }                                                                       \
        if (i_ < 0) {                                                           \
            fprintf(stderr, "usched: policy reads unknown knob '%s'\n", #name);  \
            abort();                                                            \
        }                                                                       \
        usched_pol_knob(ctx, i_);                                               \
    })

/* The first CPU >= `from` set in mask `m`, or -1. Walk a mask with
 *     for (int c = pol_next(ctx, m, 0); c >= 0; c = pol_next(ctx, m, c + 1))  */
static inline int pol_next(const usched_pol_ctx_t *ctx, const uint64_t *m, int from)
{
    int nw = usched_pol_mask_words(ctx);
    for (int w = from / 64; w < nw && from >= 0; w++) {
        uint64_t b = m[w];
        if (w == from / 64) b &= ~0ull << (from % 64);
        if (b) return w * 64 + __builtin_ctzll(b);
    }
    return -1;
}

static inline bool pol_mask_test(const uint64_t *m, int cpu)
{
    return (m[cpu / 64] >> (cpu % 64)) & 1;
}

static inline const uint64_t *pol_mask(const usched_pol_ctx_t *ctx, int cpu, int level)
{
    return usched_pol_group_mask(ctx, level, usched_pol_group(ctx, cpu, level));
}

static inline int pol_weight(const usched_pol_ctx_t *ctx, int cpu, int level)
{
    return usched_pol_group_weight(ctx, level, usched_pol_group(ctx, cpu, level));
}

/* SMT heuristics apply: knob smt set and the machine has SMT. */
static inline bool pol_smt(const usched_pol_ctx_t *ctx)
{
    /* The width first: on a machine without SMT no knob read. */
    return usched_pol_smt_width(ctx) > 1 && POL_KNOB(ctx, smt);
}

/* The placement reason for idle CPU c: a whole idle core, or an idle CPU
 * named by its distance from `ref` (the CPU the search was about). */
static inline int pol_idle_reason(const usched_pol_ctx_t *ctx, int ref, int c)
{
    static const int by_level[USCHED_NLEVELS] = {
        USCHED_REASON_IDLE_SMT,     USCHED_REASON_IDLE_L2,   USCHED_REASON_IDLE_LLC,
        USCHED_REASON_IDLE_PACKAGE, USCHED_REASON_IDLE_NUMA, USCHED_REASON_IDLE_MACHINE};
    if (usched_pol_smt_width(ctx) > 1 && usched_pol_core_idle(ctx, c)) return USCHED_REASON_IDLE_CORE;
    if (ref < 0) return USCHED_REASON_IDLE_MACHINE;
    return by_level[usched_pol_level_shared(ctx, ref, c)];
}

/* pol_find_claim's `cores`: 0 (false) any idle CPU, POL_CORE_FIRST (true)
 * a whole idle core first, POL_CORE_ONLY only a whole idle core. */
#define POL_CORE_FIRST 1
#define POL_CORE_ONLY 2

/* Finds an idle CPU in `m` (NULL = all) from `start`, whole idle cores as
 * `cores` says, and claims it; retries a few times when another waker wins
 * the claim. Returns the CPU or -1 (reason set on success). */
static inline int pol_find_claim(usched_pol_ctx_t *ctx, const uint64_t *m, int start, int cores,
                                 int ref, int *reason)
{
    for (int tries = 0; tries < 4; tries++) {
        int c = cores ? usched_pol_find_idle(ctx, m, start, true) : -1;
        if (c < 0 && cores != POL_CORE_ONLY) c = usched_pol_find_idle(ctx, m, start, false);
        if (c < 0) return -1;
        int why = pol_idle_reason(ctx, ref, c);
        if (usched_pol_claim_idle(ctx, c)) {
            *reason = why;
            return c;
        }
    }
    return -1;
}

/* Linux's wakee flips (record_wakee): a waker's count of switches between
 * different wakees, halved at most once a second. Kept in the per-fiber
 * policy state of the waker. */
struct pol_flips {
    uint64_t last_wakee; /* fiber id this fiber last woke */
    uint32_t flips;
    uint32_t decay_ms;
    uint32_t calls;      /* wake-ups since the clock was last read */
};

/* The clock (a vDSO call, about 55 instructions: the largest single item of
 * a sync hand-off's decision, counted with bench/micro/count_locked.py) is
 * read on a flip, and otherwise on every 16th wake-up while there are flips
 * to decay: a waker that stopped flipping decays at most 15 of its wake-ups
 * late, against a one-second period. */
static inline void pol_record_wakee(struct pol_flips *w, uint64_t wakee)
{
    bool flip = w->last_wakee != wakee;
    if (flip || (w->flips && (++w->calls & 15) == 0)) {
        uint32_t now_ms = (uint32_t)(usched_pol_now_coarse_ns() / 1000000);
        if (now_ms - w->decay_ms > 1000) {
            w->flips >>= 1;
            w->decay_ms = now_ms;
        }
    }
    if (flip) {
        w->last_wakee = wakee;
        if (w->flips < 1u << 20) w->flips++;
    }
}

/* The wake_wide factor: knob wake_wide_factor, or llc_weight (the size of
 * the waker's LLC). */
static inline uint32_t pol_wide_factor(usched_pol_ctx_t *ctx, int llc_weight)
{
    int64_t f = POL_KNOB(ctx, wake_wide_factor);
    return f > 0 ? (uint32_t)f : (uint32_t)llc_weight;
}

/* Linux's SIS_UTIL: how many CPUs of an LLC of `weight` CPUs a wake-up may
 * scan for an idle one at utilisation `util` (0..1024): nr_idle_scan =
 * weight * y / 1024, y = 1024 - util^2 pct^2 / (10000 * 1024), pct = 117
 * (the LLC's imbalance_pct). Zero from about 85% busy. */
static inline int pol_sis_budget(int weight, int util)
{
    int64_t x = util;
    int64_t y = x * x * 117 * 117 / (10000 * 1024);
    y = 1024 - (y > 1024 ? 1024 : y);
    return (int)(weight * y / 1024);
}

/* True when c is the lowest CPU of mask m in its `child_level` group: the
 * representative of that group inside m. Walk the distinct child groups of
 * a mask, without an array on the (fiber) stack, with
 *     for (int c = pol_next(ctx, m, 0); c >= 0; c = pol_next(ctx, m, c + 1))
 *         if (pol_is_rep(ctx, m, c, child_level)) ...                          */
static inline bool pol_is_rep(const usched_pol_ctx_t *ctx, const uint64_t *m, int c, int child_level)
{
    const uint64_t *g = pol_mask(ctx, c, child_level);
    int nw = usched_pol_mask_words(ctx);
    for (int w = 0; w <= c / 64 && w < nw; w++) {
        uint64_t b = m[w] & g[w];
        if (w == c / 64) b &= (c % 64) ? ~0ull >> (64 - c % 64) : 0;
        if (b) return false;
    }
    return true;
}

/* A per-thread xorshift for tie-breaking jitter (select_cpu may run on
 * outside threads, where usched_pol_random is not allowed). */
static inline uint32_t pol_rand(void)
{
    static __thread __attribute__((tls_model("initial-exec"))) uint32_t x; /* USCHED_TLS (base/export.h) */
    if (!x) x = (uint32_t)usched_pol_now_ns() | 1u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
}

/* Steal order "busiest first, nearest domain first" (runs in steal_order,
 * on the worker's host stack, so the ncpus-sized array is not on a fiber
 * stack): the CPUs by distance
 * from `cpu` (siblings, L2, LLC, package, node, machine), each distance band
 * sorted by load, highest first. Used by linux (new-idle balance pulls from
 * the busiest CPU of the nearest domain) and ule (tdq_idled's search). */
static inline int pol_steal_busiest_first(usched_pol_ctx_t *ctx, int cpu, int *out, int max)
{
    const int *o = usched_pol_order(ctx, cpu);
    const int *band = usched_pol_band_end(ctx, cpu);
    int ncpus = usched_pol_ncpus(ctx), n = 0, lo = 1; /* o[0] is cpu itself */
    unsigned load[ncpus];
    for (int l = 0; l < USCHED_NLEVELS; l++) {
        int hi = band[l];
        for (int i = lo; i < hi && n < max; i++) {
            int c = o[i], j = n;
            unsigned lc = usched_pol_cpu_load(ctx, c);
            /* insertion sort inside the band [start of band, n) */
            int band_start = n - (i - lo);
            while (j > band_start && load[j - 1] < lc) {
                out[j] = out[j - 1];
                load[j] = load[j - 1];
                j--;
            }
            out[j] = c;
            load[j] = lc;
            n++;
        }
        if (hi > lo) lo = hi;
    }
    return n;
}

#endif
