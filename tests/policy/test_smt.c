/*
 * SMT decisions on virtual topologies. With busy fibers on distinct cores of
 * an LLC (the wakee's prev, the waker's CPU and others, one PU each), a
 * wake-up under each SMT-aware policy with smt=1 lands on a fully idle core,
 * never beside a busy sibling; with smt=0 usched and linux take the first
 * idle CPU after their target (the waker's CPU, or prev), busy sibling or
 * not, as the kernels do without SMT awareness. Each policy's own rule is
 * asserted exactly where the test can know it: bsd4 kicks the first free CPU
 * (smt=0), or the first CPU of a whole free core (smt=1), from its rotating
 * start, which the test reads before the wake-up; ule's pick is the CPU its
 * summed-load search (cpu_search_lowest) descends to from prev's LLC inside
 * the affinity window, from the machine outside it (the test measures the
 * fiber's age and, when the scenario straddles the window's end, accepts
 * either search; with affinity_us=0 always the machine's); global, which
 * ignores smt, kicks the lowest-numbered idle CPU. In every case
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
/* bsd4's rotor (its next scan start) read just before the wake-up: the
 * wake-up is the only decision between the read and the placement. */
static uint32_t snap_rotor;
/* J's age at the decision (ns since it last ran), bounded: at least
 * snap_age_lo (at the post), at most snap_age_hi (when J ran again). */
static uint64_t snap_age_lo, snap_age_hi;

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
    atomic_store(&sc.W, W);
    while (!atomic_load(&sc.j_blocked)) usleep(100);
    pt_spin_wait(&sp[0]); /* P runs its spinner: J has blocked */
    for (int i = 2; i < n; i++) pt_spin_wait(&sp[i]);
    settle_parked(s, busy, n);
    ASSERT_OK(usched_stats_reset(s));
    if (!strcmp(s->ops->name, "bsd4"))
        snap_rotor = atomic_load((_Atomic uint32_t *)s->pol_priv); /* bsd4_init's rotor */
    uint64_t last_ran = j->last_ran_ns; /* J is blocked: written when it stopped */
    snap_age_lo = usched__now_ns() - last_ran;
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
    snap_age_hi = usched__now_ns() - last_ran;
    ASSERT_OK(usched_join(j));
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
 * affinity_us to its maximum (1 s), so the scenario usually decides inside
 * it; a loaded machine may take longer, and then the machine-wide search is
 * the rule (snap_age_* say which). */
#define ULE_AFFINITY_US 1000000

/* ULE's group load as cpu_search_lowest sums it: 256 per busy CPU (a
 * spinner: load 1), -128 for the preferred CPU (prev). */
static int ule_group_load(const usched__topo_t *t, int level, int g, int prev, const int *busy, int n)
{
    int sum = 0;
    for (int c = 0; c < usched__topo_ncpus(t); c++)
        if (pt_in(t, level, g, c)) sum += (is_busy(c, busy, n) ? 256 : 0) - (c == prev ? 128 : 0);
    return sum;
}

static bool ule_group_has_idle(const usched__topo_t *t, int level, int g, const int *busy, int n)
{
    for (int c = 0; c < usched__topo_ncpus(t); c++)
        if (pt_in(t, level, g, c) && !is_busy(c, busy, n)) return true;
    return false;
}

/* Whether Q is where ULE's search for an idle CPU, from prev's group at
 * `top`, can end: at each level the group holding Q has the least summed
 * load among the child groups that hold an idle CPU (ties: any of them),
 * down to the SMT core (smt=1: cores are compared as groups) or to single
 * CPUs (smt=0: a core's CPUs are compared one by one, each idle CPU equal
 * up to the random jitter). */
static bool ule_search_ends_at(const usched__topo_t *t, int top, int prev, int Q, bool smt,
                               const int *busy, int n)
{
    int g = usched__topo_group(t, prev, top);
    if (!pt_in(t, top, g, Q) || is_busy(Q, busy, n)) return false;
    for (int lvl = top; lvl > TOPO_SMT; lvl--) {
        int child = lvl - 1;
        if (child == TOPO_SMT && !smt) break; /* CPUs one by one: any idle CPU */
        int qg = usched__topo_group(t, Q, child), best = INT32_MAX;
        for (int c = 0; c < usched__topo_ncpus(t); c++) {
            if (!pt_in(t, lvl, g, c)) continue;
            int cg = usched__topo_group(t, c, child);
            if (!ule_group_has_idle(t, child, cg, busy, n)) continue;
            int l = ule_group_load(t, child, cg, prev, busy, n);
            if (l < best) best = l;
        }
        if (ule_group_load(t, child, qg, prev, busy, n) != best) return false;
        g = qg;
    }
    return true;
}

/* ule (prev P is busy, so its affinity shortcut never applies): inside the
 * LLC window the search of prev's LLC (step 2); outside it the search of the
 * machine (step 3), anchored at prev. Which one the decision made is known
 * from J's age unless the scenario straddled the window's end: then either. */
static void expect_ule(const usched__topo_t *t, int Q, bool smt, int64_t affinity_us, const int *busy, int n)
{
    int P = busy[0];
    uint64_t win = 3ull * (uint64_t)affinity_us * 1000;
    bool llc_group = usched__topo_group_weight(t, TOPO_LLC, usched__topo_group(t, P, TOPO_LLC)) > 1 &&
                     usched__topo_group_weight(t, TOPO_LLC, usched__topo_group(t, P, TOPO_LLC)) >
                         usched__topo_group_weight(t, TOPO_SMT, usched__topo_group(t, P, TOPO_SMT));
    bool inside = snap_age_hi < win, outside = snap_age_lo >= win;
    bool by_llc = llc_group && ule_search_ends_at(t, TOPO_LLC, P, Q, smt, busy, n);
    bool by_machine = ule_search_ends_at(t, TOPO_MACHINE, P, Q, smt, busy, n);
    printf("  ule: age %.3f..%.3f s, window %.3f s: LLC search %s, machine search %s\n",
           (double)snap_age_lo / 1e9, (double)snap_age_hi / 1e9, (double)win / 1e9,
           by_llc ? "ends at Q" : "not", by_machine ? "ends at Q" : "not");
    if (inside && llc_group && !by_llc)
        TEST_FAIL_("ule smt=%d: Q=%d is not where the search of prev's (%d) LLC ends", smt, Q, P);
    if ((outside || !llc_group) && !by_machine)
        TEST_FAIL_("ule smt=%d: Q=%d is not where the machine-wide search from prev (%d) ends", smt, Q, P);
    if (!inside && !outside && !by_llc && !by_machine)
        TEST_FAIL_("ule smt=%d: Q=%d is where neither search ends", smt, Q);
}

/* bsd4: the first CPU from the rotor's start (inclusive, wrapping) that is
 * free (smt=0) or, with smt=1, the first whose whole core is free. */
static int bsd4_expected(const usched__topo_t *t, bool smt, const int *busy, int n)
{
    int ncpus = usched__topo_ncpus(t), start = (int)(snap_rotor % (uint32_t)ncpus);
    for (int k = 0; k < ncpus; k++) {
        int c = (start + k) % ncpus;
        if (is_busy(c, busy, n)) continue;
        if (smt && beside_busy(t, c, busy, n)) continue;
        return c;
    }
    return -1;
}

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
    } else if (!strcmp(pol, "global")) {
        /* the kicked CPU, the first idle one from CPU 0, takes the fiber from
         * the shared queue (the others stay parked, the busy ones spin) */
        int first = first_idle_after(t, -1, TOPO_MACHINE, 0, busy, n);
        if (Q != first) TEST_FAIL_("global: Q=%d, expected the first idle CPU %d", Q, first);
    }
    if (beside_busy(t, Q, busy, n) && strcmp(pol, "global") != 0)
        ASSERT_GE(snap_busy_sibling, 1);
}

/* Every case: no spinning, no stealing, no monitor (a wake-up runs where it
 * was placed). */
#define SMT_BASE_KNOBS "spin_us=0,steal=0,stall_us=0,"

/* One wake-up under pol with knob smt (ule: and affinity_us). */
static void smt_case_aff(const char *topo, const char *pol, int smt, int64_t affinity_us)
{
    char knobs[80];
    snprintf(knobs, sizeof knobs, SMT_BASE_KNOBS "smt=%d", smt);
    if (!strcmp(pol, "ule"))
        snprintf(knobs + strlen(knobs), sizeof knobs - strlen(knobs), ",affinity_us=%lld",
                 (long long)affinity_us);
    usched__topo_t *t = pt_topo_load(topo);
    usched_t *s = pt_start(pol, topo, knobs);
    int busy[MAXB], n;
    int Q = run_once(s, t, busy, &n);
    print_case(topo, pol, knobs + strlen(SMT_BASE_KNOBS), Q, busy, n);
    ASSERT_GE(Q, 0);
    ASSERT(!is_busy(Q, busy, n));
    if (smt && strcmp(pol, "global") != 0) { /* global is not SMT-aware */
        ASSERT(!beside_busy(t, Q, busy, n));
        ASSERT_EQ_U(snap_busy_sibling, 0);
        ASSERT_EQ_U(snap_idle_core, 1);
    } else {
        expect_no_smt(t, pol, Q, busy, n);
    }
    if (!strcmp(pol, "bsd4")) {
        /* the kicked CPU, claimed, is the one that takes the fiber: every
         * other idle CPU stays parked */
        int want = bsd4_expected(t, smt, busy, n);
        if (Q != want)
            TEST_FAIL_("bsd4 smt=%d: Q=%d, expected %d, the first %s from the rotor's start %u", smt, Q,
                       want, smt ? "CPU of a whole free core" : "free CPU", snap_rotor % (uint32_t)s->ncpus);
    }
    if (!strcmp(pol, "ule")) expect_ule(t, Q, smt, affinity_us, busy, n);
    ASSERT_OK(usched_destroy(s));
    usched__topo_free(t);
}

static void smt_case(const char *topo, const char *pol, int smt)
{
    smt_case_aff(topo, pol, smt, ULE_AFFINITY_US);
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

/* ---- bsd4: two wake-ups in a row -------------------------------------------- */

struct burst {
    usched_t *s;
    struct pt_mbox mb[2];
    _Atomic int blocked[2], Q[2], go, stop;
};

struct burst_j {
    struct burst *b;
    int i;
};

static void burst_j(void *arg)
{
    struct burst_j *bj = arg;
    struct burst *b = bj->b;
    atomic_store(&b->blocked[bj->i], 1);
    pt_mb_wait(&b->mb[bj->i]);
    atomic_store(&b->Q[bj->i], usched_self_cpu());
    while (!atomic_load(&b->stop)) __asm__ volatile("" ::: "memory"); /* keeps its CPU busy */
}

static void burst_waker(void *arg)
{
    struct burst *b = arg;
    while (!atomic_load(&b->go)) __asm__ volatile("" ::: "memory");
    pt_mb_post(&b->mb[0], 0);
    pt_mb_post(&b->mb[1], 0);
    while (!atomic_load(&b->stop)) __asm__ volatile("" ::: "memory");
}

/* bsd4's decisions as it makes them: the policy itself, registered again
 * under another name with a select_cpu that records the CPU each wake-up
 * kicks. */
extern const struct usched_ops usched__policy_bsd4;
static struct usched_ops bsd4_rec;
static _Atomic int rec_n, rec_cpu[8];

static void bsd4_rec_select(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                            struct usched_select_result *out)
{
    usched__policy_bsd4.select_cpu(ctx, a, out);
    if (!(a->flags & USCHED_SEL_WAKE)) return;
    int i = atomic_fetch_add(&rec_n, 1);
    if (i < 8) atomic_store(&rec_cpu[i], out->cpu);
}

/* bsd4 with smt=1 on 1 package x 3 cores x 2 PUs: the waker W and a spinner
 * fill one core, the two others are whole and free, and W wakes J1 and J2
 * back to back. J1's CPU is kicked; it is still parked when J2 is decided
 * (nanoseconds later, against a futex wake-up), so unless the first
 * decision claimed it, its core still looked whole and free, and J2 was
 * kicked onto the same core (or the same CPU) in 4 of the rotor's 6 starts
 * while the third core idled. With the claim (as the kernel takes the
 * kicked CPU out of its ready mask) J2 is kicked onto the other free core,
 * whatever the start. The decisions are recorded as made; where the fibers
 * then run is the shared queue's business (a CPU that wakes and finds a
 * second fiber queued may wake its own sibling to take it before the
 * kicked CPU arrives), so only "not on W's busy core" is asserted of that.
 * Several rounds cover the rotor. */
static void bsd4_burst(void)
{
    static const char topo[] = "pack:1 core:3 pu:2";
    bsd4_rec = usched__policy_bsd4;
    bsd4_rec.name = "bsd4_rec";
    bsd4_rec.select_cpu = bsd4_rec_select;
    ASSERT_OK(usched_policy_register(&bsd4_rec));
    usched__topo_t *t = pt_topo_load(topo);
    usched_t *s = pt_start("bsd4_rec", topo, SMT_BASE_KNOBS "smt=1");
    for (int round = 0; round < 6; round++) {
        struct burst b = {.s = s};
        struct burst_j bj[2] = {{&b, 0}, {&b, 1}};
        usched_task_t *j[2], *wk;
        for (int i = 0; i < 2; i++) {
            atomic_store(&b.Q[i], -1);
            ASSERT_OK(usched_spawn(s, &j[i], burst_j, &bj[i]));
        }
        for (int i = 0; i < 2; i++)
            while (!atomic_load(&b.blocked[i])) usleep(100);
        int W = 0, sib = pt_sibling(t, W);
        struct pt_spinner sp;
        pt_spin_start(s, &sp, sib);
        pt_spin_wait(&sp);
        ASSERT_OK(usched_spawn_on(s, &wk, W, burst_waker, &b));
        int busy[2] = {W, sib};
        /* both J blocked (their mailboxes hold them) and every other CPU parked */
        for (int i = 0; i < 2; i++)
            for (int tries = 0;; tries++) {
                pt_mb_lock(&b.mb[i]);
                bool waiting = b.mb[i].waiter != NULL;
                pt_mb_unlock(&b.mb[i]);
                if (waiting) break;
                if (tries == 30000) TEST_FAIL_("J%d did not block within 30 s", i + 1);
                usleep(1000);
            }
        settle_parked(s, busy, 2);
        ASSERT_OK(usched_stats_reset(s));
        atomic_store(&rec_n, 0);
        atomic_store(&b.go, 1);
        for (int tries = 0; atomic_load(&b.Q[0]) < 0 || atomic_load(&b.Q[1]) < 0; tries++) {
            if (tries == 30000) TEST_FAIL_("J1 or J2 did not run within 30 s of the wake-ups");
            usleep(1000);
        }
        int q0 = atomic_load(&b.Q[0]), q1 = atomic_load(&b.Q[1]);
        uint64_t idle_core = pt_stat(s, "place_idle_core"), beside = pt_stat(s, "smt_busy_sibling");
        printf("%-36s bsd4    burst    W=%d busy={%d,%d} -> J1 on %d, J2 on %d idle_core=%llu "
               "smt_busy_sibling=%llu\n",
               topo, W, W, sib, q0, q1, (unsigned long long)idle_core, (unsigned long long)beside);
        if (pt_same_core(t, q0, W) || pt_same_core(t, q1, W))
            TEST_FAIL_("round %d: a fiber ran on the busy core of W=%d (J1 %d, J2 %d)", round, W, q0, q1);
        ASSERT_EQ(atomic_load(&rec_n), 2);
        int k0 = atomic_load(&rec_cpu[0]), k1 = atomic_load(&rec_cpu[1]);
        printf("  kicked: J1 -> %d, J2 -> %d\n", k0, k1);
        if (pt_same_core(t, k0, W) || pt_same_core(t, k1, W))
            TEST_FAIL_("round %d: a wake-up kicked a CPU of W's busy core (J1 %d, J2 %d)", round, k0, k1);
        if (pt_same_core(t, k0, k1))
            TEST_FAIL_("round %d: J2 was kicked onto J1's core (J1 %d, J2 %d) while a whole core idled",
                       round, k0, k1);
        ASSERT_EQ_U(idle_core, 2);
        ASSERT_EQ_U(beside, 0);
        atomic_store(&b.stop, 1);
        for (int i = 0; i < 2; i++) ASSERT_OK(usched_join(j[i]));
        ASSERT_OK(usched_join(wk));
        pt_spin_stop(&sp);
    }
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
        /* ule outside its affinity windows: the machine-wide search */
        smt_case_aff(topos[i], "ule", 0, 0);
        smt_case_aff(topos[i], "ule", 1, 0);
        smt_case(topos[i], "global", 1);
    }
    smt_runtime("pack:2 l3:1 l2:6 core:1 pu:2");
    bsd4_burst();
    scope_case("machine");
    scope_case("llc");
    printf("ok\n");
    return 0;
}
