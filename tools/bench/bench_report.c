/*
 * usched bench: what it prints (harness.h). On stdout, once: a line per run
 * (pgbench-style `tps = N`, or `failed: reason`) or with --json a JSON
 * object per run, then the tables: mean, standard deviation and the
 * difference of each variant to the first in percent; with exactly two
 * usched variants, the seed table (the two runs side by side, the means and
 * the difference of the first over the second, as DragonFly's smt_enable
 * tables gave it); the cross-CPU probes; the decision counters of each
 * usched variant summed over its runs; with --peers a table of each
 * system's median over its successful runs, how many of its runs succeeded
 * with the last failure's reason, and its ratio to usched. On stderr, when
 * it is a terminal or with --progress: one line, rewritten in place, with
 * the run count and the elapsed time.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

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

static const char *unit(void)
{
    return B.c->wl->info->unit;
}

static bool higher_better(void)
{
    return B.c->wl->info->higher_is_better != 0;
}

/* Operations per second for the `tps = N` line: the value itself for
 * throughputs; 1e9/ns per operation; 1000/ms for whole-run workloads. */
static double tps_of(double value)
{
    if (higher_better()) return value;
    if (!strncmp(unit(), "ns", 2)) return 1e9 / value;
    return 1e3 / value;
}

/* ---- progress (stderr) ------------------------------------------------------------- */

/* One line rewritten in place (hyperfine, pgbench -P): on a terminal erased
 * with ESC[K, elsewhere (--progress into a file or pipe) overwritten with
 * spaces after a carriage return. The report itself is only on stdout. */
void bench_progress_clear(void)
{
    if (!B.progress || !B.progress_len) return;
    if (B.progress_tty)
        fputs("\r\033[K", stderr);
    else
        fprintf(stderr, "\r%*s\r", B.progress_len, "");
    B.progress_len = 0;
    fflush(stderr);
}

void bench_progress_start(const struct variant *v, int run)
{
    if (!B.progress) return;
    bench_progress_clear();
    char line[512];
    int n = snprintf(line, sizeof line, "[%d/%d runs, %.1f s] %s %s run %d/%d ...", B.done_runs + 1,
                     B.total_runs, bench_now() - B.t0, B.c->wl->name, v->label, run + 1, B.c->runs);
    fputs(line, stderr);
    B.progress_len = n < (int)sizeof line ? n : (int)sizeof line - 1;
    fflush(stderr);
}

static void progress_done(void)
{
    B.done_runs++;
}

/* ---- one run ------------------------------------------------------------------------ */

void bench_json_run(const struct variant *v, int run, double value, const uint64_t *counters,
                    const struct usched_wakelat *lat, const char *skipped, const char *failed)
{
    printf("{\"workload\":\"%s\",\"system\":", B.c->wl->name);
    json_str(stdout, v->peer ? v->peer : "usched");
    printf(",\"variant\":");
    json_str(stdout, v->label);
    printf(",\"policy\":");
    json_str(stdout, v->peer ? NULL : bench_variant_policy(v));
    printf(",\"knobs\":");
    json_str(stdout, v->peer ? NULL : v->set.knobs);
    printf(",\"topology\":");
    json_str(stdout, v->peer || !v->set.has_topology ? NULL : v->set.topology);
    printf(",\"cpus\":");
    json_str(stdout, v->peer || !v->set.has_cpus ? NULL : v->set.cpus);
    printf(",\"threads\":%d,\"noise\":%d,\"run\":%d", v->ncpus, B.c->noise, run + 1);
    if (B.c->wl->run == bench_fib) printf(",\"cutoff\":%d", B.c->p.cutoff);
    if (B.c->p.no_inline) printf(",\"no_inline\":true");
    if (B.c->p.call) printf(",\"call\":true");
    /* where the run happened: a process of its own, or inside this one */
    printf(",\"process\":\"%s\"", v->peer || v->set.fresh ? "fresh" : "bench");
    printf(",\"value\":");
    if (skipped || failed || isnan(value))
        fputs("null", stdout);
    else
        printf("%.6g", value);
    printf(",\"unit\":\"%s\",\"higher_is_better\":%s", unit(), higher_better() ? "true" : "false");
    if (B.c->noise && !skipped) {
        if (isnan(v->noise_cpus[run]))
            printf(",\"noise_cpus\":null");
        else
            printf(",\"noise_cpus\":%.3f", v->noise_cpus[run]);
    }
    if (B.probe && !skipped) {
        if (isnan(v->xfer[run]))
            printf(",\"xfer_ns\":null");
        else
            printf(",\"xfer_ns\":%.1f", v->xfer[run]);
    }
    if (B.c->wl->systems && B.c->wl->systems->json) B.c->wl->systems->json(stdout);
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
void bench_report_run(const struct variant *v, int run, double value, const char *failed)
{
    progress_done();
    if (B.c->json) return;
    bench_progress_clear();
    printf("%s %s run %d: ", B.c->wl->name, v->label, run + 1);
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
    if (B.c->noise) {
        if (isnan(v->noise_cpus[run]))
            printf("  busy processes beside the run: their CPU time could not be read\n");
        else
            printf("  busy processes beside the run: %.2f CPUs\n", v->noise_cpus[run]);
    }
    fflush(stdout);
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
    printf("\n%s: %d run%s per variant, %d CPU%s", B.c->wl->name, B.c->runs, B.c->runs == 1 ? "" : "s",
           B.v[0].ncpus, B.v[0].ncpus == 1 ? "" : "s");
    if (B.c->wl->timed) printf(", %g s each", B.c->p.duration);
    if (B.c->noise) printf(", %d busy process%s beside", B.c->noise, B.c->noise == 1 ? "" : "es");
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
    int n = 0, cap = B.nv * B.c->runs;
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
    printf("\nseed table (%s, %d CPUs%s%s%s):\n", B.c->wl->name, a->ncpus, a->set.emulate ? ", SMT emulated" : "",
           in && in[0] != ';' ? "; tps in " : "", in ? in : "");
    printf("%-8s %-24.24s %-24.24s\n", "run", a->label, b->label);
    char m[32];
    for (int r = 0; r < B.c->runs; r++) {
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
    static const char *const names[] = {"smt_busy_sibling", "wake_cross_llc", "spins", "parks", "futex_wakes",
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
           B.c->runs, ref->label);
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

/* With --noise: how many CPUs the busy processes had beside each variant,
 * so that a system that wins by taking the neighbour's share shows it. */
static void print_noise(void)
{
    if (!B.c->noise) return;
    int w = label_width();
    printf("\nCPUs the %d busy process%s had beside each variant (CPU time over the run's wall time,\n"
           "setup included; median of the runs; this machine has %ld online):\n",
           B.c->noise, B.c->noise == 1 ? "" : "es", sysconf(_SC_NPROCESSORS_ONLN));
    for (int i = 0; i < B.nv; i++) {
        const struct variant *v = &B.v[i];
        if (v->skipped) continue;
        double x[v->nvalues > 0 ? v->nvalues : 1];
        int n = 0;
        for (int r = 0; r < v->nvalues; r++)
            if (!isnan(v->noise_cpus[r])) x[n++] = v->noise_cpus[r];
        if (!n) {
            printf("%-*s  not read\n", w, v->label);
            continue;
        }
        printf("%-*s  %.2f\n", w, v->label, median_of(x, n));
    }
}

void bench_report(void)
{
    print_summary();
    print_seed();
    print_xfer();
    print_noise();
    print_counters();
    if (B.c->peers) print_peers();
}
