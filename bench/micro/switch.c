/*
 * Cost of one context switch: the raw arch switch between two contexts, and
 * the fiber switch (fctx, with whatever tool hooks the build has) in the
 * runtime's host -> fiber -> host pattern. Prints ns and counter ticks per
 * switch, best and median of several runs.
 *
 *   bench_switch [switches per run (default 2000000)] [runs (default 7)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "arch/arch.h"
#include "core/fctx.h"

enum { STACK = 64 << 10 };

static usched__ctx_t raw_host, raw_a, raw_b;
static usched__fctx_t f_host, f_fiber;
static long half; /* round trips per run */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void raw_a_entry(void *arg)
{
    (void)arg;
    for (;;) {
        for (long i = 0; i < half; i++)
            usched__ctx_switch(&raw_a, &raw_b);
        usched__ctx_switch(&raw_a, &raw_host);
    }
}

static void raw_b_entry(void *arg)
{
    (void)arg;
    for (;;)
        usched__ctx_switch(&raw_b, &raw_a);
}

static void fiber_entry(void *arg)
{
    (void)arg;
    usched__fctx_started(&f_fiber);
    for (;;)
        usched__fctx_switch(&f_fiber, &f_host);
}

static void *stack_new(void)
{
    void *p = mmap(NULL, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return p;
}

/* One run: 2 * half switches. */
static void run_raw(void)
{
    usched__ctx_switch(&raw_host, &raw_a);
}

static void run_fctx(void)
{
    for (long i = 0; i < half; i++)
        usched__fctx_switch(&f_host, &f_fiber);
}

static void time_runs(void (*run)(void), double *ns, double *ticks, int runs)
{
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        uint64_t c0 = usched__cycles();
        run();
        uint64_t c1 = usched__cycles();
        double t = now() - t0;
        ns[r] = t * 1e9 / (double)(2 * half);
        ticks[r] = (double)(c1 - c0) / (double)(2 * half);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *name, double *ns, double *ticks, int runs, long switches)
{
    qsort(ns, (size_t)runs, sizeof *ns, cmp_double);
    qsort(ticks, (size_t)runs, sizeof *ticks, cmp_double);
    printf("%-28s %6.2f ns/switch best, %6.2f median, %6.1f ticks best (%d runs x %ld switches)\n",
           name, ns[0], ns[runs / 2], ticks[0], runs, switches);
}

int main(int argc, char **argv)
{
    long switches = argc > 1 ? atol(argv[1]) : 2000000;
    int runs = argc > 2 ? atoi(argv[2]) : 7;
    if (switches < 2 || runs < 1 || runs > 100) {
        fprintf(stderr, "usage: %s [switches >= 2] [runs 1..100]\n", argv[0]);
        return 2;
    }
    half = switches / 2;
    double ns[100], ticks[100];

    usched__ctx_make(&raw_a, stack_new(), STACK, raw_a_entry, NULL, usched__ctx_fpmode());
    usched__ctx_make(&raw_b, stack_new(), STACK, raw_b_entry, NULL, usched__ctx_fpmode());
    run_raw(); /* warm up */
    time_runs(run_raw, ns, ticks, runs);
    report("raw ctx_switch (a <-> b)", ns, ticks, runs, 2 * half);

    usched__fctx_host(&f_host);
    usched__fctx_make(&f_fiber, stack_new(), STACK, fiber_entry, NULL, usched__ctx_fpmode());
    time_runs(run_fctx, ns, ticks, runs);
    report("fctx_switch (host <-> fiber)", ns, ticks, runs, 2 * half);
    usched__fctx_destroy(&f_fiber);
    return 0;
}
