/*
 * usched bench: the cross-CPU probe. Before each run (usched and peers
 * alike) two threads pinned to the first two CPUs the benchmark may use pass
 * one cache line back and forth, and the mean round trip is reported beside
 * the run's result.
 *
 * Why: on a virtual machine the host decides where the guest's CPUs run,
 * and it may move them. On the 2-vCPU machines of this project the round
 * trip read 60-70 ns at some minutes and 330-370 ns at others (the two vCPUs
 * on one core complex, or on two), and the workloads that hand work between
 * CPUs (select, spawn, pairs) changed by up to 2x with it, for every system.
 * A run's probe says which of those machines it ran on, so runs (and
 * systems) are compared on like terms; BENCHMARKS.md has the evidence.
 */
#ifndef USCHED_TOOL_BENCH_XFER_H
#define USCHED_TOOL_BENCH_XFER_H

/* The first two CPUs in this thread's affinity mask: 0, or -1 when it
 * allows fewer than two. */
int bench_xfer_cpus(int *a, int *b);

/* Mean round trip, in ns, of one cache line between CPUs a and b over
 * `rounds` round trips (after a warm-up of rounds / 8); NAN if a thread
 * could not be started or pinned, or the probe took over a second (a CPU
 * given to other work meanwhile). The caller's own affinity is untouched. */
double bench_xfer_probe(int a, int b, int rounds);

/* The warm-up before each run (--warmup MS): one thread pinned to each CPU
 * this thread may use spins for ms milliseconds. On the project's virtual
 * machines a CPU that was idle runs slower for a few hundred milliseconds
 * once work comes back (a one-CPU spawn run of 0.3 s: 37-40 ns a spawn after
 * a second of idling, 25-31 ns after 0.3 s of spinning), so the first run of
 * an invocation, and a run after a pause, measured the host's ramp and not
 * the system. 0 when done (or ms <= 0), -1 when a thread could not start. */
int bench_warmup(double ms);

#endif
