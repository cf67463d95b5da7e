/*
 * usched bench: the workloads and the pieces the runner shares with them.
 *
 * Every workload does exactly the work bench/WORKLOADS.md defines, with the
 * generators of bench/peers/common/peer.h (the peers include the same file),
 * so a usched run and a peer run of one workload are the same computation and
 * their numbers are comparable. A workload runs on a started scheduler from
 * the outside thread, checks its own result (sums, counts, checksums) and
 * fails loudly with a message when it is wrong.
 */
#ifndef USCHED_BENCH_WL_H
#define USCHED_BENCH_WL_H

#include <stdint.h>
#include <stdio.h>

#include "usched.h"

/* The workload table of the peer protocol: name, unit, higher_is_better and
 * default --n, plus the shared generators and constants. */
#include "../../bench/peers/common/peer.h"

struct bench_params {
    long n;            /* the workload's size (peer --n); 0: the default */
    int clients;       /* select: client fibers (0: 2 x CPUs); pgsim: connections (0: 2) */
    double duration;   /* seconds: length of pairs/select, cap of pingpong/spawn */
    int have_duration; /* --duration was given (pingpong and spawn honour a cap only then) */
    uint64_t seed;     /* select and build generators */
    int cutoff;        /* fib: below this, serial */
    int no_inline;     /* fib, skynet, spawn: join a child only once it has
                        * started, so that every child runs as a fiber on its
                        * own stack (no join runs it on the joiner's) */
    int call;          /* fib, skynet, spawn: spawn with usched_spawn_call, which
                        * runs a child as a call once 64 wait on the CPU */
};

/* One run's outcome: value in the workload's unit, or an error message. */
struct bench_out {
    double value;
    char err[256];
};

/* Runs workload w (a PEER_* index) on the started scheduler s. 0 with
 * out->value set, or -1 with out->err naming what went wrong (a failed call,
 * or a wrong result). */
typedef int bench_fn(usched_t *s, const struct bench_params *p, struct bench_out *out);

struct bench_peer_out;

/* The systems a workload is compared with under --peers, when they are not
 * the peer programs of bench_peer.h (the network workloads: bench_net.h). */
struct bench_systems {
    const char *const *names;
    int n;
    /* One run of system (a name of names); out as bench_peer_run's. */
    void (*run)(const char *peers_dir, const char *system, const struct bench_params *p,
                struct bench_peer_out *out);
    /* Extra fields of the --json lines (",\"key\":value..."), or NULL. */
    void (*json)(FILE *f);
};

struct bench_workload {
    const char *name;
    const char *summary;
    bench_fn *run;
    const struct peer_workload_info *info; /* unit, higher_is_better, default n */
    int timed;                             /* runs for --duration (pairs, select) */
    const struct bench_systems *systems;   /* NULL: the peer programs */
};

/*
 * The workload table, one line a workload; each line's NAME runs
 * bench_NAME, a bench_fn (declared below from the same lines). A new
 * workload is its function, in a file of its own in this folder, and one
 * line in one of these lists:
 *   BENCH_PEER_WORKLOADS: the workloads of the peer protocol, whose unit,
 *     direction and default size are bench/peers/common/peer.h's (PEER_NAME),
 *     compared with the peer programs under --peers;
 *   BENCH_OWN_WORKLOADS: usched's alone (no peer programs run them), with
 *     their unit, whether higher is better and default size (0: none, the
 *     run lasts --duration) on the line.
 * The network workloads (bench_net.h) come between the two.
 */
/* name, summary, timed (runs for --duration) */
#define BENCH_PEER_WORKLOADS(X)                                                       \
    X(pairs, "tbench-like request/response pairs over rendezvous channels", 1)       \
    X(select, "pgbench -S-like point look-ups by clients to a server pool", 1)       \
    X(build, "make-like DAG of CPU-bound jobs of mixed length (makespan)", 0)        \
    X(fib, "fork-join fib(n), a fiber per call down to a cutoff", 0)                 \
    X(skynet, "a 10-ary tree of 1,000,000 leaf fibers summing their numbers", 0)     \
    X(pingpong, "round trips between two fibers over rendezvous channels", 0)        \
    X(yield, "two fibers on one CPU yielding to each other", 0)                      \
    X(spawn, "spawn and join empty fibers in batches of 1000", 0)                   \
    X(echo, "TCP echo over loopback, one connection: round-trip latency", 0)         \
    X(echo100, "TCP echo over loopback, 100 connections: messages per second", 1)

/* name, summary, unit, higher_is_better, default n, timed */
#define BENCH_OWN_WORKLOADS(X)                                                                           \
    X(pgsim, "pgbench -S in process: client/backend pairs spending the real pair's CPU per transaction", \
      "tps", 1, 0, 1)

#define X(name, ...) bench_fn bench_##name;
BENCH_PEER_WORKLOADS(X)
BENCH_OWN_WORKLOADS(X)
#undef X

/* The workloads in that order; bench_workload_find is NULL for an unknown
 * name. */
extern const struct bench_workload bench_workloads[];
extern const int bench_nworkloads;
const struct bench_workload *bench_workload_find(const char *name);

/* Records the first failure of a run (any fiber, any thread); later ones are
 * dropped so the message names the first thing that went wrong. */
void bench_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Starts a run: clears the failure state. */
void bench_fail_reset(void);
/* Whether a failure was recorded; copies its message into out->err. */
int bench_failed(struct bench_out *out);

/* Monotonic seconds. */
double bench_now(void);
/* Sleeps for sec seconds on the calling (outside) thread. */
void bench_sleep(double sec);

/* Spawns fn(arg) as a joinable fiber and joins it from the outside thread:
 * the root of every workload. Failures are recorded with bench_fail. */
void bench_root(usched_t *s, void (*fn)(void *), void *arg);

#endif
