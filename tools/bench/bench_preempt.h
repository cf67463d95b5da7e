/*
 * usched bench preempt (bench_preempt.c): short requests beside CPU hogs on
 * the same CPUs; the requests' p99 latency, against the Go peer.
 */
#ifndef USCHED_TOOL_BENCH_PREEMPT_H
#define USCHED_TOOL_BENCH_PREEMPT_H

#include "bench_wl.h"

extern const struct peer_workload_info bench_preempt_info;
extern const struct bench_systems bench_preempt_systems;
bench_fn bench_preempt;

#endif
