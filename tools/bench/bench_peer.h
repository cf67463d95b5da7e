/*
 * usched bench --peers: running the standalone peer programs built by
 * bench/peers/build.sh (peer-<system> <workload> [--threads N] ...), each of
 * which prints one line
 *   RESULT workload=W system=S value=V unit=U higher_is_better=B check=ok|FAIL threads=T
 * and exits 0 (ok), 1 (failed), 2 (bad usage) or 3 (workload unsupported).
 * The line's own workload, system, unit, higher_is_better and threads are
 * checked against what was asked, so a result is never compared with
 * usched's in the wrong unit or direction.
 */
#ifndef USCHED_TOOL_BENCH_PEER_H
#define USCHED_TOOL_BENCH_PEER_H

#include <stddef.h>

/* system (the peer-<system> binary), what it is */
#define BENCH_PEERS(X)                                                          \
    X(pthreads, "kernel threads, pthread mutexes and condition variables")      \
    X(go, "Go goroutines and channels")                                         \
    X(tbb, "oneTBB task_group")                                                 \
    X(omp, "OpenMP tasks (libgomp)")                                            \
    X(boostfiber, "Boost.Fiber, work-stealing scheduler")                       \
    X(tokio, "Rust Tokio, multi-thread runtime")

extern const char *const bench_peer_names[];
extern const int bench_npeers;

enum bench_peer_status { BENCH_PEER_OK, BENCH_PEER_SKIPPED, BENCH_PEER_FAILED };

/* What the RESULT line must say besides its value. */
struct bench_peer_expect {
    const char *workload;
    const char *unit;
    int higher_is_better;
    int threads; /* the worker count asked for (the peer reports 1 for yield) */
};

struct bench_peer_out {
    enum bench_peer_status status;
    double value;
    char msg[256]; /* why skipped or failed */
};

/* The peers' directory: opt (--peers-dir) if set, else $USCHED_PEERS_DIR,
 * else the directory of this executable + "/peers". 0, or -1 with a message
 * in buf. */
int bench_peer_dir(const char *opt, char *buf, size_t len);

/* Runs dir/peer-<system> with argv (argv[0] is replaced by the path; NULL
 * terminated), parses its RESULT line and checks it against want. */
void bench_peer_run(const char *dir, const char *system, char **argv,
                    const struct bench_peer_expect *want, struct bench_peer_out *out);

#endif
