/*
 * The harness's own pieces (bench.h is what the CLI sees): the variants of
 * one bench_run and the state of the runs, shared by bench_run.c (the
 * runs), bench_variant.c (building the variants) and bench_report.c (the
 * lines and tables printed).
 */
#ifndef USCHED_TOOL_BENCH_HARNESS_H
#define USCHED_TOOL_BENCH_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "bench.h"
#include "usched.h"

/* One system compared: a usched variant or a peer. */
struct variant {
    char label[300];
    const char *peer; /* NULL: usched */
    struct bench_settings set;
    bool skipped;           /* not run: why says why (unavailable policy, peer missing) */
    char why[300];
    char last_failure[300]; /* the last failed run's reason (peers) */
    int nfailed;            /* runs that failed (peers) */
    double *values;         /* per run; NAN for a failed peer run */
    int nvalues;
    uint64_t *counters;         /* summed over runs, usched_stat_count() of them */
    struct usched_wakelat *lat; /* wake-up latency per run (usched variants) */
    double *xfer;               /* per run: the cross-CPU probe before it (ns; NAN: none) */
    double *noise_cpus;         /* per run, with --noise: the CPUs the busy processes had
                                   (their CPU time over the run's wall time; NAN: not read) */
    int ncpus;
};

/* The state of one bench_run (of one point of a network workload's sweep). */
struct bench_state {
    const struct bench_config *c;
    struct bench_error *e;
    struct variant *v;
    int nv;
    int ncounters;
    char peers_dir[4096];
    bool progress;     /* stderr is a terminal, or --progress */
    bool progress_tty; /* ... and a terminal: erase the line with ANSI codes */
    int progress_len;  /* length of the last progress line (padding, not a tty) */
    double t0;         /* start of the first run */
    int total_runs, done_runs;
    bool probe; /* the cross-CPU probe before each run (bench_xfer.h) */
    int xa, xb; /* ... between these CPUs */
    double noise_c0, noise_t0; /* with --noise: the busy processes' CPU time and the clock at
                                  the start of the current run */
};
extern struct bench_state B;

/* ---- bench_config.c ---- */

/* Sets e to the usage error fmt, pointing to the help of help ("bench",
 * "bench tbench"): returns 2. */
int bench_usage_error(struct bench_error *e, const char *help, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends s to buf after sep (none before the first). */
void bench_settings_append(char *buf, size_t len, const char *sep, const char *s);

/* ---- bench_variant.c: 0, or 2 with B.e set (1 for bench_variants_peers) ---- */

/* The variants of B.c: --compare's, or the one --policy, or every policy;
 * server_cpus (the split layout's, or NULL) for each. */
int bench_variants(const char *server_cpus);
/* With --peers: the peer systems of the workload. */
int bench_variants_peers(void);
void bench_variants_free(void);
/* The policy a usched variant runs (its own, USCHED_POLICY, or usched). */
const char *bench_variant_policy(const struct variant *v);
/* Applies v's settings to a created scheduler: 0, or -1 with why in err. */
int bench_variant_apply(usched_t *s, const struct variant *v, char *err, size_t len);

/* ---- bench_report.c ---- */

/* The progress line (stderr): before run `run` of v, and erased. */
void bench_progress_start(const struct variant *v, int run);
void bench_progress_clear(void);
/* One --json line for a run of v. */
void bench_json_run(const struct variant *v, int run, double value, const uint64_t *counters,
                    const struct usched_wakelat *lat, const char *skipped, const char *failed);
/* The run's line of the report: its tps, or why it failed. */
void bench_report_run(const struct variant *v, int run, double value, const char *failed);
/* The tables after the runs. */
void bench_report(void);

#endif
