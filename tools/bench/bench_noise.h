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

/* The CPU time (seconds) the running children have had so far, from
 * /proc/PID/schedstat; NAN when one cannot be read. The difference
 * over a run, divided by its wall time, is how many CPUs the neighbour had
 * beside it: a system that runs more threads than the CPUs it was given
 * takes a larger share of the machine from the neighbour (the kernel is
 * fair per thread), and that share says so. */
double bench_noise_cpu_s(void);

/* Kills and reaps the children; safe to call twice. */
void bench_noise_stop(void);

#endif
