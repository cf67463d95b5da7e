/*
 * The offload pool: 8 fibers each offloading a 200 ms blocking call run
 * them in parallel (the pool grows on demand), a fiber on the same CPU keeps
 * running meanwhile, offloaded calls never run on a worker thread, the
 * offload_max knob bounds the pool, and idle threads exit after
 * offload_idle_ms.
 */
#include <time.h>

#include "io/io_impl.h"
#include "io_test.h"

static usched_t *s;
static _Atomic int inflight, maxflight;
static _Atomic long ticks;
static _Atomic int stop, ticking;

struct job {
    long ticks_before, ticks_after;
    int on_worker;
};

static void blocking_call(void *arg)
{
    struct job *j = arg;
    j->on_worker = usched_self() != NULL || usched_self_cpu() != -1;
    int n = atomic_fetch_add(&inflight, 1) + 1;
    for (int m = atomic_load(&maxflight); n > m && !atomic_compare_exchange_weak(&maxflight, &m, n);) {
    }
    j->ticks_before = atomic_load(&ticks);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL); /* blocks this thread, as a slow disk or DNS would */
    /* On a heavily loaded machine CPU 0's worker may not have had the CPU in
     * those 200 ms: wait up to 10 s more for a tick. A worker blocked in
     * this call never ticks, so the check below still fails then. */
    ts.tv_nsec = 1000 * 1000;
    for (int ms = 0; ms < 10000 && atomic_load(&ticking) && atomic_load(&ticks) == j->ticks_before; ms++)
        nanosleep(&ts, NULL);
    j->ticks_after = atomic_load(&ticks);
    atomic_fetch_sub(&inflight, 1);
}

static void offloader(void *arg)
{
    ASSERT_OK(usched_offload(blocking_call, arg));
}

static void ticker(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        atomic_fetch_add(&ticks, 1);
        usched_yield();
        usched_sleep_ns(100000);
    }
}

static double burst(int n, struct job *jobs)
{
    atomic_store(&maxflight, 0);
    usched_task_t *t[8];
    double t0 = test_now();
    for (int i = 0; i < n; i++) ASSERT_OK(usched_spawn_on(s, &t[i], 0, offloader, &jobs[i]));
    for (int i = 0; i < n; i++) ASSERT_OK(usched_join(t[i]));
    return test_now() - t0;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    ASSERT_EQ(usched_offload(NULL, NULL), -EINVAL);
    /* Outside a fiber: runs right here. */
    struct job j0 = {0};
    ASSERT_OK(usched_offload(blocking_call, &j0));

    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "knobs", "offload_idle_ms=100"));
    ASSERT_OK(usched_start(s));
    usched_task_t *tk;
    atomic_store(&ticking, 1);
    ASSERT_OK(usched_spawn_on(s, &tk, 0, ticker, NULL)); /* same CPU as the offloaders */

    struct job jobs[8] = {{0}};
    double dt = burst(8, jobs);
    printf("8 x 200 ms offloaded: %.0f ms, up to %d at once\n", dt * 1e3, atomic_load(&maxflight));
    ASSERT_GE(atomic_load(&maxflight), 2); /* in parallel, not one after another */
    for (int i = 0; i < 8; i++) {
        ASSERT_EQ(jobs[i].on_worker, 0);
        ASSERT_GT(jobs[i].ticks_after, jobs[i].ticks_before); /* CPU 0 kept running its ticker */
    }
    ASSERT_EQ(io_stat(s, "offloads"), 8);

    /* Idle threads exit. */
    ASSERT_GT(usched__offload_threads(), 0);
    for (int i = 0; i < 500 && usched__offload_threads() > 0; i++) usleep(10000);
    ASSERT_EQ(usched__offload_threads(), 0);

    /* The bound. */
    ASSERT_OK(usched_set(s, "knobs", "offload_max=2"));
    dt = burst(6, jobs);
    printf("6 x 200 ms with offload_max=2: %.0f ms, up to %d at once\n", dt * 1e3, atomic_load(&maxflight));
    ASSERT_LE(atomic_load(&maxflight), 2);
    ASSERT_LE(usched__offload_threads(), 2);

    atomic_store(&stop, 1);
    ASSERT_OK(usched_join(tk));
    ASSERT_OK(usched_destroy(s));
    printf("ok\n");
    return 0;
}
