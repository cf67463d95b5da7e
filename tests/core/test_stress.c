/*
 * Core stress, every item counted: 1,000,000 spawn+join; 1,000,000 fibers
 * alive at once (peak resident memory printed); 10,000 fibers x 100 yields;
 * spawning 5 levels deep; outside threads spawning concurrently; bound
 * fibers never running elsewhere. On the topology given as argv[1] (absent:
 * this machine).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

#include "test.h"
#include "usched.h"

static _Atomic long counter;
static usched_t *sched;

static void inc(void *arg)
{
    (void)arg;
    atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
}

/* 1. spawn+join from a fiber, in batches */
static void spawn_join_driver(void *arg)
{
    long n = (long)arg;
    usched_task_t *batch[1000];
    for (long done = 0; done < n;) {
        long k = n - done < 1000 ? n - done : 1000;
        for (long i = 0; i < k; i++) ASSERT_OK(usched_spawn(sched, &batch[i], inc, NULL));
        for (long i = 0; i < k; i++) ASSERT_OK(usched_join(batch[i]));
        done += k;
    }
}

/* 2. many fibers alive at once: each blocks until released */
static _Atomic long arrived;
static _Atomic int release_all;
static void parked_fiber(void *arg)
{
    (void)arg;
    atomic_fetch_add(&arrived, 1);
    while (!atomic_load_explicit(&release_all, memory_order_acquire)) usched_yield();
    atomic_fetch_add(&counter, 1);
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* 3. yields */
static void yielder(void *arg)
{
    long n = (long)arg;
    for (long i = 0; i < n; i++) usched_yield();
    atomic_fetch_add(&counter, n);
}

/* 4. nesting */
static void tree(void *arg)
{
    long depth = (long)arg;
    atomic_fetch_add(&counter, 1);
    if (!depth) return;
    usched_task_t *t[4];
    for (int i = 0; i < 4; i++) ASSERT_OK(usched_spawn(sched, &t[i], tree, (void *)(depth - 1)));
    for (int i = 0; i < 4; i++) ASSERT_OK(usched_join(t[i]));
}

/* 5. outside threads spawning concurrently */
static void *outside_spawner(void *arg)
{
    long n = (long)arg;
    for (long i = 0; i < n; i++) ASSERT_OK(usched_spawn(sched, NULL, inc, NULL));
    return NULL;
}

/* 6. bound fibers */
static _Atomic long bound_wrong;
static void bound_fn(void *arg)
{
    int cpu = (int)(long)arg;
    for (int i = 0; i < 20; i++) {
        if (usched_self_cpu() != cpu) atomic_fetch_add(&bound_wrong, 1);
        usched_yield();
    }
    atomic_fetch_add(&counter, 1);
}

int main(int argc, char **argv)
{
    const char *topo = argc > 1 ? argv[1] : NULL;
    ASSERT_OK(usched_create(&sched));
    if (topo) ASSERT_OK(usched_set(sched, "topology", topo));
    ASSERT_OK(usched_start(sched));
    int ncpus = usched_ncpus(sched);
    printf("topology %s: %d CPUs\n", topo ? topo : "(this machine)", ncpus);

    long n = test_scale(1000000);
    atomic_store(&counter, 0);
    double t0 = test_now();
    usched_task_t *d;
    ASSERT_OK(usched_spawn(sched, &d, spawn_join_driver, (void *)n));
    ASSERT_OK(usched_join(d));
    ASSERT_EQ(atomic_load(&counter), n);
    printf("spawn+join: %ld in %.3f s\n", n, test_now() - t0);

    long alive = test_cap_alive(test_scale(1000000));
    atomic_store(&counter, 0);
    atomic_store(&arrived, 0);
    atomic_store(&release_all, 0);
    long rss0 = peak_rss_kb();
    t0 = test_now();
    for (long i = 0; i < alive; i++) ASSERT_OK(usched_spawn(sched, NULL, parked_fiber, NULL));
    while (atomic_load(&arrived) < alive) usleep(1000);
    long rss1 = peak_rss_kb();
    printf("alive at once: %ld fibers, peak RSS %ld MiB (+%ld MiB, %.0f bytes per fiber), %.3f s\n",
           alive, rss1 / 1024, (rss1 - rss0) / 1024, (double)(rss1 - rss0) * 1024.0 / (double)alive,
           test_now() - t0);
    atomic_store(&release_all, 1);
    ASSERT_OK(usched_wait(sched));
    ASSERT_EQ(atomic_load(&counter), alive);

    long nf = test_scale(10000);
    atomic_store(&counter, 0);
    for (long i = 0; i < nf; i++) ASSERT_OK(usched_spawn(sched, NULL, yielder, (void *)100L));
    ASSERT_OK(usched_wait(sched));
    ASSERT_EQ(atomic_load(&counter), nf * 100);

    atomic_store(&counter, 0);
    usched_task_t *root;
    ASSERT_OK(usched_spawn(sched, &root, tree, (void *)5L));
    ASSERT_OK(usched_join(root));
    ASSERT_EQ(atomic_load(&counter), 1 + 4 + 16 + 64 + 256 + 1024);

    atomic_store(&counter, 0);
    enum { NTHREADS = 4 };
    pthread_t th[NTHREADS];
    long per = test_scale(50000);
    for (int i = 0; i < NTHREADS; i++) pthread_create(&th[i], NULL, outside_spawner, (void *)per);
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    ASSERT_OK(usched_wait(sched));
    ASSERT_EQ(atomic_load(&counter), NTHREADS * per);

    atomic_store(&counter, 0);
    long per_cpu = test_scale(200) / ncpus + 1;
    for (int c = 0; c < ncpus; c++)
        for (long k = 0; k < per_cpu; k++)
            ASSERT_OK(usched_spawn_on(sched, NULL, c, bound_fn, (void *)(long)c));
    ASSERT_OK(usched_wait(sched));
    ASSERT_EQ(atomic_load(&counter), ncpus * per_cpu);
    ASSERT_EQ(atomic_load(&bound_wrong), 0);

    ASSERT_OK(usched_stats_print(sched, stdout));
    ASSERT_OK(usched_destroy(sched));
    printf("ok\n");
    return 0;
}
