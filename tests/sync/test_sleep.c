/*
 * Sleep and timers, on the topology given as argv[1] (absent: this machine):
 *  - accuracy: many fibers sleep 50 us .. 5 ms; none wakes early; the
 *    lateness histogram is printed (a report, not an assertion);
 *  - ordering: sleepers on one CPU wake in deadline order (asserted for
 *    deadlines at least ORDER_MARGIN_NS apart: the test reads the clock a
 *    moment before the scheduler does, and a preemption in between moves the
 *    scheduler's deadline later than the recorded one);
 *  - 10,000 fibers sleeping at once all wake;
 *  - an idle scheduler with a pending timer uses (almost) no CPU: the CPU
 *    time over a 1 s sleep is printed and bounded generously (< 0.3 s);
 *  - outside threads sleep with nanosleep.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/resource.h>

#include "sync_test.h"

static usched_t *sched;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- accuracy ------------------------------------------------------------------ */

static const uint64_t bucket_us[] = {10, 20, 50, 100, 200, 500, 1000, 5000, UINT64_MAX};
enum { NBUCKETS = sizeof bucket_us / sizeof bucket_us[0] };
static _Atomic long hist[NBUCKETS];
static _Atomic long sleeps_done;
static _Atomic uint64_t worst_late_ns;

static void record_late(uint64_t late)
{
    int b = 0;
    while (late >= bucket_us[b] * 1000) b++;
    atomic_fetch_add(&hist[b], 1);
    uint64_t w = atomic_load(&worst_late_ns);
    while (late > w && !atomic_compare_exchange_weak(&worst_late_ns, &w, late)) {
    }
}

static void sleeper(void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg * 2654435761u + 1;
    for (int i = 0; i < 5; i++) {
        seed = seed * 1103515245u + 12345u;
        uint64_t d = 50000 + (seed >> 8) % 4950000; /* 50 us .. 5 ms */
        uint64_t t0 = now_ns();
        ASSERT_OK(usched_sleep_ns(d));
        uint64_t dt = now_ns() - t0;
        ASSERT_GE(dt, d); /* never early */
        record_late(dt - d);
        atomic_fetch_add(&sleeps_done, 1);
    }
}

static void test_accuracy(void)
{
    long n = test_scale(2000) < 200 ? 200 : test_scale(2000);
    for (int b = 0; b < NBUCKETS; b++) atomic_store(&hist[b], 0);
    atomic_store(&sleeps_done, 0);
    atomic_store(&worst_late_ns, 0);
    for (long i = 0; i < n; i++) ASSERT_OK(usched_spawn(sched, NULL, sleeper, (void *)i));
    ASSERT_OK(usched_wait(sched));
    ASSERT_EQ(atomic_load(&sleeps_done), n * 5);
    printf("  sleep accuracy, %ld sleeps of 50 us .. 5 ms (lateness histogram):\n", n * 5);
    uint64_t lo = 0;
    for (int b = 0; b < NBUCKETS; b++) {
        if (bucket_us[b] == UINT64_MAX)
            printf("    >= %5llu us : %ld\n", (unsigned long long)lo, atomic_load(&hist[b]));
        else
            printf("    %5llu .. %5llu us : %ld\n", (unsigned long long)lo,
                   (unsigned long long)bucket_us[b], atomic_load(&hist[b]));
        lo = bucket_us[b];
    }
    printf("    worst: %.1f us\n", (double)atomic_load(&worst_late_ns) / 1000.0);
}

/* ---- ordering ------------------------------------------------------------------ */

enum { NORDER = 20 };
/* Every sleeper sleeps until an absolute deadline, ORDER_STEP_NS apart and
 * all at least ORDER_LEAD_NS after the spawns (so that a sleeper started
 * late by a loaded machine still has its deadline ahead: the deadlines do
 * not drift with the start times). The order is asserted for pairs at least
 * ORDER_MARGIN_NS apart, which a preemption shorter than the margin between
 * the test's clock read and the scheduler's cannot flip; a sleeper that
 * started after its deadline is left out (and counted). */
#define ORDER_STEP_NS 5000000ull
#define ORDER_MARGIN_NS 20000000ull
#define ORDER_LEAD_NS 200000000ull
static uint64_t order_deadline[NORDER];
static int order_seq[NORDER];
static bool order_late[NORDER];
static _Atomic int order_next;

static void order_sleeper(void *arg)
{
    long i = (long)arg;
    /* The wake-up and its record are one step: a preemption between them
     * (docs/preempt.md; a worker the kernel kept off its CPU looks like a
     * long run) would let a later sleeper record first. */
    ASSERT_EQ(usched_preempt_off(), 1);
    uint64_t now = now_ns();
    order_late[i] = now >= order_deadline[i];
    ASSERT_OK(usched_sleep_ns(order_late[i] ? 0 : order_deadline[i] - now));
    order_seq[i] = atomic_fetch_add(&order_next, 1);
    ASSERT_EQ(usched_preempt_on(), 0);
}

static void test_ordering(void)
{
    atomic_store(&order_next, 0);
    usched_task_t *t[NORDER];
    uint64_t base = now_ns() + ORDER_LEAD_NS;
    for (long i = 0; i < NORDER; i++) /* later spawns wake earlier */
        order_deadline[i] = base + (uint64_t)(NORDER - i) * ORDER_STEP_NS;
    for (long i = 0; i < NORDER; i++) ASSERT_OK(usched_spawn_on(sched, &t[i], 0, order_sleeper, (void *)i));
    for (int i = 0; i < NORDER; i++) ASSERT_OK(usched_join(t[i]));
    int pairs = 0, late = 0;
    for (int a = 0; a < NORDER; a++) late += order_late[a];
    for (int a = 0; a < NORDER; a++)
        for (int b = 0; b < NORDER; b++)
            if (!order_late[a] && !order_late[b] && order_deadline[a] + ORDER_MARGIN_NS <= order_deadline[b]) {
                if (order_seq[a] >= order_seq[b])
                    TEST_FAIL_("sleeper %d (deadline %.1f ms before sleeper %d's) woke %s it", a,
                               (double)(order_deadline[b] - order_deadline[a]) / 1e6, b,
                               order_seq[a] == order_seq[b] ? "with" : "after");
                pairs++;
            }
    if (late) printf("  ordering: %d sleepers started after their deadline (loaded machine), left out\n", late);
    ASSERT_GT(pairs, 0);
    printf("  ordering: %d sleepers on CPU 0 woke in deadline order (%d pairs >= %llu ms apart checked)\n",
           NORDER, pairs, ORDER_MARGIN_NS / 1000000);
}

/* ---- many sleepers ----------------------------------------------------------- */

static _Atomic long many_woke;

static void many_sleeper(void *arg)
{
    uint64_t d = 1000 * (1 + (uint64_t)(uintptr_t)arg % 10000); /* 1 us .. 10 ms */
    uint64_t t0 = now_ns();
    ASSERT_OK(usched_sleep_ns(d));
    ASSERT_GE(now_ns() - t0, d);
    atomic_fetch_add(&many_woke, 1);
}

static void test_many(void)
{
    long n = test_scale(10000);
    atomic_store(&many_woke, 0);
    for (long i = 0; i < n; i++) ASSERT_OK(usched_spawn(sched, NULL, many_sleeper, (void *)(i * 7919)));
    ASSERT_OK(usched_wait(sched));
    ASSERT_EQ(atomic_load(&many_woke), n);
    printf("  %ld fibers slept at once (1 us .. 10 ms), all woke, none early\n", n);
}

/* ---- an idle scheduler uses no CPU between timers ----------------------------- */

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static void long_sleeper(void *arg)
{
    (void)arg;
    ASSERT_OK(usched_sleep_ns(1000000000ull));
}

static void test_idle_cpu(void)
{
    usched_task_t *t;
    double c0 = cpu_seconds(), w0 = test_now();
    ASSERT_OK(usched_spawn(sched, &t, long_sleeper, NULL));
    ASSERT_OK(usched_join(t));
    double cpu = cpu_seconds() - c0, wall = test_now() - w0;
    printf("  idle with one 1 s timer: %.3f s CPU over %.3f s wall (%d workers)\n", cpu, wall,
           usched_ncpus(sched));
    ASSERT_GE(wall, 1.0);
    ASSERT(cpu < 0.3);
}

/* ---- outside threads ------------------------------------------------------------ */

static void *thread_sleeper(void *arg)
{
    (void)arg;
    uint64_t t0 = now_ns();
    ASSERT_OK(usched_sleep_ns(2000000));
    ASSERT_GE(now_ns() - t0, 2000000);
    ASSERT_OK(usched_sleep_ns(0));
    return NULL;
}

static void test_outside(void)
{
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, thread_sleeper, NULL), 0);
    pthread_join(th, NULL);
    printf("  outside thread: usched_sleep_ns is nanosleep\n");
}

int main(int argc, char **argv)
{
    const char *topo = argc > 1 ? argv[1] : NULL;
    sched = sync_test_start(topo);
    printf("topology %s: %d CPUs\n", topo ? topo : "(this machine)", usched_ncpus(sched));
    test_outside();
    test_ordering();
    test_accuracy();
    test_many();
    test_idle_cpu();
    ASSERT_OK(usched_destroy(sched));
    printf("ok\n");
    return 0;
}
