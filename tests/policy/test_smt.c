/*
 * SMT decisions on virtual topologies. With busy fibers on distinct cores of
 * an LLC (the wakee's prev, the waker's CPU and others, one PU each), a
 * wake-up under each SMT-aware policy with smt=1 lands on a fully idle core,
 * never beside a busy sibling; with smt=0 usched and linux take the first
 * idle CPU after their target (the waker's CPU, or prev), busy sibling or
 * not, as the kernels do without SMT awareness; ule with smt=0 takes an idle
 * CPU of prev's LLC (within its affinity window); bsd4 with smt=0 an idle
 * CPU; global, which ignores smt, the lowest-numbered idle CPU. In every case
 * the wake-up never queues behind a busy CPU, since an idle one exists (the
 * busy CPUs never yield: such a fiber would not run at all). Changing
 * smt while running changes the next decision. Siblings and LLCs are found
 * through the topology, never by CPU numbering (the captured two-socket
 * machine numbers siblings N and N+16).
 *
 * The usched policy's `scope` knob bounds the search: with both CPUs of the
 * first package's LLC busy and the second package idle, a wake-up goes to
 * the idle package under scope=machine and stays in the LLC under scope=llc
 * (see scope_case).
 *
 * Scenario (one wake-up, driven step by step):
 *   1. fiber J runs somewhere (P = prev), then waits for the driver;
 *   2. the driver picks the waker's CPU W (another core of P's LLC) and busy
 *      cores: P itself, W, and all but one of the LLC's other cores;
 *   3. J spawns B bound on W and waits on a mailbox (J blocks); B spins
 *      until told;
 *   4. once everything settled, B posts the mailbox - the core wakes J from
 *      W - and keeps W busy (a waker that exits instead hands its CPU over:
 *      a different decision);
 *   5. J records where it woke (Q); the counters say why.
 */
#include "core/core.h"
#include "ptest.h"

#define MAXB 64

struct scen {
    usched_t *s;
    _Atomic int P, W, Q, go, stop;
    _Atomic int j_blocked;
    struct pt_mbox mb;
    usched_task_t *b;
};

/* The two counters right after the wake-up (before B's exit adds to them). */
static uint64_t snap_busy_sibling, snap_idle_core;
/* An upper bound, in seconds, on the time from J's block to the wake-up. */
static double snap_since_block;

static void b_fn(void *arg)
{
    struct scen *sc = arg;
    while (!atomic_load(&sc->go)) __asm__ volatile("" ::: "memory");
    pt_mb_post(&sc->mb, 0);
    while (!atomic_load(&sc->stop)) __asm__ volatile("" ::: "memory");
}

static void j_fn(void *arg)
{
    struct scen *sc = arg;
    atomic_store(&sc->P, usched_self_cpu());
    while (atomic_load(&sc->W) < 0) __asm__ volatile("" ::: "memory");
    ASSERT_OK(usched_spawn_on(sc->s, &sc->b, atomic_load(&sc->W), b_fn, sc));
    atomic_store(&sc->j_blocked, 1);
    pt_mb_wait(&sc->mb);
    atomic_store(&sc->Q, usched_self_cpu());
}

/* Waits until every CPU outside busy[] has parked (so it published itself
 * idle): the decision then sees exactly the scenario's busy set, however
 * slowly a loaded machine runs the workers. Fails after 30 s. */
static void settle_parked(usched_t *s, const int *busy, int n)
{
    for (int tries = 0; tries < 30000; tries++) {
        bool all = true;
        for (int c = 0; c < s->ncpus && all; c++) {
            bool b = false;
            for (int i = 0; i < n; i++) b |= busy[i] == c;
            if (!b && atomic_load(&s->wk[c]->state) != WK_PARKED) all = false;
        }
        if (all) return;
        usleep(1000);
    }
    TEST_FAIL_("idle CPUs did not park within 30 s");
}

/* Runs the scenario once on a started scheduler; returns Q and fills the
 * busy list (busy[0] = P, busy[1] = W). */
static int run_once(usched_t *s, const usched__topo_t *t, int *busy, int *nbusy)
{
    struct scen sc = {.s = s};
    atomic_store(&sc.P, -1);
    atomic_store(&sc.W, -1);
    atomic_store(&sc.Q, -1);
    usched_task_t *j;
    ASSERT_OK(usched_spawn(s, &j, j_fn, &sc));
    while (atomic_load(&sc.P) < 0) usleep(100);
    int P = atomic_load(&sc.P);

    int cores[MAXB];
    int ncores = pt_llc_cores(t, P, cores, MAXB);
    ASSERT_GE(ncores, 3);
    int W = -1, n = 0;
    busy[n++] = P;
    for (int i = 0; i < ncores && W < 0; i++)
        if (!pt_same_core(t, cores[i], P)) W = cores[i];
    busy[n++] = W;
    /* every other core busy but one */
    int others = ncores - 3;
    for (int i = 0; i < ncores && others > 0; i++) {
        if (pt_same_core(t, cores[i], P) || pt_same_core(t, cores[i], W)) continue;
        busy[n++] = cores[i];
        others--;
    }
    *nbusy = n;

    struct pt_spinner sp[MAXB];
    pt_spin_start(s, &sp[0], P); /* runs once J blocks */
    for (int i = 2; i < n; i++) pt_spin_start(s, &sp[i], busy[i]);
    double t_before_block = test_now();
    atomic_store(&sc.W, W);
    while (!atomic_load(&sc.j_blocked)) usleep(100);
    pt_spin_wait(&sp[0]); /* P runs its spinner: J has blocked */
    for (int i = 2; i < n; i++) pt_spin_wait(&sp[i]);
    settle_parked(s, busy, n);
    ASSERT_OK(usched_stats_reset(s));
    atomic_store(&sc.go, 1);
    /* Every busy CPU spins without yielding, so a wake-up placed behind one
     * (an idle CPU existed) would never run (stall_us=0: the monitor does
     * not rescue it elsewhere, which would hide the wrong placement): fail
     * instead of hanging. */
    for (int tries = 0; atomic_load(&sc.Q) < 0; tries++) {
        if (tries == 30000)
            TEST_FAIL_("J did not run within 30 s of its wake-up: queued behind a busy CPU?");
        usleep(1000);
    }
    ASSERT_OK(usched_join(j));
    snap_since_block = test_now() - t_before_block;
    int Q = atomic_load(&sc.Q);
    snap_busy_sibling = pt_stat(s, "smt_busy_sibling");
    snap_idle_core = pt_stat(s, "place_idle_core");
    atomic_store(&sc.stop, 1);
    ASSERT_OK(usched_join(sc.b));
    pt_spin_stop(&sp[0]);
    for (int i = 2; i < n; i++) pt_spin_stop(&sp[i]);
    return Q;
}

static bool is_busy(int q, const int *busy, int n)
{
    for (int i = 0; i < n; i++)
        if (busy[i] == q) return true;
    return false;
}

static bool beside_busy(const usched__topo_t *t, int q, const int *busy, int n)
{
    for (int i = 0; i < n; i++)
        if (busy[i] != q && pt_same_core(t, busy[i], q)) return true;
    return false;
}

/* The first CPU after `from` (wrapping, by CPU number) in `within`'s group at
 * `level` that the scenario left idle: where a scan for "any idle CPU"
 * starting at `from` lands. */
static int first_idle_after(const usched__topo_t *t, int from, int level, int within,
                            const int *busy, int n)
{
    int ncpus = usched__topo_ncpus(t), g = usched__topo_group(t, within, level);
    for (int k = 1; k <= ncpus; k++) {
        int c = (from + k) % ncpus;
        if (usched__topo_group(t, c, level) == g && !is_busy(c, busy, n)) return c;
    }
    return -1;
}

static void print_case(const char *topo, const char *pol, const char *knobs, int Q, const int *busy,
                       int n)
{
    printf("%-36s %-7s %-8s P=%d W=%d busy={", topo, pol, knobs, busy[0], busy[1]);
    for (int i = 0; i < n; i++) printf("%s%d", i ? "," : "", busy[i]);
    printf("} -> Q=%d smt_busy_sibling=%llu idle_core=%llu\n", Q,
           (unsigned long long)snap_busy_sibling,
           (unsigned long long)snap_idle_core);
}

/* ule's LLC window is 3 x affinity_us since the fiber last ran: the test sets
 * affinity_us to its maximum (1 s) and expects the LLC pick when the whole
 * scenario took less than 2 s (a margin for the clocks' order). */
#define ULE_AFFINITY_US 1000000
#define ULE_WINDOW_S 2.0

/* Where the wake-up must land without SMT awareness (smt=0, or global). */
static void expect_no_smt(const usched__topo_t *t, const char *pol, int Q, const int *busy, int n)
{
    int P = busy[0], W = busy[1];
    if (!strcmp(pol, "usched") || !strcmp(pol, "linux")) {
        /* the first idle CPU after the target the kernel's order chose (the
         * waker's CPU, or prev after wake_affine), busy sibling or not */
        int after_w = first_idle_after(t, W, TOPO_LLC, W, busy, n);
        int after_p = first_idle_after(t, P, TOPO_LLC, P, busy, n);
        if (Q != after_w && Q != after_p)
            TEST_FAIL_("%s smt=0: Q=%d, expected the first idle CPU after W (%d) or P (%d)", pol, Q,
                       after_w, after_p);
    } else if (!strcmp(pol, "ule")) {
        /* within the window: the least loaded (so idle) CPU of prev's LLC,
         * CPUs compared one by one (random jitter picks among equals) */
        if (snap_since_block < ULE_WINDOW_S &&
            usched__topo_group(t, Q, TOPO_LLC) != usched__topo_group(t, P, TOPO_LLC))
            TEST_FAIL_("ule smt=0: Q=%d is outside prev's (%d) LLC, %.3f s after the block", Q, P,
                       snap_since_block);
    } else if (!strcmp(pol, "global")) {
        /* the kicked CPU, the first idle one from CPU 0, takes the fiber from
         * the shared queue (the others stay parked, the busy ones spin) */
        int first = first_idle_after(t, -1, TOPO_MACHINE, 0, busy, n);
        if (Q != first) TEST_FAIL_("global: Q=%d, expected the first idle CPU %d", Q, first);
    }
    /* bsd4: the first idle CPU from a rotating start private to the policy:
     * only "idle" (below) is derived. */
    if (beside_busy(t, Q, busy, n) && strcmp(pol, "global") != 0)
        ASSERT_GE(snap_busy_sibling, 1);
}

/* Every case: no spinning, no stealing, no monitor (a wake-up runs where it
 * was placed). */
#define SMT_BASE_KNOBS "spin_us=0,steal=0,stall_us=0,"

static void smt_case(const char *topo, const char *pol, int smt)
{
    char knobs[64];
    snprintf(knobs, sizeof knobs, SMT_BASE_KNOBS "smt=%d", smt);
    if (!strcmp(pol, "ule"))
        snprintf(knobs + strlen(knobs), sizeof knobs - strlen(knobs), ",affinity_us=%d",
                 ULE_AFFINITY_US);
    usched__topo_t *t = pt_topo_load(topo);
    usched_t *s = pt_start(pol, topo, knobs);
    int busy[MAXB], n;
    int Q = run_once(s, t, busy, &n);
    print_case(topo, pol, knobs + strlen(SMT_BASE_KNOBS), Q, busy, n);
    ASSERT_GE(Q, 0);
    if (smt && strcmp(pol, "global") != 0) { /* global is not SMT-aware */
        ASSERT(!beside_busy(t, Q, busy, n));
        ASSERT_EQ_U(snap_busy_sibling, 0);
        ASSERT_EQ_U(snap_idle_core, 1);
    } else {
        expect_no_smt(t, pol, Q, busy, n);
    }
    ASSERT_OK(usched_destroy(s));
    usched__topo_free(t);
}

/* smt changes while the scheduler runs: the next decision follows it. */
static void smt_runtime(const char *topo)
{
    usched__topo_t *t = pt_topo_load(topo);
    usched_t *s = pt_start("usched", topo, SMT_BASE_KNOBS "smt=1");
    int busy[MAXB], n;
    int Q = run_once(s, t, busy, &n);
    print_case(topo, "usched", "smt=1", Q, busy, n);
    ASSERT(!beside_busy(t, Q, busy, n));
    ASSERT_OK(usched_set(s, "knobs", "smt=0"));
    int64_t v = -1;
    ASSERT_OK(usched_knob_get(s, "smt", &v));
    ASSERT_EQ(v, 0);
    Q = run_once(s, t, busy, &n);
    print_case(topo, "usched", "->smt=0", Q, busy, n);
    expect_no_smt(t, "usched", Q, busy, n);
    ASSERT_OK(usched_set(s, "knobs", "smt=1"));
    Q = run_once(s, t, busy, &n);
    print_case(topo, "usched", "->smt=1", Q, busy, n);
    ASSERT(!beside_busy(t, Q, busy, n));
    ASSERT_EQ_U(snap_busy_sibling, 0);
    ASSERT_OK(usched_destroy(s));
    usched__topo_free(t);
}

/* ---- scope ------------------------------------------------------------------ */

struct scope_scen {
    usched_t *s;
    _Atomic int P, Q, posted, stop;
    struct pt_mbox mb;
};

static void scope_waker(void *arg)
{
    struct scope_scen *sc = arg;
    pt_mb_post(&sc->mb, 0);
    atomic_store(&sc->posted, 1); /* J is placed */
    while (!atomic_load(&sc->stop)) __asm__ volatile("" ::: "memory");
}

static void scope_j(void *arg)
{
    struct scope_scen *sc = arg;
    atomic_store(&sc->P, usched_self_cpu());
    pt_mb_wait(&sc->mb);
    atomic_store(&sc->Q, usched_self_cpu());
}

/* On 2 packages x 2 single-PU cores: J blocks on CPU P; P and the other CPU
 * of its LLC (W) are made busy, the second package idles; B, bound on W,
 * wakes J. Only after the placement are P and W freed (with steal=0 J then
 * runs where it was queued; with stall_us=0 the monitor does not move it
 * off a CPU that spins for longer than 10 ms, as it would under TSan).
 * Returns Q. */
static int scope_case(const char *scope)
{
    static const char topo[] = "pack:2 l3:1 l2:2 core:1 pu:1";
    char knobs[96];
    snprintf(knobs, sizeof knobs, SMT_BASE_KNOBS "scope=%s", scope);
    usched__topo_t *t = pt_topo_load(topo);
    usched_t *s = pt_start("usched", topo, knobs);
    struct scope_scen sc = {.s = s};
    atomic_store(&sc.P, -1);
    atomic_store(&sc.Q, -1);
    usched_task_t *j, *b;
    ASSERT_OK(usched_spawn(s, &j, scope_j, &sc));
    while (atomic_load(&sc.P) < 0) usleep(100);
    int P = atomic_load(&sc.P), W = -1;
    for (int c = 0; c < usched__topo_ncpus(t); c++)
        if (c != P && usched__topo_group(t, c, TOPO_LLC) == usched__topo_group(t, P, TOPO_LLC)) W = c;
    ASSERT_GE(W, 0);
    struct pt_spinner sp;
    pt_spin_start(s, &sp, P);
    pt_spin_wait(&sp); /* J has blocked: P runs the spinner */
    int busy[2] = {P, W};
    settle_parked(s, busy, 1); /* W and the second package parked */
    ASSERT_OK(usched_spawn_on(s, &b, W, scope_waker, &sc));
    while (!atomic_load(&sc.posted)) usleep(100);
    atomic_store(&sc.stop, 1);
    pt_spin_stop(&sp);
    ASSERT_OK(usched_join(j));
    ASSERT_OK(usched_join(b));
    int Q = atomic_load(&sc.Q);
    printf("%-36s usched  scope=%-7s P=%d W=%d -> Q=%d\n", topo, scope, P, W, Q);
    bool inside = usched__topo_group(t, Q, TOPO_LLC) == usched__topo_group(t, P, TOPO_LLC);
    if (!strcmp(scope, "llc") && !inside)
        TEST_FAIL_("scope=llc: Q=%d left the LLC of P=%d and W=%d", Q, P, W);
    if (!strcmp(scope, "machine") && inside)
        TEST_FAIL_("scope=machine: Q=%d queued in the busy LLC of P=%d and W=%d while the other package idled",
                   Q, P, W);
    ASSERT_OK(usched_destroy(s));
    usched__topo_free(t);
    return Q;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const char *const topos[] = {
        "pack:2 l3:1 l2:6 core:1 pu:2",
        "pack:1 l3:1 l2:4 core:1 pu:2",
        "pack:4 numa:1 l3:1 core:4 pu:2",
        USCHED_TOPOLOGIES_DIR "/sysfs/32intel64-2p8co2t+8ve.lstopo-2.9.xml",
    };
    static const char *const smt_aware[] = {"usched", "linux", "ule", "bsd4"};
    for (size_t i = 0; i < sizeof topos / sizeof topos[0]; i++) {
        if (i == 3 && access(topos[i], R_OK) != 0) {
            printf("skipping %s: not found\n", topos[i]);
            continue;
        }
        for (size_t p = 0; p < sizeof smt_aware / sizeof smt_aware[0]; p++) {
            smt_case(topos[i], smt_aware[p], 1);
            smt_case(topos[i], smt_aware[p], 0);
        }
        smt_case(topos[i], "global", 1);
    }
    smt_runtime("pack:2 l3:1 l2:6 core:1 pu:2");
    scope_case("machine");
    scope_case("llc");
    printf("ok\n");
    return 0;
}
