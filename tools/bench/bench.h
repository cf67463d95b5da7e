/*
 * The benchmark harness (tools/bench/): what `usched bench` runs, as a
 * library the CLI links. The CLI's front parses the command line into one
 * struct bench_config (bench_config_parse: one option table, one parser),
 * prints the help or a usage error, and hands the configuration to
 * bench_run, which runs the workload on every variant (and, for the network
 * workloads, at every point of the sweep) and prints the report.
 *
 * The pieces: bench_config.c (the options), bench_variant.c (the variants
 * compared), bench_run.c (the runs, in process, in a fresh process or as a
 * peer program), bench_report.c (the tables), bench_proc.c (every process
 * the harness starts: peer programs, real servers, their clients),
 * bench_net.c and bench_servers.c (the network workloads and the servers
 * they are compared on), bench_wl.c and the other bench_*.c (the workloads).
 *
 * Exit statuses, as the CLI returns them: 0 done; 1 a run failed or the
 * harness could not go on; 2 bad usage (the message in struct bench_error).
 */
#ifndef USCHED_TOOL_BENCH_H
#define USCHED_TOOL_BENCH_H

#include <stdbool.h>
#include <stddef.h>

#include "bench_wl.h"

/* The most client counts or pipeline depths of a network workload's sweep. */
#define BENCH_NET_MAX_POINTS 32

/* A usched variant's settings: the command line's (--policy, --knobs, ...)
 * or a --compare variant's. */
struct bench_settings {
    char policy[64];    /* "" = the library's default (USCHED_POLICY or usched) */
    char knobs[512];
    char topology[512]; /* "" = this machine */
    char cpus[128];
    bool has_topology, has_cpus;
    bool emulate; /* SMT emulation */
    char pin[16]; /* the pin setting; "" = the default */
    bool fresh;   /* each run in a new process (--fresh, fresh=1) */
};

/* The sweep of a network workload (tbench, pgbench, redis, http). */
struct bench_sweep {
    long clients[BENCH_NET_MAX_POINTS]; /* --clients LIST; nclients 0: the workload's default */
    int nclients;
    long pipelines[BENCH_NET_MAX_POINTS]; /* --pipeline LIST (redis); npipelines 0: the default */
    int npipelines;
    bool unpinned, split; /* --layout */
    bool tpcb;            /* --script tpcb-like */
    int scale;            /* --scale; 0: 1 */
};

/* One parsed `usched bench` command line. */
struct bench_config {
    const struct bench_workload *wl;
    int net; /* the BENCH_NET_* index of a network workload, else -1 */
    struct bench_params p;
    struct bench_settings base; /* every variant's settings, before --compare's */
    const char *compare;        /* --compare SPEC, or NULL */
    int runs;
    bool json, peers, progress, probe;
    int noise;                 /* --noise N */
    int warmup_ms;             /* --warmup MS: spin every CPU before each run (0: none) */
    const char *peers_dir_opt; /* --peers-dir */
    const char *trace;         /* --trace FILE */
    int child_variant, child_run; /* --fresh-child V,R (-1: not a fresh child) */
    bool parse_only;              /* build and check the variants, run nothing */
    bool help;                    /* --help: print bench_help and stop */
    struct bench_sweep sweep;
    int argc;    /* the command line as given, re-executed by --fresh */
    char **argv; /* (a copy: getopt permutes argv) */
};

/* A usage error: the message, and the help it points to ("bench" or
 * "bench tbench"). */
struct bench_error {
    char msg[600];
    const char *help;
};

/* Parses argv (argv[0] is the subcommand's name) into c. 0, or 2 with e
 * set. Free c with bench_config_free either way. */
int bench_config_parse(struct bench_config *c, int argc, char **argv, struct bench_error *e);
void bench_config_free(struct bench_config *c);

/* The help of c's workload (the network workloads have their own). */
void bench_help(const struct bench_config *c, FILE *f);

/* Runs c and prints its report on stdout: the exit status (2 with e set
 * when a variant's settings are refused). */
int bench_run(const struct bench_config *c, struct bench_error *e);

#endif
