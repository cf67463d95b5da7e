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

/* The workloads in DESIGN section 10's order; bench_workload_find is NULL for
 * an unknown name. */
extern const struct bench_workload bench_workloads[];
extern const int bench_nworkloads;
const struct bench_workload *bench_workload_find(const char *name);

/* Workload functions (bench_wl.c: spawn/join/yield only; bench_chan.c: the
 * ones that need channels). */
bench_fn bench_fib, bench_skynet, bench_spawn, bench_yield, bench_build;
bench_fn bench_pingpong, bench_pairs, bench_select;
bench_fn bench_echo, bench_echo100; /* bench_echo.c */
bench_fn bench_pgsim;                /* bench_wl.c */

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
