/*
 * Core micro-benchmarks (numbers, not tests):
 *   yield       two fibers bound to CPU 0 yielding to each other: ns per switch
 *   spawn       spawn+join of empty fibers from a fiber, batches of 1000: ns each
 *   spawn1      spawn one, join it, repeat: ns per spawn+join
 *   remote      a fiber on CPU 0 spawns a fiber bound to CPU 1 and joins it:
 *               ns per cross-CPU round trip (wake there, wake back)
 * Usage: bench_core [yield|spawn|spawn1|remote|all] [iterations]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "usched.h"

/* Every call is checked: a failed spawn or join would time nothing. */
#define CHECK(call)                                                                         \
    do {                                                                                    \
        int rc_ = (call);                                                                   \
        if (rc_ < 0) {                                                                      \
            fprintf(stderr, "bench_core: %s: %s (%s)\n", #call, usched_strerror(rc_),        \
                    usched_last_error());                                                   \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

static usched_t *s;
static long iters;
static double result_ns;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void yielder(void *arg)
{
    (void)arg;
    for (long i = 0; i < iters; i++) usched_yield();
}

static void nop(void *arg)
{
    (void)arg;
}

static void spawn_batches(void *arg)
{
    (void)arg;
    usched_task_t *t[1000];
    double t0 = now();
    for (long done = 0; done < iters; done += 1000) {
        for (int i = 0; i < 1000; i++) CHECK(usched_spawn(s, &t[i], nop, NULL));
        for (int i = 0; i < 1000; i++) CHECK(usched_join(t[i]));
    }
    result_ns = (now() - t0) / (double)iters;
}

static void spawn_one(void *arg)
{
    (void)arg;
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        usched_task_t *t;
        CHECK(usched_spawn(s, &t, nop, NULL));
        CHECK(usched_join(t));
    }
    result_ns = (now() - t0) / (double)iters;
}

static void remote(void *arg)
{
    (void)arg;
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        usched_task_t *t;
        CHECK(usched_spawn_on(s, &t, 1, nop, NULL));
        CHECK(usched_join(t));
    }
    result_ns = (now() - t0) / (double)iters;
}

static void run(const char *name, long n)
{
    iters = n;
    CHECK(usched_create(&s));
    CHECK(usched_start(s));
    double t0 = now();
    if (strcmp(name, "yield") == 0) {
        usched_task_t *a, *b;
        CHECK(usched_spawn_on(s, &a, 0, yielder, NULL));
        CHECK(usched_spawn_on(s, &b, 0, yielder, NULL));
        CHECK(usched_join(a));
        CHECK(usched_join(b));
        result_ns = (now() - t0) / (double)(2 * n);
        printf("yield: %.1f ns per switch (%ld yields x 2 fibers on CPU 0)\n", result_ns, n);
    } else {
        void (*fn)(void *) = strcmp(name, "spawn") == 0 ? spawn_batches
                             : strcmp(name, "spawn1") == 0 ? spawn_one : remote;
        if (fn == remote && usched_ncpus(s) < 2) {
            printf("remote: skipped (1 CPU)\n");
        } else {
            usched_task_t *t;
            CHECK(usched_spawn_on(s, &t, 0, fn, NULL));
            CHECK(usched_join(t));
            printf("%s: %.1f ns per %s (%ld iterations)\n", name, result_ns,
                   fn == remote ? "cross-CPU round trip" : "spawn+join", n);
        }
    }
    if (getenv("BENCH_STATS")) CHECK(usched_stats_print(s, stdout));
    CHECK(usched_destroy(s));
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    long n = argc > 2 ? atol(argv[2]) : 0;
    if (argc > 3 || (argc > 2 && n <= 0)) {
        fprintf(stderr, "usage: bench_core [yield|spawn|spawn1|remote|all] [iterations > 0]\n");
        return 2;
    }
    static const struct { const char *name; long n; } all[] = {
        {"yield", 10000000}, {"spawn", 2000000}, {"spawn1", 2000000}, {"remote", 20000}};
    int ran = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(what, "all") == 0 || strcmp(what, all[i].name) == 0) {
            run(all[i].name, n ? n : all[i].n);
            ran++;
        }
    if (!ran) {
        fprintf(stderr, "bench_core: unknown benchmark '%s' (yield, spawn, spawn1, remote or all)\n", what);
        return 2;
    }
    return 0;
}
