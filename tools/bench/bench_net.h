/*
 * usched bench tbench|pgbench|redis|http: the servers of servers/ driven by
 * the real clients (tbench, pgbench, redis-benchmark, wrk), each run
 * reporting the client's own figure. With --peers the same client runs
 * against the Go peer (bench/peers/goserve) and the server it was written
 * for (tbench_srv, PostgreSQL 15, redis-server, nginx: bench_servers.c),
 * interleaved with the usched runs.
 *
 * A run of one of these workloads is a sweep: bench_run runs the variants
 * once per point (layout x client count x pipeline depth), each point set
 * with bench_net_point before its runs.
 */
#ifndef USCHED_TOOL_BENCH_NET_H
#define USCHED_TOOL_BENCH_NET_H

#include <sched.h>
#include <stdbool.h>
#include <stdio.h>

#include "bench_peer.h"
#include "bench_wl.h"

struct bench_config;
struct bench_error;

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

/* tbench's client connects to this port only. */
#define BENCH_NET_TBENCH_PORT 7003

extern const struct peer_workload_info bench_net_infos[BENCH_NET_COUNT];
extern const struct bench_systems bench_net_systems[BENCH_NET_COUNT];

#define X(name, summary, unit) bench_fn bench_net_##name;
BENCH_NET_WORKLOADS(X)
#undef X

/* The BENCH_NET_* index of a workload's name, or -1. */
int bench_net_find(const char *name);

/* The sweep of c (a network workload): 0 with the number of points in
 * *npoints, or 2 with e set (a layout this machine cannot give). */
int bench_net_sweep(const struct bench_config *c, int *npoints, struct bench_error *e);

/* Makes point i of c's sweep the current one; unless c->json, prints its
 * heading. The usched server's --cpus under the split layout, or NULL. */
const char *bench_net_point(const struct bench_config *c, int i);

/* ---- shared by bench_net.c and bench_servers.c ---- */

/* The current point of the sweep. */
struct bench_net_point {
    int wl;       /* BENCH_NET_* of the sweep */
    long clients; /* this point's client count */
    long pipeline; /* redis -P */
    bool split;    /* layout: server on the first half of the CPUs */
    bool tpcb;     /* pgbench's tpcb-like script instead of select-only */
    int scale;     /* pgbench tables */
    cpu_set_t server_cpus, client_cpus; /* split layout, in OS numbers */
    int nserver_cpus, ncpus;
    char server_dense[64]; /* usched --cpus of the server half */
};
extern struct bench_net_point bench_net_cur;

/* The workload's name ("tbench", ...): its usched serve protocol too. */
extern const char *const bench_net_names[BENCH_NET_COUNT];

/* The client of the current point: its binary and Debian package. */
const char *bench_net_client_path(void);
const char *bench_net_client_package(void);

/* Runs the client of the current point against port for duration seconds:
 * the figure, or NAN with err saying why. */
double bench_net_client(int port, double duration, const char *db, const char *user, char *err, size_t len);

/* One run of a peer system at the current point (bench_systems.run). */
void bench_net_run_system(const char *peers_dir, const char *system, const struct bench_params *p,
                          struct bench_peer_out *out);

#endif
