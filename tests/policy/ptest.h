/*
 * Support for the policy decision tests: a scheduler on a virtual topology,
 * the topology itself (loaded a second time, to name siblings and LLCs), bound
 * spinning fibers that make chosen CPUs busy, and a one-waiter mailbox built
 * on the core's block/wake protocol, so that a test chooses exactly who wakes
 * whom, from which CPU, with or without the SYNC hint.
 */
#ifndef USCHED_PTEST_H
#define USCHED_PTEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "core/sched.h"
#include "test.h"
#include "topo/topo.h"
#include "usched.h"
#include "usched/policy.h"

/* ---- topology ------------------------------------------------------------- */

static inline usched__topo_t *pt_topo_load(const char *input)
{
    usched__topo_t *t;
    char err[256];
    int rc = usched__topo_load(&t, input, NULL, err, sizeof err);
    if (rc < 0) TEST_FAIL_("topology '%s': %s", input, err);
    return t;
}

static inline bool pt_in(const usched__topo_t *t, int level, int g, int cpu)
{
    return (usched__topo_group_mask(t, level, g)[cpu / 64] >> (cpu % 64)) & 1;
}

/* Same core (SMT group)? */
static inline bool pt_same_core(const usched__topo_t *t, int a, int b)
{
    return usched__topo_group(t, a, TOPO_SMT) == usched__topo_group(t, b, TOPO_SMT);
}

/* The first CPU of each core of `cpu`'s LLC, at most max; returns how many. */
static inline int pt_llc_cores(const usched__topo_t *t, int cpu, int *first, int max)
{
    int n = 0, llc = usched__topo_group(t, cpu, TOPO_LLC);
    for (int c = 0; c < usched__topo_ncpus(t) && n < max; c++) {
        if (!pt_in(t, TOPO_LLC, llc, c)) continue;
        int i = 0;
        while (i < n && !pt_same_core(t, first[i], c)) i++;
        if (i == n) first[n++] = c;
    }
    return n;
}

/* Another CPU of cpu's core, -1 if none. */
static inline int pt_sibling(const usched__topo_t *t, int cpu)
{
    for (int c = 0; c < usched__topo_ncpus(t); c++)
        if (c != cpu && pt_same_core(t, c, cpu)) return c;
    return -1;
}

/* ---- scheduler -------------------------------------------------------------- */

/* Preemption off unless the knobs name it: the decision tests make CPUs
 * busy with spinners that must hold them (a preempted spinner lets its CPU
 * run the fibers queued behind it, which the scenario keeps for a thief or
 * a placement to find). */
static inline usched_t *pt_start(const char *policy, const char *topology, const char *knobs)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    if (policy) ASSERT_OK(usched_set(s, "policy", policy));
    if (topology) ASSERT_OK(usched_set(s, "topology", topology));
    if (!knobs || !strstr(knobs, "preempt_us")) ASSERT_OK(usched_set(s, "knobs", "preempt_us=0"));
    if (knobs) ASSERT_OK(usched_set(s, "knobs", knobs));
    ASSERT_OK(usched_start(s));
    return s;
}

static inline uint64_t pt_stat(usched_t *s, const char *name)
{
    uint64_t v = 0;
    ASSERT_OK(usched_stat(s, name, &v));
    return v;
}

/* ---- spinners: bound fibers that keep a CPU busy until told to stop ---------- */

struct pt_spinner {
    _Atomic int running;
    _Atomic int stop;
    int cpu;
    usched_task_t *task;
};

static inline void pt_spin_fn(void *arg)
{
    struct pt_spinner *sp = arg;
    atomic_store(&sp->running, 1);
    while (!atomic_load_explicit(&sp->stop, memory_order_relaxed)) __asm__ volatile("" ::: "memory");
}

static inline void pt_spin_start(usched_t *s, struct pt_spinner *sp, int cpu)
{
    atomic_store(&sp->running, 0);
    atomic_store(&sp->stop, 0);
    sp->cpu = cpu;
    ASSERT_OK(usched_spawn_on(s, &sp->task, cpu, pt_spin_fn, sp));
}

static inline void pt_spin_wait(struct pt_spinner *sp)
{
    while (!atomic_load(&sp->running)) usleep(100);
}

static inline void pt_spin_stop(struct pt_spinner *sp)
{
    atomic_store(&sp->stop, 1);
    ASSERT_OK(usched_join(sp->task));
}

/* Lets idle workers reach their park (spin_us=0 makes that quick). This is a
 * settle, not a timing assertion: decisions are checked, never durations. */
static inline void pt_settle(void)
{
    usleep(20 * 1000);
}

/* ---- mailbox: one waiter, posts do not accumulate beyond one ------------------ */

struct pt_mbox {
    _Atomic uint32_t lock;
    usched_task_t *waiter; /* under lock */
    int posted;            /* under lock */
};

static inline void pt_mb_lock(struct pt_mbox *m)
{
    while (atomic_exchange_explicit(&m->lock, 1, memory_order_acquire))
        while (atomic_load_explicit(&m->lock, memory_order_relaxed)) __asm__ volatile("");
}

static inline void pt_mb_unlock(void *arg)
{
    atomic_store_explicit(&((struct pt_mbox *)arg)->lock, 0, memory_order_release);
}

/* Blocks the calling fiber until the mailbox is posted. */
static inline void pt_mb_wait(struct pt_mbox *m)
{
    pt_mb_lock(m);
    if (m->posted) {
        m->posted = 0;
        pt_mb_unlock(m);
        return;
    }
    m->waiter = usched__current();
    usched__block(pt_mb_unlock, m);
}

/* Returns once a fiber waits on the mailbox, yielding meanwhile. */
static inline void pt_mb_await_waiter(struct pt_mbox *m)
{
    for (;;) {
        pt_mb_lock(m);
        bool waiting = m->waiter != NULL;
        pt_mb_unlock(m);
        if (waiting) return;
        usched_yield();
    }
}

/* Posts the mailbox: returns its waiter, to be woken by the caller, or NULL
 * (no waiter: the next wait returns at once). */
static inline usched_task_t *pt_mb_take(struct pt_mbox *m)
{
    pt_mb_lock(m);
    usched_task_t *t = m->waiter;
    m->waiter = NULL;
    if (!t) m->posted = 1;
    pt_mb_unlock(m);
    return t;
}

/* Wakes the waiter (flags: USCHED_SEL_SYNC when the caller blocks next). */
static inline void pt_mb_post(struct pt_mbox *m, unsigned flags)
{
    usched_task_t *t = pt_mb_take(m);
    if (t) usched__wake(t, flags);
}

#endif
