/*
 * The offload pool: 8 fibers each offloading a 200 ms blocking call run
 * them in parallel (the pool grows on demand), a fiber on the same CPU keeps
 * running meanwhile, offloaded calls never run on a worker thread, the
 * offload_max knob bounds the pool, and idle threads exit after
 * offload_idle_ms. Then the shrink race: with offload_idle_ms=1 and a job
 * about every millisecond, an idle thread times out about when the next job
 * is announced; it must never leave that job without a thread (a watchdog
 * fails the test instead of a hang). The same window made certain: a
 * policy's `stopping` callback, which runs between the announcement and the
 * queuing of the job, waits there until the idle thread has had time to
 * time out. Last, an injected failure of each
 * allocation the pool makes gives a clean error or a job run anyway.
 */
#include <time.h>

#include "base/fault.h"
#include "usched/policy.h"
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

static void noop(void *arg)
{
    (void)arg;
}

/* Jobs one after another, about 1 ms apart (0.8 to 1.2 ms in 10 us steps,
 * so that the gap sweeps across the pool threads' 1 ms idle timeout). */
#define RACE_LOOPS 4
static _Atomic long race_jobs;

static void race_loop(void *arg)
{
    long n = (long)(intptr_t)arg;
    for (long i = 0; i < n; i++) {
        ASSERT_OK(usched_offload(noop, NULL));
        atomic_fetch_add(&race_jobs, 1);
        ASSERT_OK(usched_sleep_ns(800000 + (uint64_t)(i % 41) * 10000));
    }
}

static void shrink_race(void)
{
    ASSERT_OK(usched_set(s, "knobs", "offload_idle_ms=1,offload_max=64"));
    long n = test_scale(2000);
    atomic_store(&race_jobs, 0);
    struct io_watchdog wd;
    io_watchdog_start(&wd, &race_jobs, 10, "offload shrink race", s);
    usched_task_t *t[RACE_LOOPS];
    for (int i = 0; i < RACE_LOOPS; i++)
        ASSERT_OK(usched_spawn_on(s, &t[i], i % usched_ncpus(s), race_loop, (void *)(intptr_t)n));
    for (int i = 0; i < RACE_LOOPS; i++) ASSERT_OK(usched_join(t[i]));
    io_watchdog_stop(&wd);
    ASSERT_EQ(atomic_load(&race_jobs), RACE_LOOPS * n);
    printf("shrink race: %d x %ld jobs 1 ms apart with offload_idle_ms=1, none lost\n", RACE_LOOPS, n);
}

/* The window held open. The fiber sets slow_submit just before it offloads;
 * the policy's stopping callback for that block (on the fiber's worker,
 * after the job was announced and before it is queued) waits until the pool
 * has no thread left, or 25 idle timeouts. */
static _Atomic int slow_submit;

static void slow_stopping(usched_pol_ctx_t *ctx, const struct usched_cpu_event *ev)
{
    (void)ctx;
    if ((ev->flags & USCHED_EV_RUNNABLE) || !atomic_exchange(&slow_submit, 0)) return;
    for (int ms = 0; ms < 25 * 20 && usched__offload_threads() > 0; ms++) usleep(1000);
}

static const struct usched_ops slow_submit_ops = {
    .name = "test_slow_submit",
    .brief = "the core's placement; a block's stopping waits for the offload pool to shrink",
    .stopping = slow_stopping,
};

static void window_loop(void *arg)
{
    long n = (long)(intptr_t)arg;
    for (long i = 0; i < n; i++) {
        ASSERT_OK(usched_offload(noop, NULL)); /* the pool has a thread, now idle */
        atomic_store(&slow_submit, 1);
        ASSERT_OK(usched_offload(noop, NULL)); /* announced to the idle thread */
        atomic_fetch_add(&race_jobs, 1);
    }
}

static void shrink_window(void)
{
    usched_t *s2;
    ASSERT_OK(usched_policy_register(&slow_submit_ops));
    ASSERT_OK(usched_create(&s2));
    ASSERT_OK(usched_set(s2, "policy", "test_slow_submit"));
    ASSERT_OK(usched_set(s2, "topology", "pack:1 core:1 pu:1"));
    ASSERT_OK(usched_set(s2, "knobs", "offload_idle_ms=20"));
    ASSERT_OK(usched_start(s2));
    long n = 5;
    atomic_store(&race_jobs, 0);
    struct io_watchdog wd;
    io_watchdog_start(&wd, &race_jobs, 10, "offload shrink window", s2);
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s2, &t, window_loop, (void *)(intptr_t)n));
    ASSERT_OK(usched_join(t));
    io_watchdog_stop(&wd);
    ASSERT_EQ(atomic_load(&race_jobs), n);
    ASSERT_OK(usched_destroy(s2));
    printf("shrink window: %ld jobs announced to a thread about to time out, none lost\n", n);
}

/* Allocation failure: the pool's one allocation is a new thread (its stack). */
static _Atomic int holding;
static int fault_rc = 1;

static _Atomic long hold_until_injected; /* hold returns once this many failures were injected */

static void hold(void *arg)
{
    (void)arg;
    atomic_store(&holding, 1);
    while (usched__fault_injected() < atomic_load(&hold_until_injected)) usleep(1000);
}

static void holder(void *arg)
{
    (void)arg;
    ASSERT_OK(usched_offload(hold, NULL));
}

static void fault_offloader(void *arg)
{
    (void)arg;
    usched__fault_arm(1);
    fault_rc = usched_offload(noop, NULL);
    long pending = usched__fault_pending();
    usched__fault_arm(0);
    ASSERT_EQ(pending, 0); /* the failure was injected inside the offload */
}

static int offload_with_fault(void)
{
    usched_task_t *t;
    fault_rc = 1;
    ASSERT_OK(usched_spawn_on(s, &t, 0, fault_offloader, NULL));
    ASSERT_OK(usched_join(t));
    return fault_rc;
}

static void fault_injection(void)
{
    /* No pool thread, and none can be made: a clean -ENOMEM. */
    ASSERT_OK(usched_set(s, "knobs", "offload_idle_ms=1"));
    for (int i = 0; i < 30000 && usched__offload_threads() > 0; i++) usleep(1000);
    ASSERT_EQ(usched__offload_threads(), 0);
    long injected = usched__fault_injected();
    ASSERT_EQ(offload_with_fault(), -ENOMEM);
    ASSERT_EQ(usched__fault_injected(), injected + 1);
    ASSERT_EQ(usched__offload_threads(), 0);

    /* One thread busy (until the failure below is injected), a new one
     * cannot be made: the job waits for the busy one and runs (0), never
     * lost. */
    ASSERT_OK(usched_set(s, "knobs", "offload_idle_ms=10000"));
    atomic_store(&hold_until_injected, injected + 2);
    usched_task_t *h;
    ASSERT_OK(usched_spawn_on(s, &h, 0, holder, NULL));
    for (int i = 0; i < 30000 && !atomic_load(&holding); i++) usleep(1000);
    ASSERT_EQ(atomic_load(&holding), 1);
    ASSERT_EQ(usched__offload_threads(), 1);
    ASSERT_EQ(offload_with_fault(), 0);
    ASSERT_EQ(usched__fault_injected(), injected + 2);
    ASSERT_OK(usched_join(h));

    /* And the pool works again afterwards. */
    struct job j = {0};
    usched_task_t *t;
    ASSERT_OK(usched_spawn_on(s, &t, 0, offloader, &j));
    ASSERT_OK(usched_join(t));
    printf("fault injection: -ENOMEM without a thread, the job run with one\n");
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

    /* Idle threads exit (maxflight showed they were there; under load they
     * may have gone before this line). */
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
    atomic_store(&ticking, 0);

    shrink_race();
    fault_injection();
    ASSERT_OK(usched_destroy(s));
    shrink_window();
    printf("ok\n");
    return 0;
}
