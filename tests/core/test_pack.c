/*
 * Packing (src/core/monitor.c, K1-K5; docs/monitor.md): the monitor reads
 * run delays from a directory of schedstat lines the test writes, as
 * core_contend does, so the verdicts do not depend on the machine's load.
 * CPU 0 is fed 50% waiting, every other CPU 0%.
 *
 *   packs    the work is light (a fiber that sleeps 200 us at a time keeps
 *            the monitor looking): CPU 0 becomes contended and is packed,
 *            with an uncontended CPU standing in for it (contend_packs);
 *   moved    unbound fibers spawned from outside, each sleeping 1 ms 20
 *            times, never start on CPU 0 while it stays packed: every
 *            placement that named it went to the stand-in
 *            (contend_pack_moved counts them; how many depends on the
 *            policy, so it is printed);
 *   bound    a fiber bound to CPU 0 still runs there;
 *   room     a fiber bound to each other CPU computes (yielding, so no CPU
 *            stalls): the work no longer fits on them, CPU 0 is unpacked,
 *            and an unbound fiber spawned then may run anywhere (printed);
 *   off      with the knob contend_pack=0 nothing is packed, however light
 *            the work;
 *   end      fed 0%, CPU 0 is uncontended again and unpacked.
 * Every wait is bounded (20 s, which no correct run reaches); nothing
 * asserts a time.
 *
 * Usage: core_pack [topology]   (default: the live machine)
 */
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
#define NFIB 4
#define NSLEEPS 20

static usched_t *sched;
static struct fake_ss ss;
static int ncpus;

static uint64_t stat_of(const char *name)
{
    uint64_t v = 0;
    ASSERT_OK(usched_stat(sched, name, &v));
    return v;
}

/* One step of fake time: CPU 0 waiting pct0 % of it, the others 0%. */
static void feed(int pct0)
{
    int pct[FAKE_SS_MAX] = {pct0};
    fake_ss_feed(&ss, ncpus, pct);
}

/* A light fiber on the last CPU while the test waits: the monitor sleeps
 * while every worker is parked (M1-M3), and this one wakes every 200 us. */
static _Atomic int ticking;
static void ticker(void *arg)
{
    (void)arg;
    while (atomic_load(&ticking)) ASSERT_OK(usched_sleep_ns(200 * 1000));
}

static bool packed0(void)
{
    return usched__wk_packed(sched->wk[0]);
}

/* Feeds CPU 0 pct0 % until CPU 0's packing is want (contended too, when want),
 * and it still is once the ticker has ended. Its end keeps the workers busy
 * for a moment, and a look then may rightly unpack (under qemu the other
 * CPUs seemed full, or a run passed stall_us: the aarch64 stage saw CPU 0
 * unpacked right after the loop saw it packed); feeding again packs it
 * again. With every worker parked the monitor stops looking (M1-M3), so
 * the state then holds for the checks that follow. */
static void wait_packed(int pct0, bool want)
{
    double end = test_now() + BOUND_S;
    do {
        atomic_store(&ticking, 1);
        ASSERT_OK(usched_spawn_on(sched, NULL, ncpus - 1, ticker, NULL));
        while ((packed0() != want || (want && !usched__wk_contended(sched->wk[0]))) && test_now() < end)
            feed(pct0);
        atomic_store(&ticking, 0);
        ASSERT_OK(usched_wait(sched));
    } while (packed0() != want && test_now() < end);
    ASSERT_EQ(packed0(), want);
}

/* ---- moved: unbound fibers that sleep, recording where each run starts ---- */

static _Atomic int on_cpu0, runs;

static void note_cpu(void)
{
    atomic_fetch_add(&runs, 1);
    if (usched_self_cpu() == 0) atomic_fetch_add(&on_cpu0, 1);
}

static void sleepy(void *arg)
{
    (void)arg;
    note_cpu();
    for (int i = 0; i < NSLEEPS; i++) {
        ASSERT_OK(usched_sleep_ns(1000 * 1000));
        note_cpu();
    }
}

static _Atomic int bound_cpu = -1;
static void bound_fn(void *arg)
{
    (void)arg;
    atomic_store(&bound_cpu, usched_self_cpu());
}

/* ---- room: a fiber computing on every CPU but 0 ---- */

/* Computes, yielding now and then: busy at every look, but never a stall
 * (a stall alone unpacks, K1). */
static _Atomic int hog_stop, hogs_up;
static void hog(void *arg)
{
    (void)arg;
    atomic_fetch_add(&hogs_up, 1);
    while (!atomic_load_explicit(&hog_stop, memory_order_relaxed)) {
        for (volatile int i = 0; i < 10000; i++) {
        }
        usched_yield();
    }
}

static _Atomic int free_cpu = -1;
static void free_fn(void *arg)
{
    (void)arg;
    atomic_store(&free_cpu, usched_self_cpu());
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    fake_ss_init(&ss, "pack");
    ASSERT_OK(usched_create(&sched));
    if (argc > 1) ASSERT_OK(usched_set(sched, "topology", argv[1]));
    /* preempt_us=0: the hogs keep their CPUs (room) */
    ASSERT_OK(usched_set(sched, "knobs", "stall_us=2000,contend_pct=30,contend_pin=0,preempt_us=0"));
    sched->cfg.schedstat_dir = ss.dir;
    ASSERT_OK(usched_start(sched));
    ncpus = usched_ncpus(sched);
    if (ncpus < 2 || ncpus > FAKE_SS_MAX) {
        printf("skipped: %d CPUs\n", ncpus);
        usched_destroy(sched);
        fake_ss_remove(&ss, 0);
        return 77;
    }

    /* packs */
    wait_packed(50, true);
    int to = usched__wk_pack_to(sched->wk[0]);
    printf("packs: CPU 0 contended and packed, CPU %d stands in; contend_packs %llu\n", to,
           (unsigned long long)stat_of("contend_packs"));
    ASSERT_GE(stat_of("contend_packs"), 1);
    ASSERT(to > 0 && to < ncpus);
    ASSERT(!usched__wk_contended(sched->wk[to]));
    ASSERT_EQ_U(atomic_load(&sched->pack.n), 1);
    for (int c = 1; c < ncpus; c++) ASSERT(!usched__wk_packed(sched->wk[c]));

    /* moved: CPU 0 parked (no new evidence: the verdict stands, C1) */
    uint64_t moved0 = stat_of("contend_pack_moved"), packs0 = stat_of("contend_packs");
    for (int i = 0; i < NFIB; i++) ASSERT_OK(usched_spawn(sched, NULL, sleepy, NULL));
    ASSERT_OK(usched_wait(sched));
    int nruns = atomic_load(&runs), ncpu0 = atomic_load(&on_cpu0);
    uint64_t repacks = stat_of("contend_packs") - packs0;
    printf("moved: %d runs of %d fibers, %d on CPU 0; contend_pack_moved +%llu, contend_pack_skips %llu, "
           "contend_packs +%llu\n", nruns, NFIB, ncpu0, (unsigned long long)(stat_of("contend_pack_moved") - moved0),
           (unsigned long long)stat_of("contend_pack_skips"), (unsigned long long)repacks);
    ASSERT(packed0());
    ASSERT_EQ(nruns, NFIB * (NSLEEPS + 1));
    /* Packed throughout (a slow build, ThreadSanitizer's, can fill the
     * other CPUs for a moment: unpacked, CPU 0 rightly took work) */
    if (repacks == 0)
        ASSERT_EQ(ncpu0, 0);
    else
        printf("moved: CPU 0 was unpacked and packed again meanwhile: its runs are not judged\n");

    /* bound */
    ASSERT_OK(usched_spawn_on(sched, NULL, 0, bound_fn, NULL));
    ASSERT_OK(usched_wait(sched));
    printf("bound: a fiber bound to CPU 0 ran on CPU %d\n", atomic_load(&bound_cpu));
    ASSERT_EQ(atomic_load(&bound_cpu), 0);

    /* room: every other CPU computes; CPU 0's verdict stands (it sleeps) */
    for (int c = 1; c < ncpus; c++) ASSERT_OK(usched_spawn_on(sched, NULL, c, hog, NULL));
    double end = test_now() + BOUND_S;
    while ((atomic_load(&hogs_up) < ncpus - 1 || packed0()) && test_now() < end) usleep(1000);
    ASSERT(!packed0());
    ASSERT(usched__wk_contended(sched->wk[0]));
    ASSERT_OK(usched_spawn(sched, NULL, free_fn, NULL));
    for (end = test_now() + BOUND_S; atomic_load(&free_cpu) < 0 && test_now() < end;) usleep(1000);
    printf("room: %d CPUs computing, CPU 0 unpacked; a fiber spawned then ran on CPU %d\n", ncpus - 1,
           atomic_load(&free_cpu));
    ASSERT_GE(atomic_load(&free_cpu), 0);
    atomic_store(&hog_stop, 1);
    ASSERT_OK(usched_wait(sched));

    /* off: packed again first (the work is light again), then the knob */
    wait_packed(50, true);
    ASSERT_OK(usched_set(sched, "knobs", "contend_pack=0"));
    wait_packed(50, false);
    uint64_t packs = stat_of("contend_packs");
    atomic_store(&ticking, 1);
    ASSERT_OK(usched_spawn_on(sched, NULL, ncpus - 1, ticker, NULL));
    for (int i = 0; i < 40; i++) feed(50); /* 20 ms, 20 looks or more: packing would have come back */
    atomic_store(&ticking, 0);
    ASSERT_OK(usched_wait(sched));
    printf("off: contend_pack=0, CPU 0 contended %d, packed %d; contend_packs %llu -> %llu\n",
           usched__wk_contended(sched->wk[0]), packed0(), (unsigned long long)packs,
           (unsigned long long)stat_of("contend_packs"));
    ASSERT(usched__wk_contended(sched->wk[0]));
    ASSERT(!packed0());
    ASSERT_EQ_U(stat_of("contend_packs"), packs);
    ASSERT_OK(usched_set(sched, "knobs", "contend_pack=1"));

    /* end */
    wait_packed(50, true);
    wait_packed(0, false);
    printf("end: CPU 0 contended %d, packed %d\n", usched__wk_contended(sched->wk[0]), packed0());
    ASSERT(!usched__wk_contended(sched->wk[0]));
    ASSERT_EQ_U(atomic_load(&sched->pack.n), 0);

    ASSERT_OK(usched_destroy(sched));
    fake_ss_remove(&ss, ncpus);
    printf("ok\n");
    return 0;
}
