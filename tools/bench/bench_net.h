/*
 * usched bench tbench|pgbench|redis|http: the servers of servers/ driven by
 * the real clients (tbench, pgbench, redis-benchmark, wrk), each run
 * reporting the client's own figure. With --peers the same client runs
 * against the Go peer (bench/peers/goserve) and the server it was written
 * for (tbench_srv, PostgreSQL 15, redis-server, nginx), interleaved with
 * the usched runs by cmd_bench.c's loop.
 *
 * bench_net_front runs first in cmd_bench: for these workloads it takes
 * the options that only they have (--clients LIST, --layout, --pipeline,
 * --script, --scale), and calls cmd_bench once per point of the sweep
 * (layout x client count x pipeline depth) with the rest of the options.
 */
#ifndef USCHED_TOOL_BENCH_NET_H
#define USCHED_TOOL_BENCH_NET_H

#include <stdio.h>

#include "bench_peer.h"
#include "bench_wl.h"

/* name, summary, unit */
#define BENCH_NET_WORKLOADS(X)                                                           \
    X(tbench, "dbench's tbench client against usched serve tbench (port 7003)", "MB/s") \
    X(pgbench, "pgbench -n (-S by default) against usched serve pgbench", "tps")         \
    X(redis, "redis-benchmark -t set,get against usched serve redis", "req/s")           \
    X(http, "wrk against usched serve http", "req/s")

enum {
#define X(name, summary, unit) BENCH_NET_##name,
    BENCH_NET_WORKLOADS(X)
#undef X
    BENCH_NET_COUNT
};

extern const struct peer_workload_info bench_net_infos[BENCH_NET_COUNT];
extern const struct bench_systems bench_net_systems[BENCH_NET_COUNT];

#define X(name, summary, unit) bench_fn bench_net_##name;
BENCH_NET_WORKLOADS(X)
#undef X

/* For a network workload in argv: runs its sweep through cmd_bench and
 * returns the exit status. -1 for any other workload (cmd_bench goes on). */
int bench_net_front(int argc, char **argv);

#endif
