/*
 * The smt_busy_sibling judgement of a wake-up whose waker blocks right after
 * (a SYNC hand-off), on 1 package x 2 cores x 2 PUs.
 *
 * The waker W runs on one core, a busy fiber O on the other; both other
 * PUs are parked. A test policy puts the woken fiber J where the case says:
 *   - beside O, with a SYNC wake-up: W's core is whole idle once W blocks, so
 *     J was placed beside a busy sibling while a core idled - counted. (Before
 *     the judgement knew SYNC it counted W as busy, saw no whole idle core and
 *     counted nothing: pgsim's two pairs on this shape, where that placement
 *     halves a transaction's speed, showed 0 under every policy.)
 *   - beside O, with a plain wake-up (W keeps running): no core is whole
 *     idle - not counted.
 *   - beside W, with a SYNC wake-up: its only busy sibling is the waker that
 *     leaves - not counted.
 * Siblings are found through the topology, never by CPU numbering.
 */
#include "core/core.h"
#include "ptest.h"

#define TOPO "pack:1 core:2 pu:2"

static _Atomic int target = -1; /* where the test policy puts a wake-up */
static _Atomic int spawn_cpu = -1;

static void judge_select(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                         struct usched_select_result *out)
{
    (void)ctx;
    out->cpu = (a->flags & USCHED_SEL_WAKE) ? atomic_load(&target) : atomic_load(&spawn_cpu);
    out->reason = USCHED_REASON_IDLE_MACHINE;
    out->slot = USCHED_SLOT_TAIL;
}

static const struct usched_ops judge_ops = {
    .name = "t_judge",
    .brief = "test: every placement where the test says",
    .flags = USCHED_OPS_NO_STEAL,
    .select_cpu = judge_select,
};

struct scen {
    struct pt_mbox jm, wm; /* J waits on jm; W, after waking J, on wm */
    unsigned flags;        /* of W's wake-up of J */
    _Atomic int go, stop, q, j_blocked;
};

static void j_fn(void *arg)
{
    struct scen *sc = arg;
    atomic_store(&sc->j_blocked, 1);
    pt_mb_wait(&sc->jm);
    atomic_store(&sc->q, usched_self_cpu());
}

static void w_fn(void *arg)
{
    struct scen *sc = arg;
    while (!atomic_load(&sc->go)) __asm__ volatile("" ::: "memory");
    pt_mb_post(&sc->jm, sc->flags);
    if (sc->flags & USCHED_SEL_SYNC)
        pt_mb_wait(&sc->wm); /* blocks right after, as a SYNC waker says it will */
    else
        while (!atomic_load(&sc->stop)) __asm__ volatile("" ::: "memory");
}

/* Waits until both CPUs are parked (idle, published in the idle mask). */
static void settle_parked(usched_t *s, int a, int b)
{
    for (int tries = 0; tries < 30000; tries++) {
        if (atomic_load(&s->wk[a]->state) == WK_PARKED && atomic_load(&s->wk[b]->state) == WK_PARKED) return;
        usleep(1000);
    }
    TEST_FAIL_("CPUs %d and %d did not park within 30 s", a, b);
}

/* One wake-up of J from W, placed on `to`; returns smt_busy_sibling. */
static uint64_t run_case(const char *name, usched_t *s, int W, int O, int to, unsigned flags)
{
    const usched__topo_t *t = s->topo;
    int wsib = pt_sibling(t, W), osib = pt_sibling(t, O);
    struct scen sc = {.flags = flags};
    atomic_store(&sc.q, -1);
    struct pt_spinner o;
    pt_spin_start(s, &o, O);
    pt_spin_wait(&o);
    usched_task_t *j, *w;
    atomic_store(&spawn_cpu, wsib);
    ASSERT_OK(usched_spawn(s, &j, j_fn, &sc));
    while (!atomic_load(&sc.j_blocked)) usleep(100);
    ASSERT_OK(usched_spawn_on(s, &w, W, w_fn, &sc));
    settle_parked(s, wsib, osib);
    ASSERT_OK(usched_stats_reset(s));
    atomic_store(&target, to);
    atomic_store(&sc.go, 1);
    for (int tries = 0; atomic_load(&sc.q) < 0; tries++) {
        if (tries == 30000) TEST_FAIL_("%s: J did not run within 30 s of its wake-up", name);
        usleep(1000);
    }
    uint64_t n = pt_stat(s, "smt_busy_sibling");
    printf("%-26s W=%d O=%d -> %d (asked %d) smt_busy_sibling=%llu\n", name, W, O, atomic_load(&sc.q), to,
           (unsigned long long)n);
    ASSERT_EQ(atomic_load(&sc.q), to);
    ASSERT_OK(usched_join(j));
    atomic_store(&sc.stop, 1);
    if (flags & USCHED_SEL_SYNC) pt_mb_post(&sc.wm, 0);
    ASSERT_OK(usched_join(w));
    pt_spin_stop(&o);
    return n;
}

int main(void)
{
    ASSERT_OK(usched_policy_register(&judge_ops));
    usched_t *s = pt_start("t_judge", TOPO, "spin_us=0,stall_us=0");
    const usched__topo_t *t = s->topo;
    int W = 0, O = -1;
    for (int c = 0; c < s->ncpus && O < 0; c++)
        if (!pt_same_core(t, c, W)) O = c;
    ASSERT_GE(O, 0);
    for (int round = 0; round < 3; round++) {
        ASSERT_EQ(run_case("sync, beside the busy one", s, W, O, pt_sibling(t, O), USCHED_SEL_SYNC), 1);
        ASSERT_EQ(run_case("plain, beside the busy one", s, W, O, pt_sibling(t, O), 0), 0);
        ASSERT_EQ(run_case("sync, beside the waker", s, W, O, pt_sibling(t, W), USCHED_SEL_SYNC), 0);
    }
    ASSERT_OK(usched_destroy(s));
    printf("ok\n");
    return 0;
}
