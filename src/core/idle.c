/*
 * The idle masks, and the one place that keeps the idle-core rule:
 *   idle_cpus   a bit per CPU that found no work and is spinning or parked;
 *   idle_cores  the bits of every CPU of a core all of whose CPUs are in
 *               idle_cpus (a core of one CPU: that CPU's bit).
 * On a topology without SMT every core is one CPU and the two masks would
 * hold the same bits: idle_cpus stands for both there (usched__idle_cores)
 * and idle_cores stays empty, so a CPU going idle or busy writes one shared
 * line, not two - it does so at every request of a server.
 * Both are hints for placement (policies read them through usched_pol_*):
 * a CPU leaves them when it finds work, or when a waker claims it. All
 * updates are seq_cst read-modify-writes; a CPU publishes itself idle before
 * its parking re-check (park.c, P1-P3).
 */
#include "core/idle.h"

static inline bool core_alone(struct usched *s, int cpu, const uint64_t **mask)
{
    int core = usched__topo_group(s->topo, cpu, TOPO_SMT);
    *mask = usched__topo_group_mask(s->topo, TOPO_SMT, core);
    return usched__topo_group_weight(s->topo, TOPO_SMT, core) == 1;
}

/* The core of `cpu` is no longer fully idle (without SMT: nothing to do,
 * idle_cpus stands for the cores). */
static void core_busy(struct usched *s, int cpu)
{
    if (!s->smt) return;
    const uint64_t *m;
    if (core_alone(s, cpu, &m)) {
        usched__idlemask_clear(&s->idle_cores, cpu);
        return;
    }
    int words = usched__topo_mask_words(s->topo);
    for (int i = 0; i < words; i++)
        if (m[i]) atomic_fetch_and_explicit(&s->idle_cores.w[i], ~m[i], memory_order_seq_cst);
}

void usched__idle_set(struct usched *s, int cpu)
{
    usched__idlemask_set(&s->idle_cpus, cpu);
    if (!s->smt) return;
    /* If the whole core is idle now, publish the core. */
    const uint64_t *m;
    if (core_alone(s, cpu, &m)) {
        usched__idlemask_set(&s->idle_cores, cpu);
        return;
    }
    int words = usched__topo_mask_words(s->topo);
    for (int i = 0; i < words; i++) {
        uint64_t cur = atomic_load_explicit(&s->idle_cpus.w[i], memory_order_seq_cst);
        if ((cur & m[i]) != m[i]) return;
    }
    for (int i = 0; i < words; i++)
        if (m[i]) atomic_fetch_or_explicit(&s->idle_cores.w[i], m[i], memory_order_seq_cst);
}

void usched__idle_clear(struct usched *s, int cpu)
{
    /* Only the CPU itself sets its bit: one a placement claimed (and whose
     * core it marked busy, usched__idle_claim) stays clear, and a load
     * spares the locked clear - an I/O wake-up claims its poller's CPU at
     * every request of a server. */
    if (!usched__idlemask_test(&s->idle_cpus, cpu)) return;
    usched__idlemask_clear(&s->idle_cpus, cpu);
    core_busy(s, cpu);
}

/* A placement claims idle CPU `cpu`: true if this caller cleared its bit.
 * Its core stops being fully idle with it. */
bool usched__idle_claim(struct usched *s, int cpu)
{
    if (!usched__idlemask_clear(&s->idle_cpus, cpu)) return false;
    core_busy(s, cpu);
    return true;
}

/* A CPU of cpu's core other than cpu and `gone` (-1: none) is busy (not in
 * idle_cpus). */
static bool sibling_busy(struct usched *s, int cpu, int gone)
{
    const uint64_t *m;
    if (core_alone(s, cpu, &m)) return false;
    int words = usched__topo_mask_words(s->topo);
    for (int i = 0; i < words; i++) {
        uint64_t others = m[i];
        if (i == cpu / 64) others &= ~(1ull << (cpu % 64));
        if (gone >= 0 && i == gone / 64) others &= ~(1ull << (gone % 64));
        if (others & ~atomic_load_explicit(&s->idle_cpus.w[i], memory_order_relaxed)) return true;
    }
    return false;
}

/* A CPU of a whole idle core of cpu's LLC, searching from `cpu`; -1 if none. */
static int llc_idle_core(struct usched *s, int cpu)
{
    int llc = usched__topo_group(s->topo, cpu, TOPO_LLC);
    return usched__idlemask_find(usched__idle_cores(s), usched__topo_group_mask(s->topo, TOPO_LLC, llc), cpu);
}

/* The core of `gone` becomes whole idle when gone's fiber blocks: gone is
 * in cpu's LLC but not in its core, and every other CPU of gone's core is
 * idle. */
static bool core_frees(struct usched *s, int cpu, int gone)
{
    if (gone < 0 || usched__topo_group(s->topo, gone, TOPO_SMT) == usched__topo_group(s->topo, cpu, TOPO_SMT) ||
        usched__topo_group(s->topo, gone, TOPO_LLC) != usched__topo_group(s->topo, cpu, TOPO_LLC))
        return false;
    return !sibling_busy(s, gone, -1);
}

bool usched__idle_beside_busy_smt(struct usched *s, int cpu, int gone)
{
    return sibling_busy(s, cpu, gone) && (llc_idle_core(s, cpu) >= 0 || core_frees(s, cpu, gone));
}

bool usched__idle_smt_rule(struct usched *s)
{
    return s->smt_rule && usched__knob_get(&s->knobs, USCHED_KNOB_smt);
}

bool usched__idle_sibling_busy(struct usched *s, int cpu)
{
    return sibling_busy(s, cpu, -1);
}

bool usched__idle_rule_beside_busy(struct usched *s, int cpu)
{
    return usched__idle_smt_rule(s) && sibling_busy(s, cpu, -1);
}

int usched__idle_core_instead(struct usched *s, int cpu)
{
    if (!usched__idle_rule_beside_busy(s, cpu)) return -1;
    return llc_idle_core(s, cpu);
}

/* A CPU that found no work publishes itself idle and tells the policy
 * (usched__wk_go_idle); one that found work again clears both
 * (usched__wk_go_busy). Owner only; each does nothing when already so. */
void usched__wk_go_idle(usched_t *s, struct usched__wk *w)
{
    if (w->idle) return;
    w->idle = 1;
    usched__idle_set(s, w->cpu);
    if (s->ops->idle) {
        struct usched_cpu_event ev = {.size = sizeof ev, .cpu = w->cpu};
        s->ops->idle(&s->pol, &ev);
    }
}

void usched__wk_go_busy(usched_t *s, struct usched__wk *w)
{
    if (!w->idle) return;
    w->idle = 0;
    usched__idle_clear(s, w->cpu);
    if (s->ops->busy) {
        struct usched_cpu_event ev = {.size = sizeof ev, .cpu = w->cpu};
        s->ops->busy(&s->pol, &ev);
    }
}
