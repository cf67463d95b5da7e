/*
 * The busy-victim rule (src/core/steal.c, V6-V7; docs/design.md): a
 * contended thief whose own epoll set has fibers waiting leaves the short
 * queue of a victim that runs a fiber to that victim, and parks; it never
 * leaves a victim the monitor saw stalled. Two workers (a virtual topology
 * unless one is given), io_poller=percpu, and contention verdicts read from
 * fake schedstat lines: CPU 1 contended, CPU 0 not. No packing and no
 * widening of affinities (contend_pack=0, contend_pin=0), so CPU 1 steals
 * as any CPU would but for the rule. The default policy, which queues a
 * spawn on its spawner's CPU, under every policy's rerun as well. No
 * preemption (preempt_us=0, also where USCHED_KNOBS sets it): the victim
 * must hold its CPU without a scheduling point, as a stall does.
 *
 *   setup    a fiber bound to CPU 1 reads a pipe that nobody writes until
 *            the end: the descriptor's home is CPU 1, whose set has a waiter;
 *   left     stall_us 10 s: a fiber on CPU 0 spawns two children and then
 *            computes for 30 ms without a scheduling point. Both children
 *            run on CPU 0 after it; CPU 1, woken by the spawns, left them
 *            (steal_left_busy). Without V6 CPU 1 steals at least one;
 *   stalled  stall_us 2 ms: the same fiber computes until both children
 *            ran. The monitor sees CPU 0 stalled and wakes CPU 1, which
 *            now steals them: they run on CPU 1. Without V7 it left them
 *            again at each wake-up and they waited for the fiber, which
 *            waited for them until the bound (20 s) failed the test.
 * Every wait is bounded (20 s, which no correct run reaches); nothing
 * asserts a time.
 *
 * Usage: core_busyleft [topology]   (default: pack:1 l3:1 core:2 pu:1)
 */
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "core/core.h"
#include "core/park.h"
#include "fake_schedstat.h"
#include "test.h"
#include "usched.h"

#define BOUND_S 20.0
#define NCHILD 2

static usched_t *sched;
static struct fake_ss ss;
static int pipefd[2];

static uint64_t stat_of(const char *name)
{
    uint64_t v = 0;
    ASSERT_OK(usched_stat(sched, name, &v));
    return v;
}

static void reader(void *arg)
{
    (void)arg;
    char c;
    ASSERT_EQ(usched_read(pipefd[0], &c, 1, USCHED_FOREVER), 1);
}

/* Keeps CPU 1 awake while the test feeds (the monitor sleeps while every
 * worker is parked, M1-M3). */
static _Atomic int feeding;
static void awake(void *arg)
{
    (void)arg;
    while (atomic_load(&feeding)) usched_yield();
}

static _Atomic int ran, ran_on[2];
static void child(void *arg)
{
    (void)arg;
    int c = usched_self_cpu();
    ASSERT(c == 0 || c == 1);
    atomic_fetch_add(&ran_on[c], 1);
    atomic_fetch_add(&ran, 1);
}

/* Spawns the children onto its own CPU's queues, then computes without a
 * scheduling point: for compute_ms, or (0) until every child ran. */
static void victim(void *arg)
{
    long compute_ms = (long)(intptr_t)arg;
    for (int i = 0; i < NCHILD; i++) ASSERT_OK(usched_spawn(sched, NULL, child, NULL));
    double end = test_now() + (compute_ms ? compute_ms / 1000.0 : BOUND_S);
    while (test_now() < end && (compute_ms || atomic_load(&ran) < NCHILD)) {
    }
    if (!compute_ms) ASSERT_EQ(atomic_load(&ran), NCHILD);
}

static void run_victim(long compute_ms)
{
    atomic_store(&ran, 0);
    atomic_store(&ran_on[0], 0);
    atomic_store(&ran_on[1], 0);
    usched_task_t *t;
    ASSERT_OK(usched_spawn_on(sched, &t, 0, victim, (void *)(intptr_t)compute_ms));
    ASSERT_OK(usched_join(t));
    double end = test_now() + BOUND_S;
    while (atomic_load(&ran) < NCHILD && test_now() < end) usleep(1000);
    ASSERT_EQ(atomic_load(&ran), NCHILD);
}

int main(int argc, char **argv)
{
    fake_ss_init(&ss, "busyleft");
    ASSERT_EQ(pipe(pipefd), 0);
    ASSERT_OK(usched_create(&sched));
    ASSERT_OK(usched_set(sched, "topology", argc > 1 ? argv[1] : "pack:1 l3:1 core:2 pu:1"));
    /* the default policy, under every policy's rerun too: it queues a spawn
     * on its spawner's CPU (others place it on an idle CPU or the shared
     * queue, where no victim holds it) */
    ASSERT_OK(usched_set(sched, "policy", "usched"));
    ASSERT_OK(usched_set(sched, "knobs",
                         "io_poller=percpu,stall_us=10000000,contend_pct=30,contend_pin=0,contend_pack=0,"
                         "preempt_us=0"));
    sched->cfg.schedstat_dir = ss.dir;
    ASSERT_OK(usched_start(sched));
    if (usched_ncpus(sched) != 2) {
        printf("skipped: %d CPUs (the test needs 2)\n", usched_ncpus(sched));
        usched_destroy(sched);
        fake_ss_remove(&ss, 0);
        return 77;
    }

    /* CPU 1 contended, CPU 0 not; the verdict stands once the lines stop
     * moving (too little new evidence). */
    int pct[2] = {0, 50};
    atomic_store(&feeding, 1);
    ASSERT_OK(usched_spawn_on(sched, NULL, 1, awake, NULL));
    double end = test_now() + BOUND_S;
    while (!(usched__wk_contended(sched->wk[1]) && !usched__wk_contended(sched->wk[0])) && test_now() < end)
        fake_ss_feed(&ss, 2, pct);
    atomic_store(&feeding, 0);
    ASSERT_OK(usched_wait(sched));
    ASSERT(usched__wk_contended(sched->wk[1]));
    ASSERT(!usched__wk_contended(sched->wk[0]));

    /* setup */
    ASSERT_OK(usched_spawn_on(sched, NULL, 1, reader, NULL));
    end = test_now() + BOUND_S;
    while (!usched__park_io_own_waiters(sched->wk[1]) && test_now() < end) usleep(1000);
    ASSERT(usched__park_io_own_waiters(sched->wk[1]));

    /* left */
    uint64_t left0 = stat_of("steal_left_busy"), stolen0 = stat_of("stolen_fibers");
    run_victim(30);
    printf("left: children on CPU 0 %d, on CPU 1 %d; steal_left_busy +%llu, stolen_fibers +%llu\n",
           atomic_load(&ran_on[0]), atomic_load(&ran_on[1]),
           (unsigned long long)(stat_of("steal_left_busy") - left0),
           (unsigned long long)(stat_of("stolen_fibers") - stolen0));
    ASSERT(usched__wk_contended(sched->wk[1]));
    ASSERT_EQ(atomic_load(&ran_on[0]), NCHILD);
    ASSERT_GE(stat_of("steal_left_busy") - left0, 1);

    /* stalled */
    ASSERT_OK(usched_set(sched, "knobs", "stall_us=2000"));
    uint64_t stalls0 = stat_of("stalls");
    run_victim(0);
    printf("stalled: children on CPU 0 %d, on CPU 1 %d; stalls +%llu\n", atomic_load(&ran_on[0]),
           atomic_load(&ran_on[1]), (unsigned long long)(stat_of("stalls") - stalls0));
    ASSERT_EQ(atomic_load(&ran_on[1]), NCHILD);
    ASSERT_GE(stat_of("stalls") - stalls0, 1);

    ASSERT_EQ(write(pipefd[1], "x", 1), 1);
    ASSERT_OK(usched_wait(sched));
    ASSERT_OK(usched_destroy(sched));
    close(pipefd[0]);
    close(pipefd[1]);
    fake_ss_remove(&ss, 2);
    printf("ok\n");
    return 0;
}
