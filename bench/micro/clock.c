/*
 * The trace clock's cost (a number, not a test): what one reading of the
 * clock a trace event takes costs here (docs/trace.md, "The clock"), alone
 * and beside independent arithmetic, and clock_gettime for comparison.
 *   tsc         the trace clock's counter (usched__cycles: x86-64 rdtsc,
 *               aarch64 cntvct_el0) read in a loop
 *   work        a short dependent chain of arithmetic, no clock
 *   work+tsc    the same chain with a TSC read beside it (how much a read
 *               costs when the CPU has other work to overlap it with)
 *   monotonic   clock_gettime(CLOCK_MONOTONIC)
 * Usage: bench_clock [iterations]   (ns per iteration, three repeats)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "arch/arch.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = 20000000;
    if (argc > 1) {
        char *end;
        n = strtol(argv[1], &end, 10);
        if (*end || n < 1 || n > 2000000000L) {
            fprintf(stderr, "bench_clock: iterations '%s': want a number from 1 to 2000000000\n", argv[1]);
            return 2;
        }
    }
    volatile uint64_t sink;
    uint64_t acc = 1;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        for (long i = 0; i < n; i++) sink = usched__cycles();
        double t1 = now();
        for (long i = 0; i < n; i++) {
            for (int k = 0; k < 10; k++) acc = acc * 3 + (uint64_t)k;
            sink = acc;
        }
        double t2 = now();
        for (long i = 0; i < n; i++) {
            for (int k = 0; k < 10; k++) acc = acc * 3 + (uint64_t)k;
            sink = acc + usched__cycles();
        }
        double t3 = now();
        struct timespec ts;
        for (long i = 0; i < n / 4; i++) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            sink = (uint64_t)ts.tv_nsec;
        }
        double t4 = now();
        printf("tsc %.1f ns  work %.1f ns  work+tsc %.1f ns  monotonic %.1f ns\n", (t1 - t0) / (double)n,
               (t2 - t1) / (double)n, (t3 - t2) / (double)n, (t4 - t3) / (double)(n / 4));
    }
    (void)sink;
    return 0;
}
