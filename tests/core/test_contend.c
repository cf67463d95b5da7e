/*
 * Contention (src/core/monitor.c, C1-C4; docs/monitor.md): the monitor reads
 * run delays from a directory of schedstat lines the test writes (one file
 * per CPU, "run_ns delay_ns slices"), so the verdicts do not depend on the
 * machine's load.
 *
 *   detect    CPU 0 waits 50% of its runnable time: it becomes contended,
 *             once (contend_episodes); CPUs fed
 *             0% stay uncontended, and so does the CPU whose file is not a
 *             schedstat line (bad input is no contention, no crash);
 *   verdict   with no new evidence the verdict stands;
 *   nospin    a fiber bound to CPU 0 sleeps 10 times: CPU 0 parks without
 *             spinning each time (contend_nospin; its own spins counter
 *             does not move);
 *   wakep     (3 CPUs or more) a fiber on CPU 1 spawns while every other
 *             CPU is parked: wakep passes CPU 0 over (contend_wake_skips);
 *   pin       when the workers are pinned (the live machine), CPU 0's worker
 *             is widened to its LLC for the episode (every other worker is
 *             uncontended) and pinned back after;
 *   end       fed 0%, CPU 0 is uncontended again and spins as before;
 *   crowded   CPU 1 is contended first (while CPU 0 is not: pinned, it is
 *             widened), then CPU 0: CPU 0 is widened only onto the CPUs of
 *             its LLC whose worker is not contended - on two CPUs none, so
 *             it stays on its own; a garbage line then ends CPU 1's episode
 *             (no reading is no contention) and 0% ends CPU 0's.
 *   live      (the live machine only) the real reader: a thread that burns
 *             CPU shows its run time (/proc/self/task/TID/schedstat) grow
 *             while one blocked in read() shows none; then a scheduler
 *             reading the real files, whose CPU 0 runs a fiber that computes
 *             beside a thread pinned to the same CPU (each waits about half
 *             of its runnable time), finds CPU 0 contended, and not CPU 1,
 *             whose worker sleeps.
 * Every wait is bounded (20 s, which no correct run reaches); nothing
 * asserts a time.
 *
 * Usage: core_contend [topology]   (default: the live machine)
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "fake_schedstat.h"
#include "test.h"
#include "usched.h"

#define BOUND_S 20.0
#define NSLEEPS 10

static usched_t *sched;
static struct fake_ss ss;

static uint64_t stat_of(const char *name)
{
    uint64_t v = 0;
    ASSERT_OK(usched_stat(sched, name, &v));
    return v;
}

static int cpu_count_of(struct usched__wk *w)
{
    cpu_set_t set;
    ASSERT_EQ(pthread_getaffinity_np(w->thread, sizeof set, &set), 0);
    return CPU_COUNT(&set);
}

/* The monitor publishes a verdict before it widens or pins the worker back
 * and counts it (contend_look, then contend_widen): a test that saw the
 * verdict waits, bounded, for what follows it (an aarch64 run under qemu
 * read contend_unpins 0 between the two). The assertions after it check. */
#define SETTLE(cond)                                                                               \
    for (double settle_end_ = test_now() + BOUND_S; !(cond) && test_now() < settle_end_;)         \
        usleep(1000)

static void sleeper(void *arg)
{
    (void)arg;
    for (int i = 0; i < NSLEEPS; i++) {
        ASSERT_OK(usched_sleep_ns(1000 * 1000));
        ASSERT_EQ(usched_self_cpu(), 0);
    }
}

static _Atomic int children;
static void child(void *arg)
{
    (void)arg;
    atomic_fetch_add(&children, 1);
}

/* On CPU 1: spawns once every other CPU is parked, until wakep passed CPU 0
 * over (or 50 tries). */
static void spawner(void *arg)
{
    (void)arg;
    usched_t *s = sched;
    for (int i = 0; i < 50 && stat_of("contend_wake_skips") == 0; i++) {
        double end = test_now() + BOUND_S;
        while (atomic_load(&s->park.nparked) != (uint32_t)s->ncpus - 1 && test_now() < end) usleep(200);
        ASSERT_OK(usched_spawn(sched, NULL, child, NULL));
    }
}

/* On the last CPU while the test feeds: keeps a worker awake, for the
 * monitor sleeps while every worker is parked (M1-M3). */
static _Atomic int feeding;
static void awake(void *arg)
{
    (void)arg;
    while (atomic_load(&feeding)) usched_yield();
}

/* Feeds CPUs 0 .. upto-1 with pct until CPU cpu's verdict is want, with a
 * worker kept awake on the last CPU (awake). */
/* cpu -1: every CPU's verdict is want (the monitor looks at the CPUs one
 * after another, so CPU 0's verdict can change before the others' in the
 * same look: an aarch64 run under qemu saw CPU 0 uncontended and another
 * CPU not yet). */
static bool verdict_is(int cpu, bool want)
{
    if (cpu >= 0) return usched__wk_contended(sched->wk[cpu]) == want;
    for (int c = 0; c < usched_ncpus(sched); c++)
        if (usched__wk_contended(sched->wk[c]) != want) return false;
    return true;
}

static void wait_for(int upto, const int *pct, int cpu, bool want)
{
    atomic_store(&feeding, 1);
    ASSERT_OK(usched_spawn_on(sched, NULL, usched_ncpus(sched) - 1, awake, NULL));
    double end = test_now() + BOUND_S;
    while (!verdict_is(cpu, want) && test_now() < end) fake_ss_feed(&ss, upto, pct);
    atomic_store(&feeding, 0);
    ASSERT_OK(usched_wait(sched));
    ASSERT(verdict_is(cpu, want));
}

/* CPU 0 fed pct0 % (the others 0%, the last one's file garbage) until its
 * verdict is want. */
static void wait_contended(int ncpus, int pct0, bool want)
{
    int pct[FAKE_SS_MAX] = {pct0};
    wait_for(ncpus - 1, pct, 0, want);
}

/* ---- live: the real /proc/self/task/TID/schedstat ------------------------------------- */

static _Atomic int burn_stop, burner_tid;
static int burn_cpu = -1; /* the OS CPU a burner thread pins itself to, -1 none */

static void schedstat_of(int tid, uint64_t *run, uint64_t *delay)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
    FILE *f = fopen(path, "r");
    if (!f) TEST_FAIL_("%s: %s (a kernel without CONFIG_SCHED_INFO)", path, strerror(errno));
    unsigned long long r, d;
    ASSERT_EQ(fscanf(f, "%llu %llu", &r, &d), 2);
    fclose(f);
    *run = r, *delay = d;
}

static void *burner(void *arg)
{
    (void)arg;
    if (burn_cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(burn_cpu, &set);
        ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof set, &set), 0);
    }
    atomic_store(&burner_tid, (int)gettid());
    while (!atomic_load_explicit(&burn_stop, memory_order_relaxed)) {
    }
    return NULL;
}

static int block_fd; /* the read end of a pipe nobody writes until the end */
static _Atomic int blocked_tid;

static void *blocked(void *arg)
{
    (void)arg;
    atomic_store(&blocked_tid, (int)gettid());
    char b;
    ASSERT_EQ(read(block_fd, &b, 1), 1);
    return NULL;
}

/* Whether thread tid is asleep (state S in /proc/self/task/TID/stat). */
static bool asleep(int tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    ASSERT(f);
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    const char *rp = ok ? strrchr(buf, ')') : NULL; /* the name may hold spaces */
    return rp && rp[1] == ' ' && rp[2] == 'S';
}

static void burn_fiber(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&burn_stop, memory_order_relaxed)) {
    }
}

static void part_live(void)
{
    /* the reader's two fields, each way */
    int fds[2];
    ASSERT_OK(pipe(fds));
    block_fd = fds[0];
    pthread_t tb, tz;
    atomic_store(&burn_stop, 0);
    atomic_store(&burner_tid, 0);
    ASSERT_EQ(pthread_create(&tz, NULL, blocked, NULL), 0);
    ASSERT_EQ(pthread_create(&tb, NULL, burner, NULL), 0);
    double end = test_now() + BOUND_S;
    while ((!atomic_load(&blocked_tid) || !asleep(atomic_load(&blocked_tid)) || !atomic_load(&burner_tid)) &&
           test_now() < end)
        usleep(1000);
    ASSERT(asleep(atomic_load(&blocked_tid)));
    uint64_t br0, bd0, zr0, zd0, br = 0, bd, zr, zd;
    schedstat_of(atomic_load(&blocked_tid), &zr0, &zd0);
    schedstat_of(atomic_load(&burner_tid), &br0, &bd0);
    for (end = test_now() + BOUND_S; test_now() < end; usleep(1000)) {
        schedstat_of(atomic_load(&burner_tid), &br, &bd);
        if (br > br0) break;
    }
    schedstat_of(atomic_load(&blocked_tid), &zr, &zd);
    printf("live: the burning thread ran %llu ns more, the blocked one %llu ns more\n",
           (unsigned long long)(br - br0), (unsigned long long)(zr - zr0));
    ASSERT_GT(br, br0);
    ASSERT_EQ_U(zr, zr0);
    ASSERT_EQ_U(zd, zd0);
    atomic_store(&burn_stop, 1);
    ASSERT_EQ(pthread_join(tb, NULL), 0);
    ASSERT_EQ(write(fds[1], "x", 1), 1);
    ASSERT_EQ(pthread_join(tz, NULL), 0);
    close(fds[0]), close(fds[1]);

    /* The verdict from the real files. Judging starts once the workers
     * have parked: a worker that waited for its CPU while it started (the
     * machine busy with other tests) would be judged contended, and a
     * verdict stands while the worker sleeps (C1). */
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "knobs", "contend_pct=0,contend_pin=0"));
    ASSERT_OK(usched_set(s, "pin", "1")); /* the thread below shares worker 0's one CPU */
    ASSERT_OK(usched_start(s));
    ASSERT(s->pinned);
    for (end = test_now() + BOUND_S;
         atomic_load(&s->park.nparked) < (uint32_t)s->ncpus && test_now() < end;)
        usleep(1000);
    int32_t tid1;
    while (!(tid1 = atomic_load(&s->wk[1]->tid))) usleep(1000);
    uint64_t r1a, d1a, r1b, d1b;
    schedstat_of(tid1, &r1a, &d1a);
    ASSERT_OK(usched_set(s, "knobs", "contend_pct=30"));
    cpu_set_t set;
    ASSERT_EQ(pthread_getaffinity_np(s->wk[0]->thread, sizeof set, &set), 0);
    ASSERT_EQ(CPU_COUNT(&set), 1);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) burn_cpu = c;
    atomic_store(&burn_stop, 0);
    atomic_store(&burner_tid, 0);
    ASSERT_OK(usched_spawn_on(s, NULL, 0, burn_fiber, NULL));
    ASSERT_EQ(pthread_create(&tb, NULL, burner, NULL), 0);
    for (end = test_now() + BOUND_S; !usched__wk_contended(s->wk[0]) && test_now() < end;) usleep(1000);
    bool c0 = usched__wk_contended(s->wk[0]), c1 = usched__wk_contended(s->wk[1]);
    schedstat_of(tid1, &r1b, &d1b);
    atomic_store(&burn_stop, 1);
    ASSERT_EQ(pthread_join(tb, NULL), 0);
    ASSERT_OK(usched_wait(s));
    uint64_t episodes = 0;
    ASSERT_OK(usched_stat(s, "contend_episodes", &episodes));
    printf("live: CPU 0 (a fiber and a thread on OS CPU %d) contended: %d; CPU 1 (asleep): %d; "
           "contend_episodes %llu\n", burn_cpu, c0, c1, (unsigned long long)episodes);
    ASSERT(c0);
    /* CPU 1 slept: a verdict needs at least 1 ms runnable since judging
     * began (CONTEND_MIN_NS, monitor.c). A CPU 1 woken meanwhile (by the
     * monitor, say) that waited for its CPU behind another test may be
     * judged contended, rightly: then its verdict is not checked. */
    uint64_t awake1 = (r1b - r1a) + (d1b - d1a);
    if (awake1 < 1000000)
        ASSERT(!c1);
    else
        printf("live: CPU 1's worker was runnable %llu ns (ran %llu): its verdict is not checked\n",
               (unsigned long long)awake1, (unsigned long long)(r1b - r1a));
    ASSERT_GE(episodes, 1);
    ASSERT_OK(usched_destroy(s));
    burn_cpu = -1;
}

int main(int argc, char **argv)
{
    fake_ss_init(&ss, "contend");
    ASSERT_OK(usched_create(&sched));
    if (argc > 1) ASSERT_OK(usched_set(sched, "topology", argv[1]));
    /* contend_pack=0: C1-C4 alone (a packed CPU is passed over by K3
     * before C3 would pass it over; core_pack tests packing) */
    ASSERT_OK(usched_set(sched, "knobs", "stall_us=2000,contend_pct=30,contend_pin=1,contend_pack=0"));
    sched->cfg.schedstat_dir = ss.dir;
    ASSERT_OK(usched_start(sched));
    int n = usched_ncpus(sched);
    if (n < 2 || n > FAKE_SS_MAX) {
        printf("skipped: %d CPUs\n", n);
        usched_destroy(sched);
        fake_ss_remove(&ss, 0);
        return 77;
    }
    fake_ss_line(&ss, n - 1, "not a schedstat line\n");

    /* detect */
    wait_contended(n, 50, true);
    printf("detect: CPU 0 contended; contend_episodes %llu\n", (unsigned long long)stat_of("contend_episodes"));
    ASSERT_EQ_U(stat_of("contend_episodes"), 1);
    for (int c = 1; c < n; c++) ASSERT_EQ(usched__wk_contended(sched->wk[c]), false);

    /* pin: widened onto its LLC; nowhere to go when CPU 0 is alone in its
     * LLC (some virtual machines give each vCPU a last-level cache of its own) */
    usched__topo_t *t = sched->topo;
    int llc_cpus = usched__topo_group_weight(t, TOPO_LLC, usched__topo_group(t, 0, TOPO_LLC));
    uint64_t unpins = sched->pinned && llc_cpus > 1 ? 1 : 0;
    SETTLE(stat_of("contend_unpins") >= unpins);
    int llc_weight = cpu_count_of(sched->wk[0]);
    printf("pin: pinned %d, CPU 0's worker may run on %d CPUs, contend_unpins %llu\n", sched->pinned,
           llc_weight, (unsigned long long)stat_of("contend_unpins"));
    ASSERT_EQ_U(stat_of("contend_unpins"), unpins);
    if (sched->pinned) ASSERT_EQ(llc_weight, llc_cpus);

    /* verdict + nospin: no feeding from here, the verdict stands */
    uint64_t nospin0 = stat_of("contend_nospin");
    uint64_t spins0 = atomic_load(&sched->wk[0]->stats.v[USCHED_STAT_spins]);
    ASSERT_OK(usched_spawn_on(sched, NULL, 0, sleeper, NULL));
    ASSERT_OK(usched_wait(sched));
    uint64_t nospin = stat_of("contend_nospin") - nospin0;
    uint64_t spins = atomic_load(&sched->wk[0]->stats.v[USCHED_STAT_spins]) - spins0;
    printf("nospin: contend_nospin +%llu, CPU 0 spins +%llu\n", (unsigned long long)nospin,
           (unsigned long long)spins);
    ASSERT_EQ(usched__wk_contended(sched->wk[0]), true);
    ASSERT_GE(nospin, NSLEEPS);
    ASSERT_EQ_U(spins, 0);

    /* wakep */
    if (n >= 3) {
        ASSERT_OK(usched_spawn_on(sched, NULL, 1, spawner, NULL));
        ASSERT_OK(usched_wait(sched));
        printf("wakep: contend_wake_skips %llu after %d spawns\n", (unsigned long long)stat_of("contend_wake_skips"),
               atomic_load(&children));
        ASSERT_GE(stat_of("contend_wake_skips"), 1);
    }

    /* end */
    wait_contended(n, 0, false);
    printf("end: CPU 0 uncontended; contend_episodes %llu\n", (unsigned long long)stat_of("contend_episodes"));
    ASSERT_EQ_U(stat_of("contend_episodes"), 1);
    if (sched->pinned) {
        SETTLE(cpu_count_of(sched->wk[0]) == 1);
        ASSERT_EQ(cpu_count_of(sched->wk[0]), 1);
    }
    nospin0 = stat_of("contend_nospin");
    ASSERT_OK(usched_spawn_on(sched, NULL, 0, sleeper, NULL));
    ASSERT_OK(usched_wait(sched));
    ASSERT_EQ_U(stat_of("contend_nospin"), nospin0);
    ASSERT_EQ(usched__wk_contended(sched->wk[n - 1]), false); /* garbage: never contended */

    /* crowded: CPU 1 first (its file gets real lines from here), then CPU 0 */
    uint64_t unpins0 = stat_of("contend_unpins");
    int pct[FAKE_SS_MAX] = {0};
    pct[1] = 50;
    wait_for(2, pct, 1, true);
    pct[0] = 50;
    wait_for(2, pct, 0, true);
    int expect = 0; /* CPU 0 and the CPUs of its LLC whose worker is not contended */
    {
        usched__topo_t *t = sched->topo;
        const uint64_t *m = usched__topo_group_mask(t, TOPO_LLC, usched__topo_group(t, 0, TOPO_LLC));
        for (int c = 0; c < n; c++)
            if ((m[c / 64] >> (c % 64) & 1) && (c == 0 || !usched__wk_contended(sched->wk[c]))) expect++;
    }
    /* CPU 1 was widened while CPU 0 was uncontended, if its LLC has room */
    bool wide1 = usched__topo_group_weight(sched->topo, TOPO_LLC, usched__topo_group(sched->topo, 1, TOPO_LLC)) > 1;
    unpins = sched->pinned ? (uint64_t)wide1 + (expect > 1) : 0;
    SETTLE(stat_of("contend_unpins") - unpins0 >= unpins);
    printf("crowded: CPUs 0 and 1 contended; CPU 0's worker may run on %d CPUs (%d expected when "
           "pinned), CPU 1's on %d; contend_unpins +%llu\n", cpu_count_of(sched->wk[0]), expect,
           cpu_count_of(sched->wk[1]), (unsigned long long)(stat_of("contend_unpins") - unpins0));
    ASSERT_EQ_U(stat_of("contend_unpins") - unpins0, unpins);
    if (sched->pinned) {
        ASSERT_EQ(cpu_count_of(sched->wk[0]), expect);
        if (wide1) ASSERT_GT(cpu_count_of(sched->wk[1]), 1);
    }
    fake_ss_line(&ss, 1, "not a schedstat line either\n");
    pct[0] = 0;
    wait_for(1, pct, -1, false);
    for (int c = 0; c < n; c++) ASSERT_EQ(usched__wk_contended(sched->wk[c]), false);
    if (sched->pinned) {
        SETTLE(cpu_count_of(sched->wk[0]) == 1 && cpu_count_of(sched->wk[1]) == 1);
        ASSERT_EQ(cpu_count_of(sched->wk[0]), 1);
        ASSERT_EQ(cpu_count_of(sched->wk[1]), 1);
    }

    ASSERT_OK(usched_destroy(sched));
    fake_ss_remove(&ss, n);
    if (argc == 1) part_live();
    printf("ok\n");
    return 0;
}
