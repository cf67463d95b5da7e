/*
 * usched bench: the runs (bench.h). A workload runs on usched variants
 * (policies, knobs, topologies: bench_variant.c) and, with --peers, on the
 * peer programs, all interleaved run by run (A B A B, not A A B B) so drift
 * of the machine hits every variant alike. A usched run happens on a new
 * scheduler in this process, or with --fresh in a new process (this
 * executable, re-executed with the same arguments and --fresh-child), as
 * every peer run is. --noise N runs N busy processes beside every run
 * (bench_noise.h), the noisy neighbour of a shared machine. A network
 * workload runs the whole of this once per point of its sweep
 * (bench_net.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_net.h"
#include "bench_noise.h"
#include "bench_peer.h"
#include "bench_proc.h"
#include "bench_xfer.h"
#include "harness.h"

struct bench_state B;

/* The trace file of a run: --trace FILE itself when the bench makes one
 * usched run, else FILE with "-<variant>-<run>" before its extension. A Go
 * peer's run (Go's own execution trace, for go tool trace) is always
 * FILE-<variant>-<run>.gotrace, in place of the extension. */
static void trace_path(char *buf, size_t len, const struct variant *v, int run)
{
    int usched_runs = 0;
    for (int i = 0; i < B.nv; i++) usched_runs += !B.v[i].peer && !B.v[i].skipped;
    if (!v->peer && usched_runs * B.c->runs <= 1) {
        snprintf(buf, len, "%s", B.c->trace);
        return;
    }
    const char *dot = strrchr(B.c->trace, '.');
    const char *slash = strrchr(B.c->trace, '/');
    if (!dot || (slash && dot < slash)) dot = B.c->trace + strlen(B.c->trace);
    snprintf(buf, len, "%.*s-%d-%d%s", (int)(dot - B.c->trace), B.c->trace, (int)(v - B.v) + 1, run + 1,
             v->peer ? ".gotrace" : dot);
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
    if (usched_create(&s) < 0 || bench_variant_apply(s, v, err, sizeof err) < 0) {
        fprintf(stderr, "usched bench: %s: %s\n", v->label, usched_last_error());
        exit(1);
    }
    /* yield runs on one worker (bench/WORKLOADS.md) unless the variant names CPUs */
    if (B.c->wl->run == bench_yield && !v->set.has_cpus && usched_set(s, "cpus", "0") < 0) {
        fprintf(stderr, "usched bench: %s: cpus '0': %s\n", v->label, usched_last_error());
        exit(1);
    }
    if (B.c->trace) {
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
    struct bench_params p = B.c->p;
    rec->ncpus = usched_ncpus(s);
    if (!p.clients) p.clients = strcmp(B.c->wl->name, "pgsim") ? 2 * rec->ncpus : 2; /* pgsim: pgbench -c 2 */
    bench_fail_reset();
    usched_stats_reset(s);
    int r = B.c->wl->run(s, &p, &out);
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
    char **av = calloc((size_t)B.c->argc + 4, sizeof *av);
    if (!av) {
        fputs("usched bench: out of memory\n", stderr);
        exit(1);
    }
    av[0] = "/proc/self/exe";
    memcpy(av + 1, B.c->argv, (size_t)B.c->argc * sizeof *av);
    av[B.c->argc + 1] = "--fresh-child";
    av[B.c->argc + 2] = which;
    struct bench_proc p;
    const struct bench_proc_opts o = {.keep_stderr = true, .fd3 = fd[1]};
    char err[300];
    int r = bench_proc_start(&p, av, &o, err, sizeof err);
    free(av);
    close(fd[1]);
    if (r < 0) {
        close(fd[0]);
        fprintf(stderr, "usched bench: --fresh: %s\n", err);
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
    bench_proc_wait(&p, INFINITY, &st);
    if (!buf || got < want) {
        free(buf);
        bench_progress_clear();
        fprintf(stderr, "usched bench: %s %s run %d: the fresh process sent no result (%s %d)\n",
                B.c->wl->name, v->label, run + 1, WIFSIGNALED(st) ? "signal" : "exit status",
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
    int i = B.c->child_variant;
    if (i >= B.nv || B.v[i].peer || B.v[i].skipped || B.c->child_run >= B.c->runs) {
        fprintf(stderr, "usched bench: --fresh-child %d,%d: no such usched run\n", i, B.c->child_run);
        return 2;
    }
    struct run_rec rec = {0};
    uint64_t *c = calloc((size_t)B.ncounters + 1, sizeof *c);
    if (!c) return 1;
    measure_here(&B.v[i], B.c->child_run, &rec, c);
    bool ok = write(3, &rec, sizeof rec) == (ssize_t)sizeof rec &&
              write(3, c, (size_t)B.ncounters * sizeof *c) == (ssize_t)((size_t)B.ncounters * sizeof *c);
    free(c);
    return ok && rec.ok ? 0 : 1;
}

/* With --noise, at the end of run `run` of v: the CPUs the busy processes
 * had during it (bench_noise.h), before its lines are printed. */
static void noise_share(struct variant *v, int run)
{
    if (!B.c->noise) return;
    double c1 = bench_noise_cpu_s(), dt = bench_now() - B.noise_t0;
    v->noise_cpus[run] = isnan(c1) || isnan(B.noise_c0) || dt <= 0 ? NAN : (c1 - B.noise_c0) / dt;
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
    if (v->set.fresh)
        measure_fresh(v, run, &rec, c);
    else
        measure_here(v, run, &rec, c);
    noise_share(v, run);
    v->ncpus = rec.ncpus;
    for (int i = 0; i < B.ncounters; i++) v->counters[i] += c[i];
    v->lat[run] = rec.lat;
    if (!rec.ok) {
        bench_progress_clear();
        fprintf(stderr, "usched bench: %s %s run %d failed: %s\n", B.c->wl->name, v->label, run + 1,
                rec.err);
        exit(1);
    }
    v->values[v->nvalues++] = rec.value;
    if (B.c->json) bench_json_run(v, run, rec.value, c, &v->lat[run], NULL, NULL);
    free(c);
    bench_report_run(v, run, rec.value, NULL);
    if (!B.c->json) {
        const struct usched_wakelat *l = &v->lat[run];
        printf("  wake-up latency: p50 %llu ns, p99 %llu ns (%llu wake-ups)\n", (unsigned long long)l->p50_ns,
               (unsigned long long)l->p99_ns, (unsigned long long)l->count);
    }
}

/* The peer's arguments: the same work as the usched runs. */
static void run_peer(struct variant *v, int run)
{
    char threads[16], n[32], dur[32], clients[16], seed[32], cutoff[16], trace[PATH_MAX];
    char *argv[20];
    int k = 0;
    v->ncpus = B.v[0].ncpus;
    argv[k++] = NULL; /* the path, filled in by bench_peer_run */
    argv[k++] = (char *)B.c->wl->name;
    snprintf(threads, sizeof threads, "%d", v->ncpus);
    argv[k++] = "--threads";
    argv[k++] = threads;
    if (B.c->wl->info->default_n) {
        snprintf(n, sizeof n, "%ld", B.c->p.n);
        argv[k++] = "--n";
        argv[k++] = n;
    }
    if (B.c->wl->timed || B.c->p.have_duration) {
        snprintf(dur, sizeof dur, "%g", B.c->p.duration);
        argv[k++] = "--duration";
        argv[k++] = dur;
    }
    if (!strcmp(B.c->wl->name, "select")) {
        snprintf(clients, sizeof clients, "%d", B.c->p.clients ? B.c->p.clients : 2 * v->ncpus);
        argv[k++] = "--clients";
        argv[k++] = clients;
    }
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)B.c->p.seed);
    argv[k++] = "--seed";
    argv[k++] = seed;
    if (B.c->wl->run == bench_fib) {
        snprintf(cutoff, sizeof cutoff, "%d", B.c->p.cutoff);
        argv[k++] = "--cutoff";
        argv[k++] = cutoff;
    }
    if (B.c->trace && !strcmp(v->peer, "go")) { /* the peer that has a tracer of its own */
        trace_path(trace, sizeof trace, v, run);
        argv[k++] = "--trace";
        argv[k++] = trace;
    }
    argv[k] = NULL;
    /* usched's own unit and direction: a peer answering in others fails */
    const struct bench_peer_expect want = {
        .workload = B.c->wl->name,
        .unit = B.c->wl->info->unit,
        .higher_is_better = B.c->wl->info->higher_is_better != 0,
        .threads = v->ncpus,
    };
    struct bench_peer_out out;
    if (B.c->wl->systems)
        B.c->wl->systems->run(B.peers_dir, v->peer, &B.c->p, &out);
    else
        bench_peer_run(B.peers_dir, v->peer, argv, &want, &out);
    noise_share(v, run);
    if (out.status == BENCH_PEER_SKIPPED) {
        snprintf(v->why, sizeof v->why, "%s", out.msg);
        v->skipped = true;
        B.total_runs -= B.c->runs - run - 1;
        if (B.c->json) bench_json_run(v, run, NAN, NULL, NULL, v->why, NULL);
        B.done_runs++;
        return;
    }
    if (out.status == BENCH_PEER_FAILED) {
        v->values[v->nvalues++] = NAN;
        v->nfailed++;
        snprintf(v->last_failure, sizeof v->last_failure, "%s", out.msg);
        if (B.c->json) bench_json_run(v, run, NAN, NULL, NULL, NULL, out.msg);
        bench_report_run(v, run, NAN, out.msg);
        return;
    }
    v->values[v->nvalues++] = out.value;
    if (B.c->json) bench_json_run(v, run, out.value, NULL, NULL, NULL, NULL);
    bench_report_run(v, run, out.value, NULL);
}

/* The runs of one point (of the only one, for the workloads without a
 * sweep): the exit status. */
static int run_point(const char *server_cpus)
{
    const struct bench_config *c = B.c;
    int rc = bench_variants(server_cpus);
    if (!rc && c->peers) rc = bench_variants_peers();
    for (int i = 0; i < B.nv && !rc; i++)
        if (B.v[i].set.fresh && c->wl->systems)
            rc = bench_usage_error(B.e, "bench",
                                   "--fresh: %s runs its servers in this process (only the workloads of "
                                   "the peer programs run fresh)", c->wl->name);
    if (rc || c->parse_only) return rc;
    for (int i = 0; i < B.nv; i++) {
        struct variant *v = &B.v[i];
        if (!v->peer) v->counters = calloc((size_t)B.ncounters, sizeof *v->counters);
        if (!v->peer) v->lat = calloc((size_t)c->runs, sizeof *v->lat);
        v->values = calloc((size_t)c->runs, sizeof *v->values);
        v->xfer = calloc((size_t)c->runs, sizeof *v->xfer);
        v->noise_cpus = calloc((size_t)c->runs, sizeof *v->noise_cpus);
        if ((!v->peer && (!v->counters || !v->lat)) || !v->values || !v->xfer || !v->noise_cpus) {
            fputs("usched bench: out of memory\n", stderr);
            return 1;
        }
        if (v->skipped) {
            if (c->json)
                bench_json_run(v, 0, NAN, NULL, NULL, v->why, NULL);
            else
                printf("%s %s: %s\n", c->wl->name, v->label, v->why);
        } else {
            B.total_runs += c->runs;
        }
    }
    if (c->child_variant >= 0) return fresh_child();
    /* One CPU allowed: no probe (no pair of CPUs to measure). */
    if (B.probe && bench_xfer_cpus(&B.xa, &B.xb) < 0) B.probe = false;
    B.progress_tty = isatty(STDERR_FILENO);
    B.progress |= B.progress_tty;
    char err[256];
    if (bench_noise_start(c->noise, err, sizeof err)) {
        fprintf(stderr, "usched bench: %s\n", err);
        return 1;
    }
    static bool at_exit;
    if (!at_exit) at_exit = !atexit(bench_noise_stop); /* a failed run exits */
    B.t0 = bench_now();

    /* interleaved: every variant's run 1, then every variant's run 2, ... */
    for (int r = 0; r < c->runs; r++)
        for (int i = 0; i < B.nv; i++) {
            struct variant *v = &B.v[i];
            if (v->skipped) continue;
            bench_progress_start(v, r);
            /* Between runs, on a machine otherwise as quiet as the runs
             * leave it: 10,000 round trips, 1-4 ms here. */
            v->xfer[r] = B.probe ? bench_xfer_probe(B.xa, B.xb, 10000) : NAN;
            if (bench_warmup(c->warmup_ms) < 0)
                fputs("usched bench: --warmup: a spinning thread could not start\n", stderr);
            if (c->noise) {
                B.noise_c0 = bench_noise_cpu_s();
                B.noise_t0 = bench_now();
            }
            if (v->peer)
                run_peer(v, r);
            else
                run_usched(v, r);
        }
    bench_progress_clear();
    bench_noise_stop();
    if (!c->json) bench_report();
    return fflush(stdout) == 0 ? 0 : 1;
}

int bench_run(const struct bench_config *c, struct bench_error *e)
{
    int npoints = 1, rc = 0;
    if (c->net >= 0 && (rc = bench_net_sweep(c, &npoints, e))) return rc;
    for (int i = 0; i < npoints && !rc; i++) {
        memset(&B, 0, sizeof B);
        B.c = c;
        B.e = e;
        B.ncounters = usched_stat_count();
        B.probe = c->probe;
        B.progress = c->progress;
        rc = run_point(c->net >= 0 ? bench_net_point(c, i) : NULL);
        bench_variants_free();
    }
    return rc;
}
