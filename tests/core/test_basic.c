/* Core runtime: spawn, join, yield, nesting, wait, bound fibers. */
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

#include "test.h"
#include "usched.h"

static _Atomic long counter;

static void inc(void *arg)
{
    (void)arg;
    atomic_fetch_add(&counter, 1);
}

static void yielder(void *arg)
{
    long n = (long)arg;
    for (long i = 0; i < n; i++) {
        usched_yield();
        atomic_fetch_add(&counter, 1);
    }
}

static void nested(void *arg)
{
    long depth = (long)arg;
    atomic_fetch_add(&counter, 1);
    if (depth == 0) return;
    usched_task_t *t[3];
    usched_t *s = usched_self();
    for (int i = 0; i < 3; i++) ASSERT_OK(usched_spawn(s, &t[i], nested, (void *)(depth - 1)));
    for (int i = 0; i < 3; i++) ASSERT_OK(usched_join(t[i]));
}

static _Atomic int bound_bad;
static void bound_fn(void *arg)
{
    int cpu = (int)(long)arg;
    for (int i = 0; i < 50; i++) {
        if (usched_self_cpu() != cpu) atomic_store(&bound_bad, 1);
        usched_yield();
    }
    atomic_fetch_add(&counter, 1);
}

static void run_suite(const char *topology)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    if (topology) ASSERT_OK(usched_set(s, "topology", topology));
    ASSERT_OK(usched_start(s));
    int ncpus = usched_ncpus(s);
    ASSERT_GT(ncpus, 0);

    /* spawn + join from outside */
    atomic_store(&counter, 0);
    long n = test_cap_alive(test_scale(20000)); /* all alive at once until the joins */
    usched_task_t **ts = calloc((size_t)n, sizeof *ts);
    for (long i = 0; i < n; i++) ASSERT_OK(usched_spawn(s, &ts[i], inc, NULL));
    for (long i = 0; i < n; i++) ASSERT_OK(usched_join(ts[i]));
    ASSERT_EQ(atomic_load(&counter), n);
    free(ts);

    /* detached + wait */
    atomic_store(&counter, 0);
    for (long i = 0; i < n; i++) ASSERT_OK(usched_spawn(s, NULL, inc, NULL));
    ASSERT_OK(usched_wait(s));
    ASSERT_EQ(atomic_load(&counter), n);

    /* yields */
    atomic_store(&counter, 0);
    long nf = test_scale(1000);
    for (long i = 0; i < nf; i++) ASSERT_OK(usched_spawn(s, NULL, yielder, (void *)100L));
    ASSERT_OK(usched_wait(s));
    ASSERT_EQ(atomic_load(&counter), nf * 100);

    /* nesting 5 levels: 1 + 3 + 9 + 27 + 81 + 243 */
    atomic_store(&counter, 0);
    usched_task_t *root;
    ASSERT_OK(usched_spawn(s, &root, nested, (void *)5L));
    ASSERT_OK(usched_join(root));
    ASSERT_EQ(atomic_load(&counter), 364);

    /* bound fibers never run elsewhere */
    atomic_store(&counter, 0);
    for (int c = 0; c < ncpus; c++)
        for (int k = 0; k < 4; k++) ASSERT_OK(usched_spawn_on(s, NULL, c, bound_fn, (void *)(long)c));
    ASSERT_OK(usched_wait(s));
    ASSERT_EQ(atomic_load(&counter), ncpus * 4);
    ASSERT_EQ(atomic_load(&bound_bad), 0);

    /* An idle scheduler uses no CPU after the spin window. */
    struct rusage r0, r1;
    usleep(100 * 1000);
    getrusage(RUSAGE_SELF, &r0);
    usleep(500 * 1000);
    getrusage(RUSAGE_SELF, &r1);
    double cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
                 (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) * 1e-6;
    printf("idle for 0.5 s: %.4f s of CPU used\n", cpu);
    ASSERT(cpu < 0.05);
    uint64_t parks;
    ASSERT_OK(usched_stat(s, "parks", &parks));
    ASSERT_GT(parks, 0);

    ASSERT_OK(usched_destroy(s));
}

int main(void)
{
    run_suite(NULL);
    run_suite("pack:2 l3:1 l2:6 core:1 pu:2");
    printf("ok\n");
    return 0;
}
