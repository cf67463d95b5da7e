/*
 * usched bench [WORKLOAD] [--policy P] [--knobs K] [--topology T] [--cpus LIST]
 *              [--clients N] [--n N] [--duration SEC] [--runs N] [--compare SPEC]
 *              [--peers] [--peers-dir DIR] [--json] [--progress] [--emulate]
 *              [--noise N] [--cutoff N] [--no-inline] [--fresh]
 *
 * Runs a workload (bench_wl.h) on usched variants (policies, knobs,
 * topologies) and, with --peers, on the peer programs, all interleaved run by
 * run (A B A B, not A A B B) so drift of the machine hits every variant
 * alike. Prints (on stdout, once) pgbench-style `tps = N` lines per run, or
 * `failed: reason` for a failed peer run, then mean, standard deviation and
 * the difference of each variant to the first in percent, the decision
 * counters of each usched variant summed over its runs; with exactly two
 * usched variants, the seed table (the two runs side by side, the means and
 * the difference of the first over the second, as DragonFly's smt_enable
 * tables gave it); with --peers a
 * table of each system's median over its successful runs, how many of its
 * runs succeeded with the last failure's reason, and its ratio to usched.
 * Progress goes to stderr only when stderr is a terminal, or with
 * --progress: one line, rewritten in place, with the run count and the
 * elapsed time. --noise N runs N busy processes beside every run
 * (bench_noise.h), the noisy neighbour of a shared machine. --fresh runs
 * each usched run in a new process (this executable, re-executed with the
 * same arguments and --fresh-child), as every peer run is.
 *
 * Exit status: 0 done; 1 a run failed (a usched call failed or a workload's
 * check found a wrong result; a failing peer is reported, not fatal); 2 bad
 * usage (one line on stderr).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_net.h"
#include "bench_noise.h"
#include "bench_xfer.h"
#include "bench_peer.h"
#include "bench_wl.h"
#include "usched.h"
#include "cli_opts.h"

int cmd_bench(int argc, char **argv);

/* Set by the fuzz targets (tests/fuzz/fuzz_cli.c): parse and check the
 * command line, build the variants, then return 0 without running them. */
int bench_parse_only;

static const char bench_usage[] =
    "usage: usched bench [WORKLOAD] [options]\n"
    "\n"
    "Runs WORKLOAD (default: select) on usched, comparing variants side by side.\n"
    "With no options it compares every policy on select, 3 runs of 3 s each.\n"
    "\n"
    "  -p, --policy P       policy to run (default: compare all policies)\n"
    "  -k, --knobs K        knobs for every variant, 'smt=0,affine=1'\n"
    "  -t, --topology T     topology: hwloc synthetic string, XML file or captured root\n"
    "  -c, --cpus LIST      restrict to these CPUs ('0-7,16')\n"
    "  -e, --emulate        SMT emulation: each core of --topology on one real CPU,\n"
    "                       its PUs sharing it (docs/emulation.md)\n"
    "      --compare SPEC   variants to compare: 'smt=1;smt=0' (';' separates variants,\n"
    "                       each a list of policy=, topology=, cpus=, knobs=, pin=,\n"
    "                       fresh= or knob settings) or 'policy=usched,linux' (one\n"
    "                       key, its values)\n"
    "      --peers          also run the peer programs (Go, oneTBB, ...) installed\n"
    "      --peers-dir DIR  where the peers are (default: $USCHED_PEERS_DIR, else the\n"
    "                       'peers' folder beside this executable)\n"
    "  -r, --runs N         runs per variant (default 3)\n"
    "  -d, --duration SEC   length of a timed run (pairs, select, pgsim; default 3), cap of\n"
    "                       pingpong and spawn\n"
    "  -n, --n N            workload size (fib: n; skynet: leaves, a power of 10;\n"
    "                       build: jobs; pingpong: round trips; spawn, yield: ops)\n"
    "      --cutoff N       fib: calls below N run serially (default 12; the peers\n"
    "                       get the same); a small N makes fib spawn-bound\n"
    "      --no-inline      fib, skynet, spawn: join each child only after it started,\n"
    "                       so that every child runs as a fiber on its own stack (by\n"
    "                       default a join of an unstarted child runs it inline)\n"
    "      --fresh          run each usched run in a new process (this executable\n"
    "                       re-executed), as the peers run; also a --compare key\n"
    "                       (fresh=0, fresh=1)\n"
    "      --clients N      select: client fibers (default 2 x CPUs); pgsim: client and\n"
    "                       backend pairs (default 2)\n"
    "      --json           one JSON object per run on stdout instead of the report\n"
    "      --progress       a progress line on stderr even when it is not a terminal\n"
    "      --trace FILE     write a trace of each usched run (docs/trace.md; read it\n"
    "                       with usched trace FILE): FILE itself for a single run,\n"
    "                       else FILE-<variant>-<run> before the extension\n"
    "      --noise N        N busy processes beside every run (a noisy neighbour;\n"
    "                       they start before the first run, die after the last)\n"
    "      --no-probe       skip the cross-CPU probe before each run (a cache line\n"
    "                       passed between the first two CPUs; its round trip shows\n"
    "                       where a virtual machine's host placed them)\n"
    "  -h, --help           print this help\n"
    "\n"
    "Workloads:\n";

#define DEFAULT_RUNS 3
#define DEFAULT_DURATION 3.0
#define MAX_RUNS 1000

struct variant {
    char label[300];
    const char *peer;   /* NULL: usched */
    char policy[64];    /* "" = the library's default (USCHED_POLICY or usched) */
    char knobs[512];
    char topology[512]; /* "" = this machine */
    char cpus[128];
    bool has_topology, has_cpus;
    bool emulate;          /* the emulate setting (SMT emulation) */
    char pin[16];          /* the pin setting; "" = the default */
    bool fresh;            /* each run in a new process (--fresh, fresh=1) */
    bool skipped;          /* not run: why says why (unavailable policy, peer missing) */
    char why[300];
    char last_failure[300]; /* the last failed run's reason (peers) */
    int nfailed;            /* runs that failed (peers) */
    double *values;        /* per run; NAN for a failed peer run */
    int nvalues;
    uint64_t *counters;    /* summed over runs, usched_stat_count() of them */
    struct usched_wakelat *lat; /* wake-up latency per run (usched variants) */
    double *xfer;          /* per run: the cross-CPU probe before it (ns; NAN: none) */
    int ncpus;
};

static struct {
    const struct bench_workload *wl;
    struct bench_params p;
    int runs;
    bool json, peers;
    int noise;         /* --noise: busy processes beside the runs */
    bool progress;     /* stderr is a terminal, or --progress */
    bool progress_tty; /* ... and a terminal: erase the line with ANSI codes */
    int progress_len;  /* length of the last progress line (padding, not a tty) */
    double t0;         /* start of the first run */
    const char *peers_dir_opt;
    char peers_dir[4096];
    struct variant *v;
    int nv;
    int ncounters;
    int total_runs, done_runs;
    const char *trace; /* --trace FILE */
    bool probe;        /* the cross-CPU probe before each run (bench_xfer.h) */
    int xa, xb;        /* ... between these CPUs */
    int argc;          /* the command line, re-executed by --fresh */
    char **argv;
    int child_variant, child_run; /* --fresh-child V,R: run only that (-1: no) */
} B;

/* ---- small helpers ------------------------------------------------------------ */

#define usage_error(...) cli_usage_error("bench", "bench", __VA_ARGS__)
#define parse_long(...) cli_parse_long("bench", "bench", __VA_ARGS__)

static void json_str(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void append(char *buf, size_t len, const char *sep, const char *s)
{
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, "%s%s", n && *s ? sep : "", s);
}

static const char *unit(void)
{
    return B.wl->info->unit;
}

static bool higher_better(void)
{
    return B.wl->info->higher_is_better != 0;
}

/* Operations per second for the `tps = N` line: the value itself for
 * throughputs; 1e9/ns per operation; 1000/ms for whole-run workloads. */
static double tps_of(double value)
{
    if (higher_better()) return value;
    if (!strncmp(unit(), "ns", 2)) return 1e9 / value;
    return 1e3 / value;
}

/* ---- variants ------------------------------------------------------------------- */

static const char *effective_policy(const struct variant *v)
{
    const char *env = getenv("USCHED_POLICY");
    return v->policy[0] ? v->policy : env && *env ? env : "usched";
}

/* Applies a variant's settings to a created scheduler. 0, or -1 with the
 * setting and the library's reason in err. */
static int variant_apply(usched_t *s, const struct variant *v, char *err, size_t len)
{
    const struct {
        const char *key, *val;
        bool set;
    } kv[] = {
        {"policy", v->policy, v->policy[0] != '\0'},
        {"topology", v->topology, v->has_topology},
        {"cpus", v->cpus, v->has_cpus},
        {"knobs", v->knobs, v->knobs[0] != '\0'},
        {"emulate", "1", v->emulate},
        {"pin", v->pin, v->pin[0] != '\0'},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        if (!kv[i].set) continue;
        if (usched_set(s, kv[i].key, kv[i].val) < 0) {
            /* A long value may not fit: end the message with "..." then. */
            if (snprintf(err, len, "%s '%s': %s", kv[i].key, kv[i].val, usched_last_error()) >=
                    (int)len &&
                len > 4)
                memcpy(err + len - 4, "...", 4);
            return -1;
        }
    }
    return 0;
}

/* Checks a variant's settings without running it: bad ones are a usage
 * error (2), the message prefixed by what (NULL: none). */
static int variant_check(struct variant *v, const char *what)
{
    usched_t *s;
    char err[400];
    if (usched_create(&s) < 0) return usage_error("environment: %s", usched_last_error());
    int r = variant_apply(s, v, err, sizeof err);
    usched_destroy(s);
    if (r < 0) {
        return usage_error("%s%s%s", what ? what : "", what ? ": " : "", err);
    }
    if (v->has_topology || v->has_cpus) {
        FILE *null = fopen("/dev/null", "w");
        r = null ? usched_topo_print(null, v->has_topology ? v->topology : NULL,
                                     v->has_cpus ? v->cpus : NULL, "json")
                 : 0;
        if (null) fclose(null);
        if (r < 0)
            return usage_error("%s%stopology: %s", what ? what : "", what ? ": " : "", usched_last_error());
    }
    return 0;
}

static struct variant *variant_add(const struct variant *base)
{
    struct variant *nv = realloc(B.v, (size_t)(B.nv + 1) * sizeof *nv);
    if (!nv) {
        fputs("usched bench: out of memory\n", stderr);
        exit(1);
    }
    B.v = nv;
    B.v[B.nv] = *base;
    return &B.v[B.nv++];
}

/* Applies one "key=value" of a --compare variant. */
static int variant_setting(struct variant *v, const char *key, const char *val, const char *spec)
{
    if (!*key || !val) return usage_error("--compare '%s': '%s' is not key=value", spec, key);
    if (!strcmp(key, "policy"))
        snprintf(v->policy, sizeof v->policy, "%s", val);
    else if (!strcmp(key, "topology")) {
        snprintf(v->topology, sizeof v->topology, "%s", val);
        v->has_topology = true;
    } else if (!strcmp(key, "cpus")) {
        snprintf(v->cpus, sizeof v->cpus, "%s", val);
        v->has_cpus = true;
    } else if (!strcmp(key, "knobs"))
        append(v->knobs, sizeof v->knobs, ",", val);
    else if (!strcmp(key, "fresh")) {
        if (strcmp(val, "0") && strcmp(val, "1"))
            return usage_error("--compare '%s': fresh '%s': must be 0 or 1", spec, val);
        v->fresh = val[0] == '1';
    } else if (!strcmp(key, "pin")) {
        if (strcmp(val, "0") && strcmp(val, "1"))
            return usage_error("--compare '%s': pin '%s': must be 0 or 1", spec, val);
        snprintf(v->pin, sizeof v->pin, "%s", val);
    } else {
        char kv[300];
        snprintf(kv, sizeof kv, "%s=%s", key, val);
        append(v->knobs, sizeof v->knobs, ",", kv);
    }
    return 0;
}

/* One variant from "k=v,k=v" (a piece without '=' continues the previous
 * value, so 'cpus=0,1' keeps its comma). */
static int variant_parse(const struct variant *base, const char *part, const char *spec)
{
    struct variant v = *base;
    char buf[1024], key[64] = "", val[900] = "";
    bool have = false;
    snprintf(v.label, sizeof v.label, "%s", part);
    snprintf(buf, sizeof buf, "%s", part);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq && have) {
            append(val, sizeof val, ",", tok);
            continue;
        }
        if (have && variant_setting(&v, key, val, spec)) return 2;
        if (!eq) return usage_error("--compare '%s': '%s' is not key=value", spec, tok);
        *eq = '\0';
        snprintf(key, sizeof key, "%s", tok);
        snprintf(val, sizeof val, "%s", eq + 1);
        have = true;
    }
    if (!have) return usage_error("--compare '%s': empty variant", spec);
    if (variant_setting(&v, key, val, spec)) return 2;
    char what[400];
    snprintf(what, sizeof what, "--compare variant '%s'", part);
    if (variant_check(&v, what)) return 2;
    variant_add(&v);
    return 0;
}

static int variants_from_compare(const struct variant *base, const char *spec)
{
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", spec);
    const char *eq = strchr(buf, '=');
    if (!strchr(buf, ';') && eq && !strchr(eq + 1, '=') && strchr(eq, ',')) {
        /* one key, several values: 'policy=usched,linux' */
        char key[64];
        size_t k = (size_t)(eq - buf);
        if (k == 0 || k >= sizeof key) return usage_error("--compare '%s': bad key", spec);
        memcpy(key, buf, k);
        key[k] = '\0';
        for (char *save = NULL, *val = strtok_r(buf + k + 1, ",", &save); val;
             val = strtok_r(NULL, ",", &save)) {
            char part[1100];
            snprintf(part, sizeof part, "%s=%s", key, val);
            if (variant_parse(base, part, spec)) return 2;
        }
        return 0;
    }
    for (char *save = NULL, *part = strtok_r(buf, ";", &save); part; part = strtok_r(NULL, ";", &save)) {
        while (*part == ' ') part++;
        if (!*part) continue;
        if (variant_parse(base, part, spec)) return 2;
    }
    if (B.nv == 0) return usage_error("--compare '%s': no variant", spec);
    return 0;
}

/* Every policy of the library (usched first: the reference), each a variant. */
static int variants_all_policies(const struct variant *base)
{
    int n = usched_policy_count();
    for (int k = -1; k < n; k++) {
        const char *name = k < 0 ? "usched" : usched_policy_name(k);
        if (!name || (k >= 0 && !strcmp(name, "usched"))) continue;
        struct variant v = *base;
        snprintf(v.policy, sizeof v.policy, "%s", name);
        snprintf(v.label, sizeof v.label, "policy=%s", name);
        if (variant_check(&v, NULL)) return 2;
        variant_add(&v);
    }
    return 0;
}

static int variants_peers(void)
{
    if (bench_peer_dir(B.peers_dir_opt, B.peers_dir, sizeof B.peers_dir) < 0) {
        fprintf(stderr, "usched bench: %s\n", B.peers_dir);
        return 1;
    }
    const struct bench_systems *sys = B.wl->systems;
    for (int i = 0; i < (sys ? sys->n : bench_npeers); i++) {
        struct variant v = {.peer = sys ? sys->names[i] : bench_peer_names[i]};
        snprintf(v.label, sizeof v.label, "%s", v.peer);
        variant_add(&v);
    }
    return 0;
}

/* ---- progress (stderr) ------------------------------------------------------------- */

/* One line rewritten in place (hyperfine, pgbench -P): on a terminal erased
 * with ESC[K, elsewhere (--progress into a file or pipe) overwritten with
 * spaces after a carriage return. The report itself is only on stdout. */
static void progress_clear(void)
{
    if (!B.progress || !B.progress_len) return;
    if (B.progress_tty)
        fputs("\r\033[K", stderr);
    else
        fprintf(stderr, "\r%*s\r", B.progress_len, "");
    B.progress_len = 0;
    fflush(stderr);
}

static void progress_start(const struct variant *v, int run)
{
    if (!B.progress) return;
    progress_clear();
    char line[512];
    int n = snprintf(line, sizeof line, "[%d/%d runs, %.1f s] %s %s run %d/%d ...", B.done_runs + 1,
                     B.total_runs, bench_now() - B.t0, B.wl->name, v->label, run + 1, B.runs);
    fputs(line, stderr);
    B.progress_len = n < (int)sizeof line ? n : (int)sizeof line - 1;
    fflush(stderr);
}

static void progress_done(void)
{
    B.done_runs++;
}

/* ---- one run ------------------------------------------------------------------------ */

static void json_run(const struct variant *v, int run, double value, const uint64_t *counters,
                     const struct usched_wakelat *lat, const char *skipped, const char *failed)
{
    printf("{\"workload\":\"%s\",\"system\":", B.wl->name);
    json_str(stdout, v->peer ? v->peer : "usched");
    printf(",\"variant\":");
    json_str(stdout, v->label);
    printf(",\"policy\":");
    json_str(stdout, v->peer ? NULL : effective_policy(v));
    printf(",\"knobs\":");
    json_str(stdout, v->peer ? NULL : v->knobs);
    printf(",\"topology\":");
    json_str(stdout, v->peer || !v->has_topology ? NULL : v->topology);
    printf(",\"cpus\":");
    json_str(stdout, v->peer || !v->has_cpus ? NULL : v->cpus);
    printf(",\"threads\":%d,\"noise\":%d,\"run\":%d", v->ncpus, B.noise, run + 1);
    if (B.wl->run == bench_fib) printf(",\"cutoff\":%d", B.p.cutoff);
    if (B.p.no_inline) printf(",\"no_inline\":true");
    /* where the run happened: a process of its own, or inside this one */
    printf(",\"process\":\"%s\"", v->peer || v->fresh ? "fresh" : "bench");
    printf(",\"value\":");
    if (skipped || failed || isnan(value))
        fputs("null", stdout);
    else
        printf("%.6g", value);
    printf(",\"unit\":\"%s\",\"higher_is_better\":%s", unit(), higher_better() ? "true" : "false");
    if (B.probe && !skipped) {
        if (isnan(v->xfer[run]))
            printf(",\"xfer_ns\":null");
        else
            printf(",\"xfer_ns\":%.1f", v->xfer[run]);
    }
    if (B.wl->systems && B.wl->systems->json) B.wl->systems->json(stdout);
    if (skipped) {
        printf(",\"skipped\":");
        json_str(stdout, skipped);
    }
    if (failed) {
        printf(",\"failed\":");
        json_str(stdout, failed);
    }
    if (lat)
        printf(",\"wake_latency\":{\"count\":%llu,\"p50_ns\":%llu,\"p90_ns\":%llu,\"p99_ns\":%llu,\"max_ns\":%llu}",
               (unsigned long long)lat->count, (unsigned long long)lat->p50_ns, (unsigned long long)lat->p90_ns,
               (unsigned long long)lat->p99_ns, (unsigned long long)lat->max_ns);
    printf(",\"counters\":{");
    for (int i = 0; counters && i < B.ncounters; i++)
        printf("%s\"%s\":%llu", i ? "," : "", usched_stat_name(i), (unsigned long long)counters[i]);
    printf("}}\n");
    fflush(stdout);
}

/* The run's line of the report (stdout): its tps, or why it failed. */
static void report_run(const struct variant *v, int run, double value, const char *failed)
{
    progress_done();
    if (B.json) return;
    progress_clear();
    printf("%s %s run %d: ", B.wl->name, v->label, run + 1);
    if (failed)
        printf("failed: %s\n", failed);
    else if (higher_better())
        printf("tps = %.1f\n", value);
    else
        printf("tps = %.1f (%.6g %s)\n", tps_of(value), value, unit());
    if (B.probe) {
        if (isnan(v->xfer[run]))
            printf("  cross-CPU round trip before the run: not measured (its threads could not start, or it took over 1 s)\n");
        else
            printf("  cross-CPU round trip before the run: %.0f ns\n", v->xfer[run]);
    }
    fflush(stdout);
}

/* The trace file of a run: --trace FILE itself when the bench makes one
 * usched run, else FILE with "-<variant>-<run>" before its extension. */
static void trace_path(char *buf, size_t len, const struct variant *v, int run)
{
    int usched_runs = 0;
    for (int i = 0; i < B.nv; i++) usched_runs += !B.v[i].peer && !B.v[i].skipped;
    if (usched_runs * B.runs <= 1) {
        snprintf(buf, len, "%s", B.trace);
        return;
    }
    const char *dot = strrchr(B.trace, '.');
    const char *slash = strrchr(B.trace, '/');
    if (!dot || (slash && dot < slash)) dot = B.trace + strlen(B.trace);
    snprintf(buf, len, "%.*s-%d-%d%s", (int)(dot - B.trace), B.trace, (int)(v - B.v) + 1, run + 1, dot);
}

/* One usched run's measurements, as a --fresh child sends them back
 * (followed by its B.ncounters counters). */
struct run_rec {
    int ok; /* 0: err says what went wrong */
    int ncpus;
    double value;
    struct usched_wakelat lat;
    char err[256];
};

/* Runs the workload once on a new scheduler in this process: rec and
 * c[0..B.ncounters) filled. Exits 1 when the scheduler cannot be set up. */
static void measure_here(struct variant *v, int run, struct run_rec *rec, uint64_t *c)
{
    usched_t *s;
    char err[400];
    struct bench_out out = {0};
    if (usched_create(&s) < 0 || variant_apply(s, v, err, sizeof err) < 0) {
        fprintf(stderr, "usched bench: %s: %s\n", v->label, usched_last_error());
        exit(1);
    }
    /* yield runs on one worker (bench/WORKLOADS.md) unless the variant names CPUs */
    if (B.wl->run == bench_yield && !v->has_cpus && usched_set(s, "cpus", "0") < 0) {
        fprintf(stderr, "usched bench: %s: cpus '0': %s\n", v->label, usched_last_error());
        exit(1);
    }
    if (B.trace) {
        char path[4200];
        trace_path(path, sizeof path, v, run);
        if (usched_set(s, "trace", path) < 0) {
            fprintf(stderr, "usched bench: --trace '%s': %s\n", path, usched_last_error());
            exit(1);
        }
    }
    if (usched_start(s) < 0) {
        fprintf(stderr, "usched bench: %s: start: %s\n", v->label, usched_last_error());
        exit(1);
    }
    struct bench_params p = B.p;
    rec->ncpus = usched_ncpus(s);
    if (!p.clients) p.clients = strcmp(B.wl->name, "pgsim") ? 2 * rec->ncpus : 2; /* pgsim: pgbench -c 2 */
    bench_fail_reset();
    usched_stats_reset(s);
    int r = B.wl->run(s, &p, &out);
    for (int i = 0; i < B.ncounters; i++) usched_stat(s, usched_stat_name(i), &c[i]);
    usched_wakelat(s, -1, &rec->lat);
    int dr = usched_destroy(s);
    if (r == 0 && dr < 0) {
        r = -1;
        snprintf(out.err, sizeof out.err, "destroy: %s", usched_last_error());
    }
    rec->ok = r == 0;
    rec->value = out.value;
    snprintf(rec->err, sizeof rec->err, "%s", out.err);
}

/* The same in a new process: this executable re-executed with the same
 * arguments and --fresh-child V,R, which writes the record and the
 * counters to its fd 3 (a pipe) and nothing to stdout. Exits 1 when the
 * process cannot be started or sends no record. */
static void measure_fresh(struct variant *v, int run, struct run_rec *rec, uint64_t *c)
{
    int fd[2]; /* close-on-exec: only the child's fd 3 (a dup2) stays open across the exec */
    if (pipe2(fd, O_CLOEXEC) < 0) {
        fprintf(stderr, "usched bench: --fresh: pipe: %s\n", strerror(errno));
        exit(1);
    }
    char which[32];
    snprintf(which, sizeof which, "%d,%d", (int)(v - B.v), run);
    char **av = calloc((size_t)B.argc + 4, sizeof *av);
    if (!av) {
        fputs("usched bench: out of memory\n", stderr);
        exit(1);
    }
    av[0] = "usched";
    memcpy(av + 1, B.argv, (size_t)B.argc * sizeof *av);
    av[B.argc + 1] = "--fresh-child";
    av[B.argc + 2] = which;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 3);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    extern char **environ;
    int err = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, av, environ);
    posix_spawn_file_actions_destroy(&fa);
    free(av);
    close(fd[1]);
    if (err) {
        close(fd[0]);
        fprintf(stderr, "usched bench: --fresh: cannot run /proc/self/exe: %s\n", strerror(err));
        exit(1);
    }
    size_t want = sizeof *rec + (size_t)B.ncounters * sizeof *c, got = 0;
    char *buf = malloc(want);
    while (buf && got < want) {
        ssize_t k = read(fd[0], buf + got, want - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (!buf || got < want) {
        free(buf);
        progress_clear();
        fprintf(stderr, "usched bench: %s %s run %d: the fresh process sent no result (%s %d)\n",
                B.wl->name, v->label, run + 1, WIFSIGNALED(st) ? "signal" : "exit status",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        exit(1);
    }
    memcpy(rec, buf, sizeof *rec);
    memcpy(c, buf + sizeof *rec, (size_t)B.ncounters * sizeof *c);
    free(buf);
}

/* --fresh-child V,R: measures run R of variant V and writes the record to
 * fd 3. Exit status 0, or 1 if the run failed (the record says why). */
static int fresh_child(void)
{
    int i = B.child_variant;
    if (i >= B.nv || B.v[i].peer || B.v[i].skipped || B.child_run >= B.runs) {
        fprintf(stderr, "usched bench: --fresh-child %d,%d: no such usched run\n", i, B.child_run);
        return 2;
    }
    struct run_rec rec = {0};
    uint64_t *c = calloc((size_t)B.ncounters + 1, sizeof *c);
    if (!c) return 1;
    measure_here(&B.v[i], B.child_run, &rec, c);
    bool ok = write(3, &rec, sizeof rec) == (ssize_t)sizeof rec &&
              write(3, c, (size_t)B.ncounters * sizeof *c) == (ssize_t)((size_t)B.ncounters * sizeof *c);
    free(c);
    return ok && rec.ok ? 0 : 1;
}

/* Runs the workload once on a new scheduler (in this process, or in a new
 * one for a fresh variant); exits 1 on a failure. */
static void run_usched(struct variant *v, int run)
{
    struct run_rec rec = {0};
    uint64_t *c = calloc((size_t)B.ncounters + 1, sizeof *c);
    if (!c) {
        fputs("usched bench: out of memory\n", stderr);
        exit(1);
    }
    if (v->fresh)
        measure_fresh(v, run, &rec, c);
    else
        measure_here(v, run, &rec, c);
    v->ncpus = rec.ncpus;
    for (int i = 0; i < B.ncounters; i++) v->counters[i] += c[i];
    v->lat[run] = rec.lat;
    if (!rec.ok) {
        progress_clear();
        fprintf(stderr, "usched bench: %s %s run %d failed: %s\n", B.wl->name, v->label, run + 1,
                rec.err);
        exit(1);
    }
    v->values[v->nvalues++] = rec.value;
    if (B.json) json_run(v, run, rec.value, c, &v->lat[run], NULL, NULL);
    free(c);
    report_run(v, run, rec.value, NULL);
    if (!B.json) {
        const struct usched_wakelat *l = &v->lat[run];
        printf("  wake-up latency: p50 %llu ns, p99 %llu ns (%llu wake-ups)\n", (unsigned long long)l->p50_ns,
               (unsigned long long)l->p99_ns, (unsigned long long)l->count);
    }
}

/* The peer's arguments: the same work as the usched runs. */
static void run_peer(struct variant *v, int run)
{
    char threads[16], n[32], dur[32], clients[16], seed[32], cutoff[16];
    char *argv[18];
    int k = 0;
    v->ncpus = B.v[0].ncpus;
    argv[k++] = NULL; /* the path, filled in by bench_peer_run */
    argv[k++] = (char *)B.wl->name;
    snprintf(threads, sizeof threads, "%d", v->ncpus);
    argv[k++] = "--threads";
    argv[k++] = threads;
    if (B.wl->info->default_n) {
        snprintf(n, sizeof n, "%ld", B.p.n);
        argv[k++] = "--n";
        argv[k++] = n;
    }
    if (B.wl->timed || B.p.have_duration) {
        snprintf(dur, sizeof dur, "%g", B.p.duration);
        argv[k++] = "--duration";
        argv[k++] = dur;
    }
    if (!strcmp(B.wl->name, "select")) {
        snprintf(clients, sizeof clients, "%d", B.p.clients ? B.p.clients : 2 * v->ncpus);
        argv[k++] = "--clients";
        argv[k++] = clients;
    }
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)B.p.seed);
    argv[k++] = "--seed";
    argv[k++] = seed;
    if (B.wl->run == bench_fib) {
        snprintf(cutoff, sizeof cutoff, "%d", B.p.cutoff);
        argv[k++] = "--cutoff";
        argv[k++] = cutoff;
    }
    argv[k] = NULL;
    /* usched's own unit and direction: a peer answering in others fails */
    const struct bench_peer_expect want = {
        .workload = B.wl->name,
        .unit = unit(),
        .higher_is_better = higher_better(),
        .threads = v->ncpus,
    };
    struct bench_peer_out out;
    if (B.wl->systems)
        B.wl->systems->run(B.peers_dir, v->peer, &B.p, &out);
    else
        bench_peer_run(B.peers_dir, v->peer, argv, &want, &out);
    if (out.status == BENCH_PEER_SKIPPED) {
        snprintf(v->why, sizeof v->why, "%s", out.msg);
        v->skipped = true;
        B.total_runs -= B.runs - run - 1;
        if (B.json) json_run(v, run, NAN, NULL, NULL, v->why, NULL);
        progress_done();
        return;
    }
    if (out.status == BENCH_PEER_FAILED) {
        v->values[v->nvalues++] = NAN;
        v->nfailed++;
        snprintf(v->last_failure, sizeof v->last_failure, "%s", out.msg);
        if (B.json) json_run(v, run, NAN, NULL, NULL, NULL, out.msg);
        report_run(v, run, NAN, out.msg);
        return;
    }
    v->values[v->nvalues++] = out.value;
    if (B.json) json_run(v, run, out.value, NULL, NULL, NULL, NULL);
    report_run(v, run, out.value, NULL);
}

/* ---- the report ---------------------------------------------------------------------- */

struct summary {
    int n;
    double mean, sd, median;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts x[0..n) and returns its median (n > 0). */
static double median_of(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

static struct summary summarize(const struct variant *v)
{
    struct summary s = {0};
    double *sorted = malloc(sizeof(double) * (size_t)(v->nvalues ? v->nvalues : 1));
    for (int i = 0; i < v->nvalues; i++)
        if (!isnan(v->values[i])) sorted[s.n++] = v->values[i];
    for (int i = 0; i < s.n; i++) s.mean += sorted[i] / s.n;
    for (int i = 0; i < s.n; i++) s.sd += (sorted[i] - s.mean) * (sorted[i] - s.mean);
    s.sd = s.n > 1 ? sqrt(s.sd / (s.n - 1)) : 0;
    if (s.n) s.median = median_of(sorted, s.n);
    free(sorted);
    return s;
}

/* A number for the tables: whole above 10,000, else 4 significant digits. */
static const char *num(char *buf, size_t len, double x)
{
    snprintf(buf, len, fabs(x) >= 1e4 ? "%.0f" : "%.4g", x);
    return buf;
}

/* How many times better a is than b, in the workload's direction. */
static double advantage(double a, double b)
{
    return higher_better() ? a / b : b / a;
}

static int label_width(void)
{
    int w = 8;
    for (int i = 0; i < B.nv; i++)
        if ((int)strlen(B.v[i].label) > w) w = (int)strlen(B.v[i].label);
    return w > 40 ? 40 : w;
}

/* A variant none of whose runs succeeded: how many failed, and the last reason. */
static void print_failures(int w, const struct variant *v)
{
    printf("%-*s failed: %d of %d run%s; last: %s\n", w, v->label, v->nfailed, v->nvalues,
           v->nvalues == 1 ? "" : "s", v->last_failure);
}

/* After a row computed from some runs only: which, and the last failure. */
static void print_partial(const struct variant *v, int ok)
{
    if (v->nfailed)
        printf("  (%d of %d runs; %d failed, last: %s)", ok, v->nvalues, v->nfailed, v->last_failure);
    putchar('\n');
}

/* A usched variant's wake-up latency beside its throughput: the median over
 * its runs of each run's p50 and p99. */
static void print_wakelat(const struct variant *v)
{
    if (!v->lat || !v->nvalues) return;
    double p50[v->nvalues], p99[v->nvalues];
    for (int i = 0; i < v->nvalues; i++) p50[i] = (double)v->lat[i].p50_ns, p99[i] = (double)v->lat[i].p99_ns;
    qsort(p50, (size_t)v->nvalues, sizeof *p50, cmp_double);
    qsort(p99, (size_t)v->nvalues, sizeof *p99, cmp_double);
    printf("  wake p50 %.0f ns p99 %.0f ns", p50[v->nvalues / 2], p99[v->nvalues / 2]);
}

static void print_summary(void)
{
    int w = label_width();
    const struct variant *ref = NULL;
    struct summary rs = {0};
    printf("\n%s: %d run%s per variant, %d CPU%s", B.wl->name, B.runs, B.runs == 1 ? "" : "s",
           B.v[0].ncpus, B.v[0].ncpus == 1 ? "" : "s");
    if (B.wl->timed) printf(", %g s each", B.p.duration);
    if (B.noise) printf(", %d busy process%s beside", B.noise, B.noise == 1 ? "" : "es");
    printf(" (%s is better)\n", higher_better() ? "higher" : "lower");
    printf("%-*s %14s %12s %-6s %s\n", w, "variant", "mean", "stddev", "unit", "diff");
    for (int i = 0; i < B.nv; i++) {
        const struct variant *v = &B.v[i];
        struct summary s = summarize(v);
        if (v->skipped) {
            printf("%-*s %s\n", w, v->label, v->why);
            continue;
        }
        if (!s.n) {
            print_failures(w, v);
            continue;
        }
        char m[32], sd[32];
        printf("%-*s %14s %12s %-6s ", w, v->label, num(m, sizeof m, s.mean), num(sd, sizeof sd, s.sd), unit());
        if (!ref) {
            ref = v;
            rs = s;
            printf("(reference)");
        } else {
            double d = (s.mean - rs.mean) / rs.mean * 100.0;
            bool better = higher_better() ? d > 0 : d < 0;
            printf("%+.2f%% (%s)", d, fabs(d) < 0.005 ? "same" : better ? "better" : "worse");
        }
        print_wakelat(v);
        print_partial(v, s.n);
    }
}

/* The cross-CPU probes of the whole invocation: their spread says whether
 * the runs saw one machine or several (bench_xfer.h). */
static void print_xfer(void)
{
    if (!B.probe) return;
    int n = 0, cap = B.nv * B.runs;
    double x[cap > 0 ? cap : 1];
    for (int i = 0; i < B.nv; i++)
        for (int r = 0; r < B.v[i].nvalues && !B.v[i].skipped; r++)
            if (!isnan(B.v[i].xfer[r])) x[n++] = B.v[i].xfer[r];
    if (!n) {
        printf("\ncross-CPU round trip (CPUs %d and %d): no probe finished\n", B.xa, B.xb);
        return;
    }
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    printf("\ncross-CPU round trip before each run (CPUs %d and %d): min %.0f, median %.0f, max %.0f ns\n",
           B.xa, B.xb, x[0], x[n / 2], x[n - 1]);
    if (x[n - 1] > 2 * x[0])
        printf("  the round trip changed %.1fx between runs: the host moved these CPUs, so runs with unlike\n"
               "  probes ran on unlike machines (compare like probes, or the peers' paired ratios)\n",
               x[n - 1] / x[0]);
}

/* The seed table, for exactly two usched variants: their runs side by side
 * as pgbench prints them, the means, and the first's difference over the
 * second in percent (DragonFly's smt_enable tables: smt=1 over smt=0). */
static void print_seed(void)
{
    if (B.nv != 2 || B.v[0].peer || B.v[1].peer || B.v[0].skipped || B.v[1].skipped) return;
    const struct variant *a = &B.v[0], *b = &B.v[1];
    struct summary sa = summarize(a), sb = summarize(b);
    const char *in = !higher_better() ? "; tps = operations per second"
                     : strcmp(unit(), "tps") ? unit() : NULL;
    printf("\nseed table (%s, %d CPUs%s%s%s):\n", B.wl->name, a->ncpus, a->emulate ? ", SMT emulated" : "",
           in && in[0] != ';' ? "; tps in " : "", in ? in : "");
    printf("%-8s %-24.24s %-24.24s\n", "run", a->label, b->label);
    char m[32];
    for (int r = 0; r < B.runs; r++) {
        char ca[48] = "failed", cb[48] = "failed";
        if (r < a->nvalues && !isnan(a->values[r]))
            snprintf(ca, sizeof ca, "tps = %s", num(m, sizeof m, tps_of(a->values[r])));
        if (r < b->nvalues && !isnan(b->values[r]))
            snprintf(cb, sizeof cb, "tps = %s", num(m, sizeof m, tps_of(b->values[r])));
        printf("%-8d %-24s %-24s\n", r + 1, ca, cb);
    }
    if (!sa.n || !sb.n) return;
    double ma = tps_of(sa.mean), mb = tps_of(sb.mean);
    char ca[48], cb[48];
    snprintf(ca, sizeof ca, "tps = %s", num(m, sizeof m, ma));
    snprintf(cb, sizeof cb, "tps = %s", num(m, sizeof m, mb));
    printf("%-8s %-24s %-24s\n", "mean", ca, cb);
    printf("%-8s %+.1f%% (%s over %s)\n", "diff", (ma - mb) / mb * 100.0, a->label, b->label);
}

/* Counters worth reading for placement quality. */
static bool interesting(const char *name)
{
    static const char *const prefixes[] = {"place_", "steal_", "migrate_", "io_wake_", "io_poll", "contend_", "stall"};
    static const char *const names[] = {"smt_busy_sibling", "wake_cross_llc", "parks", "futex_wakes",
                                        "stolen_fibers", "wake_remote", "claim_collisions", "sync_reused",
                                        "near_wakes"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) return true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i])) return true;
    return false;
}

static void print_counters(void)
{
    int cols[64], nc = 0;
    for (int i = 0; i < B.nv && nc < 64; i++)
        if (!B.v[i].peer && !B.v[i].skipped) cols[nc++] = i;
    if (!nc) return;
    printf("\ndecision counters, summed over each variant's runs (all-zero ones left out):\n");
    printf("%-20s", "counter");
    for (int j = 0; j < nc; j++) printf(" %16.16s", B.v[cols[j]].label);
    printf("\n");
    for (int i = 0; i < B.ncounters; i++) {
        const char *name = usched_stat_name(i);
        bool any = false;
        for (int j = 0; j < nc; j++) any |= B.v[cols[j]].counters[i] != 0;
        if (!interesting(name) || !any) continue;
        printf("%-20s", name);
        for (int j = 0; j < nc; j++) printf(" %16llu", (unsigned long long)B.v[cols[j]].counters[i]);
        printf("\n");
    }
}

/* The median over runs of usched's advantage over v in the same round:
 * runs made minutes apart may have had different machines under them
 * (bench_xfer.h), adjacent ones most likely had the same. NAN if no round
 * has both. */
static double paired_ratio(const struct variant *ref, const struct variant *v)
{
    int n = 0, m = ref->nvalues < v->nvalues ? ref->nvalues : v->nvalues;
    double x[m > 0 ? m : 1];
    for (int r = 0; r < m; r++)
        if (!isnan(ref->values[r]) && !isnan(v->values[r]) && ref->values[r] > 0 && v->values[r] > 0)
            x[n++] = advantage(ref->values[r], v->values[r]);
    return n ? median_of(x, n) : NAN;
}

static void print_peers(void)
{
    int w = label_width();
    const struct variant *ref = &B.v[0];
    struct summary rs = summarize(ref);
    printf("\npeers: median of each system's successful runs (of %d), ratio = how many times usched (%s) "
           "is better;\npaired = the median of the ratios of runs made one after the other (run 1 to run 1, ...)\n",
           B.runs, ref->label);
    printf("%-*s %14s %-6s %8s %8s %5s\n", w, "system", "result", "unit", "ratio", "paired", "runs");
    for (int i = 0; i < B.nv; i++) {
        const struct variant *v = &B.v[i];
        if (!v->peer && v != ref) continue;
        const char *name = v->peer ? v->peer : "usched";
        struct summary s = summarize(v);
        if (v->skipped) {
            printf("%-*s skipped: %s\n", w, name, v->why);
            continue;
        }
        if (!s.n) {
            print_failures(w, v);
            continue;
        }
        char m[32], runs[32], paired[32] = "-";
        double pr = paired_ratio(ref, v);
        if (!isnan(pr)) snprintf(paired, sizeof paired, "%.2fx", pr);
        snprintf(runs, sizeof runs, "%d/%d", s.n, v->nvalues);
        printf("%-*s %14s %-6s %7.2fx %8s %5s%s", w, name, num(m, sizeof m, s.median), unit(),
               advantage(rs.median, s.median), paired, runs,
               v->peer && advantage(rs.median, s.median) < 1 ? "  (usched loses)" : "");
        print_partial(v, s.n);
    }
}

/* ---- options -------------------------------------------------------------------------- */

static void print_usage(void)
{
    fputs(bench_usage, stdout);
    for (int i = 0; i < bench_nworkloads; i++)
        printf("  %-9s %s (%s)\n", bench_workloads[i].name, bench_workloads[i].summary,
               bench_workloads[i].info->unit);
}

/* Checks --n against the workload's rules (those of the peers' protocol). */
static int check_n(long n, bool have_n)
{
    const char *w = B.wl->name;
    if (!B.wl->info->default_n) {
        if (have_n) return usage_error("--n: %s has no size, it runs for --duration", w);
        return 0;
    }
    if (!strcmp(w, "fib") && n > 90) return usage_error("--n '%ld': fib(N) needs N <= 90", n);
    if (!strcmp(w, "build") && n > 10000000)
        return usage_error("--n '%ld': build needs at most 10000000 jobs", n);
    if (!strcmp(w, "skynet")) {
        long x = n;
        while (x > 1 && x % 10 == 0) x /= 10;
        if (x != 1 || n < 10) return usage_error("--n '%ld': skynet leaves must be a power of 10, >= 10", n);
    }
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    enum { O_COMPARE = 256, O_PEERS, O_PEERS_DIR, O_JSON, O_CLIENTS, O_PROGRESS, O_NOISE, O_TRACE, O_NO_PROBE,
           O_CUTOFF, O_NO_INLINE, O_FRESH, O_FRESH_CHILD };
    static const struct option opts[] = {
        {"policy", required_argument, NULL, 'p'},     {"knobs", required_argument, NULL, 'k'},
        {"topology", required_argument, NULL, 't'},   {"cpus", required_argument, NULL, 'c'},
        {"clients", required_argument, NULL, O_CLIENTS}, {"n", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 'd'},   {"runs", required_argument, NULL, 'r'},
        {"compare", required_argument, NULL, O_COMPARE}, {"peers", no_argument, NULL, O_PEERS},
        {"peers-dir", required_argument, NULL, O_PEERS_DIR}, {"json", no_argument, NULL, O_JSON},
        {"progress", no_argument, NULL, O_PROGRESS}, {"emulate", no_argument, NULL, 'e'},
        {"trace", required_argument, NULL, O_TRACE},
        {"noise", required_argument, NULL, O_NOISE}, {"no-probe", no_argument, NULL, O_NO_PROBE},
        {"cutoff", required_argument, NULL, O_CUTOFF}, {"no-inline", no_argument, NULL, O_NO_INLINE},
        {"fresh", no_argument, NULL, O_FRESH},       {"fresh-child", required_argument, NULL, O_FRESH_CHILD},
        {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0},
    };
    int net = bench_net_front(argc, argv); /* the network workloads' sweep */
    if (net >= 0) return net;
    struct variant base = {0};
    const char *compare = NULL;
    long n = 0, runs = DEFAULT_RUNS, clients = 0, noise = 0, cutoff = 0;
    bool have_n = false;
    free(B.v); /* variants a parse-only call (the fuzz target) left behind */
    free(B.argv);
    memset(&B, 0, sizeof B);
    B.child_variant = B.child_run = -1;
    /* the command line as given (getopt permutes argv), for --fresh */
    if (!(B.argv = malloc(((size_t)argc + 1) * sizeof *B.argv))) return 1;
    memcpy(B.argv, argv, (size_t)argc * sizeof *argv);
    B.argv[argc] = NULL;
    B.argc = argc;
    B.p.duration = DEFAULT_DURATION;
    B.p.seed = PEER_SEED;
    B.p.cutoff = PEER_FIB_CUTOFF;
    B.probe = true;
    int o;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":p:k:t:c:n:d:r:eh", opts, NULL)) != -1) {
        switch (o) {
        case 'p': snprintf(base.policy, sizeof base.policy, "%s", optarg); break;
        case 'k': append(base.knobs, sizeof base.knobs, ",", optarg); break;
        case 't':
            snprintf(base.topology, sizeof base.topology, "%s", optarg);
            base.has_topology = true;
            break;
        case 'c':
            snprintf(base.cpus, sizeof base.cpus, "%s", optarg);
            base.has_cpus = true;
            break;
        case O_CLIENTS:
            if (parse_long("--clients", optarg, 1, 100000, &clients)) return 2;
            break;
        case 'n':
            if (parse_long("--n", optarg, 1, LONG_MAX / 2, &n)) return 2;
            have_n = true;
            break;
        case 'd': {
            char *end;
            errno = 0;
            B.p.duration = strtod(optarg, &end);
            if (!*optarg || *end || errno == ERANGE || !(B.p.duration > 0 && B.p.duration <= 86400))
                return usage_error("--duration '%s': must be seconds in (0, 86400]", optarg);
            B.p.have_duration = 1;
            break;
        }
        case 'r':
            if (parse_long("--runs", optarg, 1, MAX_RUNS, &runs)) return 2;
            break;
        case O_COMPARE: compare = optarg; break;
        case O_PEERS: B.peers = true; break;
        case O_PEERS_DIR: B.peers_dir_opt = optarg; break;
        case O_JSON: B.json = true; break;
        case O_PROGRESS: B.progress = true; break;
        case O_TRACE: B.trace = optarg; break;
        case O_NO_PROBE: B.probe = false; break;
        case O_CUTOFF:
            if (parse_long("--cutoff", optarg, 2, 60, &cutoff)) return 2;
            B.p.cutoff = (int)cutoff;
            break;
        case O_NO_INLINE: B.p.no_inline = 1; break;
        case O_FRESH: base.fresh = true; break;
        case O_FRESH_CHILD:
            if (sscanf(optarg, "%d,%d", &B.child_variant, &B.child_run) != 2 || B.child_variant < 0 ||
                B.child_run < 0)
                return usage_error("--fresh-child '%s': internal option, VARIANT,RUN", optarg);
            break;
        case O_NOISE:
            if (parse_long("--noise", optarg, 0, BENCH_NOISE_MAX, &noise)) return 2;
            break;
        case 'e': base.emulate = true; break;
        case 'h': print_usage(); return 0;
        case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    const char *wname = optind < argc ? argv[optind++] : "select";
    if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
    if (!(B.wl = bench_workload_find(wname))) {
        char names[256] = "";
        for (int i = 0; i < bench_nworkloads; i++) append(names, sizeof names, ", ", bench_workloads[i].name);
        return usage_error("workload '%s': unknown (%s)", wname, names);
    }
    if (clients && strcmp(B.wl->name, "select") && strcmp(B.wl->name, "pgsim"))
        return usage_error("--clients: only select and pgsim have clients, not %s", wname);
    if (cutoff && B.wl->run != bench_fib) return usage_error("--cutoff: only fib has a cutoff, not %s", wname);
    if (B.p.no_inline && B.wl->run != bench_fib && B.wl->run != bench_skynet && B.wl->run != bench_spawn)
        return usage_error("--no-inline: only fib, skynet and spawn join children, not %s", wname);
    B.p.n = have_n ? n : B.wl->info->default_n;
    if (check_n(B.p.n, have_n)) return 2;
    if (B.peers_dir_opt && !B.peers) return usage_error("--peers-dir needs --peers");
    B.p.clients = (int)clients;
    B.runs = (int)runs;
    B.noise = (int)noise;
    B.ncounters = usched_stat_count();

    /* the variants: --compare, or the one --policy, or every policy */
    if (compare) {
        if (variants_from_compare(&base, compare)) return 2;
    } else if (base.policy[0]) {
        snprintf(base.label, sizeof base.label, "policy=%s%s%.200s", base.policy, base.knobs[0] ? "," : "",
                 base.knobs);
        if (variant_check(&base, NULL)) return 2;
        variant_add(&base);
    } else if (variants_all_policies(&base)) {
        return 2;
    }
    for (int i = 0; i < B.nv; i++)
        if (B.v[i].emulate && !B.v[i].has_topology && !getenv("USCHED_TOPOLOGY"))
            return usage_error("--emulate needs a virtual topology (--topology T)");
    if (B.peers && variants_peers()) return 1;
    for (int i = 0; i < B.nv; i++)
        if (B.v[i].fresh && B.wl->systems)
            return usage_error("--fresh: %s runs its servers in this process (only the workloads of "
                               "the peer programs run fresh)", wname);
    if (bench_parse_only) return 0;
    for (int i = 0; i < B.nv; i++) {
        struct variant *v = &B.v[i];
        if (!v->peer) v->counters = calloc((size_t)B.ncounters, sizeof *v->counters);
        if (!v->peer) v->lat = calloc((size_t)B.runs, sizeof *v->lat);
        v->values = calloc((size_t)B.runs, sizeof *v->values);
        v->xfer = calloc((size_t)B.runs, sizeof *v->xfer);
        if ((!v->peer && (!v->counters || !v->lat)) || !v->values || !v->xfer) {
            fputs("usched bench: out of memory\n", stderr);
            return 1;
        }
        if (v->skipped) {
            if (B.json)
                json_run(v, 0, NAN, NULL, NULL, v->why, NULL);
            else
                printf("%s %s: %s\n", B.wl->name, v->label, v->why);
        } else {
            B.total_runs += B.runs;
        }
    }
    if (B.child_variant >= 0) return fresh_child();
    /* One CPU allowed: no probe (no pair of CPUs to measure). */
    if (B.probe && bench_xfer_cpus(&B.xa, &B.xb) < 0) B.probe = false;
    B.progress_tty = isatty(STDERR_FILENO);
    B.progress |= B.progress_tty;
    char err[256];
    if (bench_noise_start(B.noise, err, sizeof err)) {
        fprintf(stderr, "usched bench: %s\n", err);
        return 1;
    }
    static bool at_exit;
    if (!at_exit) at_exit = !atexit(bench_noise_stop); /* a failed run exits */
    B.t0 = bench_now();

    /* interleaved: every variant's run 1, then every variant's run 2, ... */
    for (int r = 0; r < B.runs; r++)
        for (int i = 0; i < B.nv; i++) {
            struct variant *v = &B.v[i];
            if (v->skipped) continue;
            progress_start(v, r);
            /* Between runs, on a machine otherwise as quiet as the runs
             * leave it: 10,000 round trips, 1-4 ms here. */
            v->xfer[r] = B.probe ? bench_xfer_probe(B.xa, B.xb, 10000) : NAN;
            if (v->peer)
                run_peer(v, r);
            else
                run_usched(v, r);
        }
    progress_clear();
    bench_noise_stop();
    if (!B.json) {
        print_summary();
        print_seed();
        print_xfer();
        print_counters();
        if (B.peers) print_peers();
    }
    for (int i = 0; i < B.nv; i++) {
        free(B.v[i].values);
        free(B.v[i].counters);
        free(B.v[i].lat);
        free(B.v[i].xfer);
    }
    free(B.v);
    B.v = NULL; /* the network sweep calls cmd_bench once per point */
    B.nv = 0;
    free(B.argv);
    B.argv = NULL;
    return fflush(stdout) == 0 ? 0 : 1;
}
