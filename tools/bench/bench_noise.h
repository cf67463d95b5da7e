/*
 * usched bench --noise N: N busy processes beside the run, the noisy
 * neighbour of a shared machine (a container host, a CI runner, a cloud VM
 * whose other tenants compute). Each child spins in user space at the
 * caller's priority, with no CPU affinity, so the kernel spreads them over
 * the CPUs the run uses as it would another tenant's threads. They start
 * before the first run and are killed after the last; a child whose parent
 * dies is killed by the kernel (PR_SET_PDEATHSIG), so none outlives the
 * benchmark.
 */
#ifndef USCHED_TOOL_BENCH_NOISE_H
#define USCHED_TOOL_BENCH_NOISE_H

#include <stddef.h>

#define BENCH_NOISE_MAX 1024

/* Starts n busy children (0 <= n <= BENCH_NOISE_MAX). 0, or -1 with a
 * message in err (none is left running then). */
int bench_noise_start(int n, char *err, size_t len);

/* Kills and reaps the children; safe to call twice. */
void bench_noise_stop(void);

#endif
