/*
 * linux: the CFS/EEVDF wake-up path of kernel/sched/fair.c
 * (select_task_rq_fair, wake_wide, wake_affine, select_idle_sibling), with
 * new-idle balancing as the steal rule.
 *
 * What it does. Wake-ups: record_wakee (wakee flips); wake_wide decides
 * whether to pull toward the waker (both flip counts, factor = LLC size);
 * wake_affine picks waker or prev (idle test, then a load comparison with
 * the LLC's imbalance_pct 117); then select_idle_sibling, in order: target if
 * idle; prev if idle and sharing the target's LLC; the recently used CPU; if
 * the LLC's has-idle-cores hint is set, an idle core (unbudgeted scan from
 * target+1, clearing the hint when it fails); else prev's idle SMT sibling;
 * a scan for an idle CPU whose budget shrinks with the LLC's utilisation
 * (SIS_UTIL: nothing at about 85%); else stack on the target. With smt=0 the
 * SMT steps are skipped, as on a kernel without SMT. Spawns take the slow
 * path: descend to the idlest group (leaving the local one only for more
 * idle CPUs), then an idle CPU in it, else its least loaded CPU. Idle CPUs
 * pull from the busiest CPU of the nearest domain first (new-idle balance).
 * A descriptor's home (io_poller=percpu) is where the kernel would wake its
 * reader: wake_affine between the packet's CPU (the writer's, counted on it,
 * sync, as sock_def_readable wakes) and the fiber's own CPU, with affine=1.
 *
 * Differences from the kernel: load is the runnable count (no PELT), all
 * CPUs have equal capacity, no clusters, no energy model; utilisation for
 * SIS_UTIL is the share of busy CPUs in the LLC at decision time.
 *
 * Machines it suits: the ones Linux is tuned for - one or a few LLCs, SMT.
 * Where it is weak: wake-ups never leave the target's LLC (the "overload on
 * wake-up" wasted cores of Lozi et al.), so a busy LLC stacks while another
 * idles until balancing catches up; target/prev are taken when merely idle,
 * even beside a busy SMT sibling; the has-idle-cores hint can be stale.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "pol.h"
#include "usched/policy.h"

struct linux_pstate {
    struct pol_flips flips; /* wakee_flips, last_wakee */
    int recent_used_cpu;    /* plus one; 0 = none */
};

/* Per-LLC has_idle_cores hints (sd_llc_shared): set by a CPU going idle on
 * a fully idle core, cleared by a failed idle-core scan; any CPU, relaxed. */
struct linux_priv {
    _Atomic int *has_idle_cores;
};

static int linux_init(usched_pol_ctx_t *ctx)
{
    struct linux_priv *p = calloc(1, sizeof *p);
    int n = usched_pol_ngroups(ctx, USCHED_LVL_LLC);
    if (!p || !(p->has_idle_cores = calloc((size_t)n, sizeof *p->has_idle_cores))) {
        free(p);
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++) atomic_init(&p->has_idle_cores[i], 1);
    usched_pol_set_priv(ctx, p);
    return 0;
}

static void linux_exit(usched_pol_ctx_t *ctx)
{
    struct linux_priv *p = usched_pol_priv(ctx);
    if (p) free(p->has_idle_cores);
    free(p);
}

static _Atomic int *linux_hint(usched_pol_ctx_t *ctx, int cpu)
{
    struct linux_priv *p = usched_pol_priv(ctx);
    return &p->has_idle_cores[usched_pol_group(ctx, cpu, USCHED_LVL_LLC)];
}

/* __update_idle_core: a CPU entering idle on a fully idle core sets the hint. */
static void linux_idle(usched_pol_ctx_t *ctx, const struct usched_cpu_event *ev)
{
    int cpu = ev->cpu;
    if (usched_pol_core_idle(ctx, cpu))
        atomic_store_explicit(linux_hint(ctx, cpu), 1, memory_order_relaxed);
}

static bool linux_share_llc(usched_pol_ctx_t *ctx, int a, int b)
{
    return usched_pol_level_shared(ctx, a, b) <= USCHED_LVL_LLC;
}

static bool linux_take(usched_pol_ctx_t *ctx, int cpu)
{
    return usched_pol_cpu_idle(ctx, cpu) && usched_pol_claim_idle(ctx, cpu);
}

/* wake_wide: S >= f && M >= S * f, f = LLC size. */
static bool linux_wake_wide(usched_pol_ctx_t *ctx, const struct linux_pstate *w,
                            const struct linux_pstate *t, int waker)
{
    uint32_t f = pol_wide_factor(ctx, pol_weight(ctx, waker, USCHED_LVL_LLC));
    uint32_t m = w->flips.flips, s = t->flips.flips;
    if (m < s) {
        uint32_t x = m;
        m = s;
        s = x;
    }
    return !(s < f || m < s * f);
}

/* wake_affine: the idle test, then the weight test. Returns this or prev.
 * peer: the waker is a process on this CPU that the core does not count,
 * the peer of a socket whose packets arrive here (USCHED_SEL_IO_HOME): the
 * kernel wakes a socket's reader with a sync wake-up from the writer's CPU
 * (sock_def_readable), where the writer runs - not idle, and one more
 * task on its run queue. */
static int linux_wake_affine(usched_pol_ctx_t *ctx, int this, int prev, bool sync, bool peer)
{
    if (!peer && usched_pol_cpu_idle(ctx, this) && linux_share_llc(ctx, this, prev))
        return usched_pol_cpu_idle(ctx, prev) ? prev : this;
    unsigned this_load = usched_pol_cpu_load(ctx, this) + (peer ? 1 : 0);
    if (sync && this_load == 1) return this;
    if (usched_pol_cpu_idle(ctx, prev)) return prev;
    /* weight test: this_eff = (load(this) [- waker] + task) * 100,
     * prev_eff = load(prev) * (100 + (117 - 100) / 2) [+ 1 if sync] */
    int64_t this_eff = this_load;
    if (sync) {
        if (this_eff <= 1) return this;
        this_eff -= 1;
    }
    this_eff = (this_eff + 1) * 100;
    int64_t prev_eff = (int64_t)usched_pol_cpu_load(ctx, prev) * 108 + (sync ? 1 : 0);
    return this_eff < prev_eff ? this : prev;
}

/* SIS_UTIL's budget (pol_sis_budget) from the share of busy CPUs now. */
static int linux_scan_budget(usched_pol_ctx_t *ctx, const uint64_t *llc, int weight)
{
    int64_t busy = weight - usched_pol_count_idle(ctx, llc);
    return pol_sis_budget(weight, (int)(busy * 1024 / weight));
}

/* select_idle_cpu: an idle core (unbudgeted) when the hint says one exists,
 * else a budgeted scan for an idle CPU; both from target+1, wrapping. */
static int linux_select_idle_cpu(usched_pol_ctx_t *ctx, int target, bool has_idle_core, int *reason)
{
    const uint64_t *llc = pol_mask(ctx, target, USCHED_LVL_LLC);
    int weight = pol_weight(ctx, target, USCHED_LVL_LLC), n = usched_pol_ncpus(ctx);
    int nr = linux_scan_budget(ctx, llc, weight) + 1;
    if (nr == 1) return -1;
    int fallback = -1;
    for (int k = 1; k <= n; k++) {
        int c = (target + k) % n;
        if (!pol_mask_test(llc, c)) continue;
        if (has_idle_core) {
            if (usched_pol_core_idle(ctx, c) && linux_take(ctx, c)) {
                *reason = USCHED_REASON_IDLE_CORE;
                return c;
            }
            if (fallback < 0 && usched_pol_cpu_idle(ctx, c)) fallback = c;
            continue;
        }
        if (!--nr) return -1;
        if (linux_take(ctx, c)) {
            *reason = pol_idle_reason(ctx, target, c);
            return c;
        }
    }
    if (has_idle_core) {
        atomic_store_explicit(linux_hint(ctx, target), 0, memory_order_relaxed);
        if (fallback >= 0 && linux_take(ctx, fallback)) {
            *reason = pol_idle_reason(ctx, target, fallback);
            return fallback;
        }
    }
    return -1;
}

/* select_idle_sibling. */
static int linux_sis(usched_pol_ctx_t *ctx, struct linux_pstate *t, int prev, int target,
                     int *reason)
{
    if (linux_take(ctx, target)) {
        *reason = target == prev ? USCHED_REASON_PREV : pol_idle_reason(ctx, prev, target);
        return target;
    }
    if (prev >= 0 && prev != target && linux_share_llc(ctx, prev, target) && linux_take(ctx, prev)) {
        *reason = USCHED_REASON_PREV;
        return prev;
    }
    int recent = t->recent_used_cpu - 1;
    t->recent_used_cpu = prev + 1;
    if (recent >= 0 && recent != prev && recent != target && linux_share_llc(ctx, recent, target) &&
        linux_take(ctx, recent)) {
        *reason = pol_idle_reason(ctx, target, recent);
        return recent;
    }
    bool has_idle_core = false;
    if (pol_smt(ctx)) {
        has_idle_core = atomic_load_explicit(linux_hint(ctx, target), memory_order_relaxed);
        if (!has_idle_core && prev >= 0 && linux_share_llc(ctx, prev, target)) {
            /* select_idle_smt: prev's first idle sibling */
            const uint64_t *core = pol_mask(ctx, prev, USCHED_LVL_SMT);
            for (int c = pol_next(ctx, core, 0); c >= 0; c = pol_next(ctx, core, c + 1))
                if (c != prev && linux_take(ctx, c)) {
                    *reason = USCHED_REASON_IDLE_SMT;
                    return c;
                }
        }
    }
    return linux_select_idle_cpu(ctx, target, has_idle_core, reason);
}

/* The fork slow path (sched_balance_find_dst_group/_cpu): from the machine
 * down, the child group with the most idle CPUs, staying in the local group
 * unless another has more; then an idle CPU of it, else its least loaded. */
static int linux_find_idlest(usched_pol_ctx_t *ctx, int local, int *reason)
{
    int ncpus = usched_pol_ncpus(ctx);
    int anchor = local >= 0 ? local : (int)(pol_rand() % (uint32_t)ncpus);
    const uint64_t *m = pol_mask(ctx, anchor, USCHED_LVL_MACHINE);
    for (int lvl = USCHED_LVL_MACHINE; lvl > USCHED_LVL_SMT; lvl--) {
        const uint64_t *best = pol_mask(ctx, anchor, lvl - 1);
        int best_idle = usched_pol_count_idle(ctx, best);
        for (int c = pol_next(ctx, m, 0); c >= 0; c = pol_next(ctx, m, c + 1)) {
            if (!pol_is_rep(ctx, m, c, lvl - 1)) continue;
            const uint64_t *cm = pol_mask(ctx, c, lvl - 1);
            int idle = usched_pol_count_idle(ctx, cm);
            if (idle > best_idle) {
                best = cm;
                best_idle = idle;
                anchor = c;
            }
        }
        m = best;
    }
    int c = pol_find_claim(ctx, m, anchor, false, local, reason);
    if (c >= 0) return c;
    unsigned best_load = ~0u;
    for (int x = pol_next(ctx, m, 0); x >= 0; x = pol_next(ctx, m, x + 1)) {
        unsigned l = usched_pol_cpu_load(ctx, x);
        if (l < best_load) {
            best_load = l;
            c = x;
        }
    }
    *reason = c == local ? USCHED_REASON_LOCAL : USCHED_REASON_LEAST_LOADED;
    return c;
}

static void linux_select_cpu(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                             struct usched_select_result *out)
{
    int waker = a->waker_cpu, prev = a->task->prev_cpu;
    out->slot = USCHED_SLOT_TAIL;
    if (a->flags & USCHED_SEL_FORK) {
        out->cpu = linux_find_idlest(ctx, waker, &out->reason);
        return;
    }
    struct linux_pstate *w = a->waker_pstate, *t = a->task->pstate;
    bool wide = false;
    if (w) {
        pol_record_wakee(&w->flips, a->task->id);
        wide = linux_wake_wide(ctx, w, t, waker);
    }
    bool want_affine = POL_KNOB(ctx, affine) && !wide && waker >= 0;
    int target = prev >= 0 ? prev : (waker >= 0 ? waker : 0);
    if (want_affine && waker != target)
        target = prev < 0 ? waker
                          : linux_wake_affine(ctx, waker, prev, a->flags & (USCHED_SEL_SYNC | USCHED_SEL_IO_HOME),
                                              a->flags & USCHED_SEL_IO_HOME);
    int c = linux_sis(ctx, t, prev, target, &out->reason);
    if (c < 0) {
        c = target;
        out->reason = c == waker ? USCHED_REASON_LOCAL : USCHED_REASON_STACKED;
    }
    out->cpu = c;
}

static int linux_steal_order(usched_pol_ctx_t *ctx, const struct usched_steal_args *a, int *out)
{
    return pol_steal_busiest_first(ctx, a->cpu, out, a->max);
}

/* Pull when the busiest has a queued fiber (more than the one it runs). */
static int linux_want_steal(usched_pol_ctx_t *ctx, const struct usched_victim_args *a)
{
    (void)ctx;
    return a->load >= 1 ? -1 : 0;
}

/* The home of a descriptor: wake_affine(packet's CPU, fiber's CPU) as the
 * writer's sync wake-up of its reader; the core's rule (the packet's CPU)
 * without affine or a known packet CPU. */
static int linux_io_home(usched_pol_ctx_t *ctx, const struct usched_home_args *a)
{
    if (!POL_KNOB(ctx, affine) || a->packet_cpu < 0 || a->packet_cpu == a->fiber_cpu) return -1;
    return linux_wake_affine(ctx, a->packet_cpu, a->fiber_cpu, true, true);
}

const struct usched_ops usched__policy_linux = {
    .name = "linux",
    .brief = "Linux CFS/EEVDF: wake_wide, wake_affine, select_idle_sibling; new-idle pulls the busiest",
    .task_state_size = sizeof(struct linux_pstate),
    .init = linux_init,
    .exit = linux_exit,
    .select_cpu = linux_select_cpu,
    .steal_order = linux_steal_order,
    .want_steal = linux_want_steal,
    .idle = linux_idle,
    .io_home = linux_io_home,
};
