/*
 * usched trace FILE [--svg OUT.svg] [--top N]
 *
 * Reads a trace written by USCHED_TRACE / usched_set(s, "trace", FILE) /
 * --trace (Chrome trace / Perfetto JSON with a top-level "usched" object,
 * docs/trace.md) with jansson, and prints a summary: per CPU busy fraction,
 * steals and migrations by topology level, wake-up latency p50/p90/p99/max,
 * the longest runs and the fibers that waited longest. --svg also draws a
 * timeline: one lane per CPU, ordered and bracketed by package, LLC and
 * core, runs coloured by fiber, wake-ups that crossed an LLC or landed
 * beside a busy SMT sibling marked.
 *
 * Exit status: 0 done; 1 the file cannot be read or is not a usched trace
 * (the message names the file and what is wrong), or OUT cannot be
 * written; 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_opts.h"
#include "usched.h"
#include "usched/policy.h"

int cmd_trace(int argc, char **argv);

static const char trace_usage[] =
    "usage: usched trace FILE [--svg OUT.svg] [--top N]\n"
    "\n"
    "Summarises a trace written with USCHED_TRACE=FILE (or --trace FILE on usched\n"
    "bench and usched serve): per CPU busy fraction, steals and migrations by\n"
    "level, wake-up latency percentiles, the longest runs, the fibers that\n"
    "waited longest. The file itself opens in ui.perfetto.dev or chrome://tracing.\n"
    "\n"
    "  -s, --svg OUT.svg   also draw a timeline: a lane per CPU, grouped by\n"
    "                      package, LLC and core; runs coloured by fiber; wake-ups\n"
    "                      that crossed an LLC (red) or landed beside a busy SMT\n"
    "                      sibling (orange) marked\n"
    "  -n, --top N         rows in the longest-runs and longest-waits lists\n"
    "                      (default 5)\n"
    "  -h, --help          print this help\n";

#define NLEVELS USCHED_NLEVELS
static const char *const level_names[NLEVELS] = {
#define X(id, name, desc) [USCHED_LVL_##id] = #name,
    USCHED_LEVEL_MAP(X)
#undef X
};

struct tcpu {
    int cpu, package, llc, core;
    double busy_us, parked_us;
    unsigned runs;
};

struct run {
    double ts, dur; /* microseconds */
    uint64_t fiber;
    int cpu;
    int xllc, busy_sibling, woken; /* woken: 1 by a wake-up or I/O, 2 by its spawn */
    double wait_ns;
    const char *name;
};

struct waits {
    uint64_t fiber;
    double max_ns, total_ns;
    unsigned n;
    const char *name;
};

/* What a run that blocked waited for ("on", docs/trace.md). */
static const char *const block_names[] = {"mutex", "cond", "chan", "sem", "wg", "sleep",
                                          "join", "io", "offload", "other"};
#define NBLOCKS ((int)(sizeof block_names / sizeof block_names[0]))

struct trace {
    const char *path;
    json_t *root;
    int ncpus;
    const char *policy;
    uint64_t dropped;
    struct tcpu *cpu;
    struct run *runs;
    size_t nruns, caprun;
    struct run *parks; /* parked slices (ts, dur, cpu), for the timeline */
    size_t nparks, cappark;
    unsigned steals[NLEVELS], migrations[NLEVELS];
    unsigned long blocked[NBLOCKS + 1]; /* runs that ended blocked, by "on" (last: unknown) */
    unsigned long stalls;               /* the stall monitor's events */
    double t0, t1;
};

static int block_of(const char *on)
{
    for (int i = 0; i < NBLOCKS; i++)
        if (on && !strcmp(on, block_names[i])) return i;
    return NBLOCKS;
}

static int bad(const struct trace *t, const char *fmt, const char *what)
{
    fprintf(stderr, "usched trace: %s: ", t->path);
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    return 1;
}

static int level_of(const char *name)
{
    for (int l = 0; name && l < NLEVELS; l++)
        if (!strcmp(name, level_names[l])) return l;
    return -1;
}

static int num(json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v)) return -1;
    *out = json_number_value(v);
    return 0;
}

/* Reads the "usched" object: the policy and each CPU's place. */
static int load_topology(struct trace *t)
{
    json_t *u = json_object_get(t->root, "usched");
    if (!json_is_object(u))
        return bad(t, "%s", "not a usched trace (no \"usched\" object; write one with USCHED_TRACE=FILE)");
    json_t *cpus = json_object_get(u, "cpus");
    size_t n = json_array_size(cpus);
    if (!json_is_array(cpus) || n == 0 || n > 65536) return bad(t, "%s", "\"usched\".\"cpus\" is not a list of CPUs");
    t->policy = json_string_value(json_object_get(u, "policy"));
    if (!t->policy) t->policy = "?";
    double d = 0;
    if (num(u, "dropped", &d) == 0 && d > 0) t->dropped = (uint64_t)d;
    t->ncpus = (int)n;
    t->cpu = calloc(n, sizeof *t->cpu);
    if (!t->cpu) return bad(t, "%s", "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(cpus, i);
        double cpu, pk, llc, core;
        if (num(c, "cpu", &cpu) || num(c, "package", &pk) || num(c, "llc", &llc) || num(c, "core", &core) ||
            cpu != (double)i)
            return bad(t, "%s", "a CPU of \"usched\".\"cpus\" lacks cpu, package, llc or core, or is out of order");
        t->cpu[i] = (struct tcpu){.cpu = (int)i, .package = (int)pk, .llc = (int)llc, .core = (int)core};
    }
    return 0;
}

static int push_run(struct run **v, size_t *n, size_t *cap, const struct run *r)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4096;
        struct run *nr = realloc(*v, nc * sizeof *nr);
        if (!nr) return -1;
        *v = nr;
        *cap = nc;
    }
    (*v)[(*n)++] = *r;
    return 0;
}

static int load_events(struct trace *t)
{
    json_t *evs = json_object_get(t->root, "traceEvents");
    if (!json_is_array(evs)) return bad(t, "%s", "no \"traceEvents\" list");
    t->t0 = 1e300;
    t->t1 = -1e300;
    size_t i;
    json_t *e;
    json_array_foreach(evs, i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *cat = json_string_value(json_object_get(e, "cat"));
        if (!ph) return bad(t, "%s", "an event has no \"ph\"");
        if (!strcmp(ph, "M") || !cat) continue;
        double ts, tid, dur = 0;
        if (num(e, "ts", &ts) || num(e, "tid", &tid)) return bad(t, "%s", "an event has no \"ts\" or \"tid\"");
        if (!strcmp(ph, "X") && num(e, "dur", &dur)) return bad(t, "%s", "a slice has no \"dur\"");
        /* The span is that of the work: parks before the first run (the
         * program starting) or after the last do not stretch it. */
        bool idle = !strcmp(cat, "idle");
        if (!idle && ts < t->t0) t->t0 = ts;
        if (!idle && ts + dur > t->t1) t->t1 = ts + dur;
        int cpu = (int)tid - 1; /* CPU C is thread C + 1 (docs/trace.md) */
        bool on_cpu = cpu >= 0 && cpu < t->ncpus && (double)cpu == tid - 1;
        json_t *args = json_object_get(e, "args");
        if (!strcmp(ph, "X") && !strcmp(cat, "run")) {
            if (!on_cpu) return bad(t, "%s", "a run slice is on a CPU the \"usched\" object lacks");
            double fiber = 0;
            if (num(args, "fiber", &fiber)) return bad(t, "%s", "a run slice has no \"fiber\"");
            struct run r = {.ts = ts, .dur = dur, .fiber = (uint64_t)fiber, .cpu = cpu, .wait_ns = -1,
                            .name = json_string_value(json_object_get(e, "name"))};
            const char *woken = json_string_value(json_object_get(args, "woken"));
            if (woken) {
                r.woken = strcmp(woken, "spawn") ? 1 : 2;
                num(args, "wait_ns", &r.wait_ns);
            }
            const char *end = json_string_value(json_object_get(args, "end"));
            if (end && !strcmp(end, "block"))
                t->blocked[block_of(json_string_value(json_object_get(args, "on")))]++;
            r.xllc = json_object_get(args, "xllc") != NULL;
            r.busy_sibling = json_object_get(args, "busy_sibling") != NULL;
            if (push_run(&t->runs, &t->nruns, &t->caprun, &r) < 0) return bad(t, "%s", "out of memory");
            t->cpu[cpu].busy_us += dur;
            t->cpu[cpu].runs++;
        } else if (!strcmp(ph, "i") && (!strcmp(cat, "steal") || !strcmp(cat, "migrate"))) {
            int l = level_of(json_string_value(json_object_get(args, "level")));
            if (l < 0) return bad(t, "%s", "a steal or migrate event has no known \"level\"");
            if (!strcmp(cat, "steal")) t->steals[l]++;
            else t->migrations[l]++;
        } else if (!strcmp(ph, "i") && !strcmp(cat, "stall")) {
            t->stalls++;
        }
    }
    if (t->t1 < t->t0) t->t0 = t->t1 = 0;
    /* Parked time, within the span. */
    json_array_foreach(evs, i, e) {
        const char *cat = json_string_value(json_object_get(e, "cat"));
        double ts, tid, dur;
        if (!cat || strcmp(cat, "idle") || num(e, "ts", &ts) || num(e, "tid", &tid) || num(e, "dur", &dur)) continue;
        int cpu = (int)tid - 1;
        double a = ts > t->t0 ? ts : t->t0, b = ts + dur < t->t1 ? ts + dur : t->t1;
        if (cpu < 0 || cpu >= t->ncpus || b <= a) continue;
        t->cpu[cpu].parked_us += b - a;
        struct run p = {.ts = a, .dur = b - a, .cpu = cpu};
        if (push_run(&t->parks, &t->nparks, &t->cappark, &p) < 0) return bad(t, "%s", "out of memory");
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_run_dur(const void *a, const void *b)
{
    const struct run *x = a, *y = b;
    return x->dur > y->dur ? -1 : x->dur < y->dur;
}

static int cmp_waits(const void *a, const void *b)
{
    const struct waits *x = a, *y = b;
    return x->max_ns > y->max_ns ? -1 : x->max_ns < y->max_ns;
}

static int cmp_waits_id(const void *a, const void *b)
{
    const struct waits *x = a, *y = b;
    return x->fiber < y->fiber ? -1 : x->fiber > y->fiber;
}

static void fmt_ns(char *buf, size_t len, double ns)
{
    if (ns < 10e3) snprintf(buf, len, "%.0f ns", ns);
    else if (ns < 10e6) snprintf(buf, len, "%.1f us", ns / 1e3);
    else snprintf(buf, len, "%.1f ms", ns / 1e6);
}

static void fiber_name(char *buf, size_t len, const char *name, uint64_t fiber)
{
    char id[32];
    snprintf(id, sizeof id, "fiber %llu", (unsigned long long)fiber);
    if (name && strcmp(name, id)) snprintf(buf, len, "%s (%s)", id, name);
    else snprintf(buf, len, "%s", id);
}

static void print_latency(const char *what, double *v, size_t n)
{
    if (!n) {
        printf("%-22s none\n", what);
        return;
    }
    qsort(v, n, sizeof *v, cmp_double);
    char p50[32], p90[32], p99[32], mx[32];
    fmt_ns(p50, sizeof p50, v[(size_t)(0.50 * (double)(n - 1))]);
    fmt_ns(p90, sizeof p90, v[(size_t)(0.90 * (double)(n - 1))]);
    fmt_ns(p99, sizeof p99, v[(size_t)(0.99 * (double)(n - 1))]);
    fmt_ns(mx, sizeof mx, v[n - 1]);
    printf("%-22s n=%zu p50=%s p90=%s p99=%s max=%s\n", what, n, p50, p90, p99, mx);
}

static int summary(struct trace *t, int top)
{
    double span = t->t1 - t->t0;
    printf("trace %s: policy %s, %d CPU%s, %.3f ms, %zu runs\n", t->path, t->policy, t->ncpus,
           t->ncpus == 1 ? "" : "s", span / 1e3, t->nruns);
    if (t->dropped)
        printf("warning: %llu events were dropped when recording (a CPU's buffer was full): the counts below miss them\n",
               (unsigned long long)t->dropped);
    printf("\n%-5s %-8s %-5s %-5s %6s %8s %8s\n", "cpu", "package", "llc", "core", "runs", "busy", "parked");
    for (int c = 0; c < t->ncpus; c++) {
        const struct tcpu *p = &t->cpu[c];
        printf("%-5d %-8d %-5d %-5d %6u %7.1f%% %7.1f%%\n", c, p->package, p->llc, p->core, p->runs,
               span > 0 ? 100.0 * p->busy_us / span : 0.0, span > 0 ? 100.0 * p->parked_us / span : 0.0);
    }
    printf("\n%-10s", "level");
    for (int l = 0; l < NLEVELS; l++) printf(" %8s", level_names[l]);
    printf("\n%-10s", "steals");
    for (int l = 0; l < NLEVELS; l++) printf(" %8u", t->steals[l]);
    printf("\n%-10s", "migrations");
    for (int l = 0; l < NLEVELS; l++) printf(" %8u", t->migrations[l]);
    printf("\n\nblocked on ");
    bool any = false;
    for (int i = 0; i <= NBLOCKS; i++)
        if (t->blocked[i]) {
            printf(" %s %lu", i < NBLOCKS ? block_names[i] : "unknown", t->blocked[i]);
            any = true;
        }
    printf("%s\nstalls      %lu (the stall monitor's, docs/monitor.md)\n\n", any ? "" : " nothing", t->stalls);

    double *wake = malloc((t->nruns + 1) * sizeof *wake), *spawn = malloc((t->nruns + 1) * sizeof *spawn);
    struct waits *w = calloc(t->nruns + 1, sizeof *w);
    if (!wake || !spawn || !w) {
        free(wake);
        free(spawn);
        free(w);
        fprintf(stderr, "usched trace: out of memory\n");
        return 1;
    }
    size_t nw = 0, ns = 0, nf = 0;
    unsigned xllc = 0, busy = 0, woken = 0;
    for (size_t i = 0; i < t->nruns; i++) {
        const struct run *r = &t->runs[i];
        if (r->woken == 1) {
            woken++;
            xllc += r->xllc;
            busy += r->busy_sibling;
        }
        if (r->wait_ns < 0) continue;
        if (r->woken == 1) wake[nw++] = r->wait_ns;
        else spawn[ns++] = r->wait_ns;
        w[nf++] = (struct waits){.fiber = r->fiber, .max_ns = r->wait_ns, .total_ns = r->wait_ns, .n = 1,
                                 .name = r->name};
    }
    print_latency("wake-up latency", wake, nw);
    print_latency("spawn to first run", spawn, ns);
    printf("%-22s %u crossed an LLC, %u landed beside a busy SMT sibling (of %u)\n", "wake-ups", xllc, busy,
           woken);

    /* Longest runs. */
    struct run *sorted = malloc((t->nruns + 1) * sizeof *sorted);
    if (sorted) {
        memcpy(sorted, t->runs, t->nruns * sizeof *sorted);
        qsort(sorted, t->nruns, sizeof *sorted, cmp_run_dur);
        printf("\nlongest runs:\n");
        for (size_t i = 0; i < t->nruns && (int)i < top; i++) {
            char nm[96], d[32];
            fiber_name(nm, sizeof nm, sorted[i].name, sorted[i].fiber);
            fmt_ns(d, sizeof d, sorted[i].dur * 1e3);
            printf("  %-32s cpu %-4d at %10.3f ms  %s\n", nm, sorted[i].cpu, (sorted[i].ts - t->t0) / 1e3, d);
        }
        free(sorted);
    }
    /* Fibers that waited longest: fold the waits per fiber (sorted by id),
     * then sort the fibers by their longest wait. */
    qsort(w, nf, sizeof *w, cmp_waits_id);
    size_t nfib = 0;
    for (size_t i = 0; i < nf; i++) {
        if (nfib && w[nfib - 1].fiber == w[i].fiber) {
            struct waits *a = &w[nfib - 1];
            a->n++;
            a->total_ns += w[i].total_ns;
            if (w[i].max_ns > a->max_ns) a->max_ns = w[i].max_ns;
            if (!a->name) a->name = w[i].name;
        } else {
            w[nfib++] = w[i];
        }
    }
    qsort(w, nfib, sizeof *w, cmp_waits);
    printf("\nfibers that waited longest (from a wake-up or spawn to running):\n");
    for (size_t i = 0; i < nfib && (int)i < top; i++) {
        char nm[96], mx[32], tot[32];
        fiber_name(nm, sizeof nm, w[i].name, w[i].fiber);
        fmt_ns(mx, sizeof mx, w[i].max_ns);
        fmt_ns(tot, sizeof tot, w[i].total_ns);
        printf("  %-32s longest %s, %u waits, %s in all\n", nm, mx, w[i].n, tot);
    }
    free(wake);
    free(spawn);
    free(w);
    return 0;
}

/* ---- the SVG timeline ----------------------------------------------------------- */

static int cmp_topo_order(const void *a, const void *b, void *arg)
{
    const struct tcpu *c = arg;
    const struct tcpu *x = &c[*(const int *)a], *y = &c[*(const int *)b];
    if (x->package != y->package) return x->package - y->package;
    if (x->llc != y->llc) return x->llc - y->llc;
    if (x->core != y->core) return x->core - y->core;
    return x->cpu - y->cpu;
}

/* Neighbouring fiber ids get distant hues (the golden angle apart). */
static void fiber_colour(char *buf, size_t len, uint64_t fiber)
{
    snprintf(buf, len, "hsl(%u,%u%%,%u%%)", (unsigned)((fiber * 137508ull / 1000) % 360),
             55 + (unsigned)(fiber % 3) * 12, 42 + (unsigned)(fiber / 3 % 3) * 9);
}

static void xml_text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

/* One bracket: a vertical line over lanes [a, b] at x, with its label. */
static void bracket(FILE *f, double x, double y0, double y1, const char *label)
{
    fprintf(f, "<path d='M%.1f %.1f h-4 V%.1f h4' fill='none' stroke='#555'/>\n", x + 4, y0 + 2, y1 - 2);
    fprintf(f, "<text x='%.1f' y='%.1f' font-size='10' text-anchor='middle' transform='rotate(-90 %.1f %.1f)'>%s</text>\n",
            x - 4, (y0 + y1) / 2, x - 4, (y0 + y1) / 2, label);
}

static int write_svg(struct trace *t, const char *out)
{
    FILE *f = fopen(out, "w");
    if (!f) {
        fprintf(stderr, "usched trace: cannot create '%s': %s\n", out, strerror(errno));
        return 1;
    }
    int n = t->ncpus;
    int *order = malloc((size_t)n * sizeof *order), *lane = malloc((size_t)n * sizeof *lane);
    double *last_x1 = malloc((size_t)n * sizeof *last_x1);
    if (!order || !lane || !last_x1) {
        free(order);
        free(lane);
        free(last_x1);
        fclose(f);
        fprintf(stderr, "usched trace: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++) order[i] = i;
    qsort_r(order, (size_t)n, sizeof *order, cmp_topo_order, t->cpu);
    for (int i = 0; i < n; i++) lane[order[i]] = i, last_x1[i] = -1;

    const double W = 1400, X0 = 150, X1 = W - 20, TOP = 46;
    const double LH = n <= 4 ? 36 : n <= 16 ? 24 : 18; /* lane height */
    const double H = TOP + n * LH + 70;
    double span = t->t1 - t->t0;
    double scale = span > 0 ? (X1 - X0) / span : 1;
    fprintf(f, "<?xml version='1.0' encoding='UTF-8'?>\n"
               "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' viewBox='0 0 %.0f %.0f' "
               "font-family='sans-serif'>\n",
            W, H, W, H);
    fprintf(f, "<rect width='100%%' height='100%%' fill='white'/>\n");
    fprintf(f, "<text x='10' y='18' font-size='14'>usched trace: policy ");
    xml_text(f, t->policy);
    fprintf(f, ", %d CPU%s, %.3f ms, %zu runs%s</text>\n", n, n == 1 ? "" : "s", span / 1e3, t->nruns,
            t->dropped ? " (events dropped: incomplete)" : "");
    /* Time axis: 10 ticks. */
    for (int i = 0; i <= 10; i++) {
        double x = X0 + (X1 - X0) * i / 10;
        fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n", x, TOP - 4, x, TOP + n * LH);
        fprintf(f, "<text x='%.1f' y='%.1f' font-size='10' text-anchor='%s'>%.3f ms</text>\n", x, TOP - 8,
                i == 10 ? "end" : i ? "middle" : "start", span * i / 10 / 1e3);
    }
    /* Lanes, with LLC groups shaded alternately, and the brackets. */
    fprintf(f, "<g id='lanes'>\n");
    for (int i = 0; i < n; i++) {
        const struct tcpu *c = &t->cpu[order[i]];
        double y = TOP + i * LH;
        fprintf(f, "<g class='lane' data-cpu='%d'><rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s'/>"
                   "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>cpu %d</text></g>\n",
                c->cpu, X0, y, X1 - X0, LH, c->llc % 2 ? "#f4f4f8" : "#fafafa", X0 - 6, y + LH / 2 + 4, c->cpu);
    }
    fprintf(f, "</g>\n");
    static const char *const kinds[] = {"package", "LLC", "core"};
    for (int k = 0; k < 3; k++) {
        double x = 12 + k * 26;
        for (int i = 0; i < n;) {
            const struct tcpu *c = &t->cpu[order[i]];
            int key = k == 0 ? c->package : k == 1 ? c->llc : c->core;
            int j = i + 1;
            while (j < n) {
                const struct tcpu *d = &t->cpu[order[j]];
                if ((k == 0 ? d->package : k == 1 ? d->llc : d->core) != key || d->package != c->package) break;
                j++;
            }
            /* A core of one CPU needs no bracket. */
            if (k < 2 || j - i > 1) {
                char label[48];
                snprintf(label, sizeof label, k == 2 ? "%s%d" : "%s %d", k == 2 ? "c" : kinds[k], key);
                bracket(f, x, TOP + i * LH, TOP + j * LH, label);
            }
            if (k < 2 && i > 0)
                fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='%s' stroke-width='%d'/>\n", X0,
                        TOP + i * LH, X1, TOP + i * LH, k == 0 ? "#333" : "#888", k == 0 ? 2 : 1);
            i = j;
        }
    }
    /* Runs. Slices narrower than a pixel that follow each other on a lane are
     * merged into one rectangle, so the picture stays small. */
    /* Parked stretches: a thin grey bar along the lane's foot. */
    fprintf(f, "<g id='parked'>\n");
    for (size_t i = 0; i < t->nparks; i++) {
        const struct run *r = &t->parks[i];
        double x = X0 + (r->ts - t->t0) * scale, w = r->dur * scale;
        if (w < 0.5) continue;
        fprintf(f, "<rect x='%.2f' y='%.1f' width='%.2f' height='3' fill='#bbb'/>\n", x, TOP + lane[r->cpu] * LH + LH - 4,
                w);
    }
    fprintf(f, "</g>\n<g id='runs'>\n");
    for (size_t i = 0; i < t->nruns; i++) {
        const struct run *r = &t->runs[i];
        int l = lane[r->cpu];
        double x = X0 + (r->ts - t->t0) * scale, w = r->dur * scale;
        if (w < 0.6) w = 0.6;
        if (x + w <= last_x1[l] + 0.5) continue; /* inside the last drawn pixel */
        if (x < last_x1[l]) {
            w -= last_x1[l] - x;
            x = last_x1[l];
        }
        last_x1[l] = x + w;
        char col[40], nm[96];
        fiber_colour(col, sizeof col, r->fiber);
        fiber_name(nm, sizeof nm, r->name, r->fiber);
        fprintf(f, "<rect x='%.2f' y='%.1f' width='%.2f' height='%.1f' fill='%s'><title>", x, TOP + l * LH + 3, w,
                LH - 6, col);
        xml_text(f, nm);
        fprintf(f, ", cpu %d, %.3f us</title></rect>\n", r->cpu, r->dur);
    }
    /* Marks: at most one of each kind per lane every 3 pixels. */
    fprintf(f, "</g>\n<g id='marks'>\n");
    double *last_mark = malloc(2 * (size_t)n * sizeof *last_mark);
    for (int i = 0; last_mark && i < 2 * n; i++) last_mark[i] = -10;
    for (size_t i = 0; last_mark && i < t->nruns; i++) {
        const struct run *r = &t->runs[i];
        if (r->woken != 1 || (!r->xllc && !r->busy_sibling)) continue;
        int l = lane[r->cpu];
        double x = X0 + (r->ts - t->t0) * scale, y = TOP + l * LH + 1;
        if (r->xllc && x >= last_mark[2 * l] + 3) {
            last_mark[2 * l] = x;
            fprintf(f, "<path class='xllc' d='M%.2f %.1f l-3 -0 l3 5 l3 -5 z' fill='#d00'/>\n", x, y);
        }
        if (r->busy_sibling && x >= last_mark[2 * l + 1] + 3) {
            last_mark[2 * l + 1] = x;
            fprintf(f, "<circle class='busy_sibling' cx='%.2f' cy='%.1f' r='2' fill='#f80'/>\n", x, y + LH - 4);
        }
    }
    free(last_mark);
    fprintf(f, "</g>\n");
    double ly = TOP + n * LH + 28;
    fprintf(f, "<path d='M%.1f %.1f l-4 0 l4 7 l4 -7 z' fill='#d00'/><text x='%.1f' y='%.1f' font-size='11'>"
               "wake-up that ran outside the LLC of its waker and of its last CPU</text>\n",
            X0, ly - 8, X0 + 10, ly);
    fprintf(f, "<circle cx='%.1f' cy='%.1f' r='3.5' fill='#f80'/><text x='%.1f' y='%.1f' font-size='11'>"
               "wake-up that landed beside a busy SMT sibling</text>\n",
            X0 + 480, ly - 4, X0 + 490, ly);
    fprintf(f, "<text x='%.1f' y='%.1f' font-size='11'>runs are coloured by fiber (hover a run for its fiber); "
               "a grey bar at a lane's foot: the CPU parked</text>\n",
            X0, ly + 20);
    fprintf(f, "</svg>\n");
    free(order);
    free(lane);
    free(last_x1);
    int err = ferror(f);
    if (fclose(f) != 0 || err) {
        fprintf(stderr, "usched trace: writing '%s' failed\n", out);
        return 1;
    }
    return 0;
}

int cmd_trace(int argc, char **argv)
{
    static const struct option opts[] = {
        {"svg", required_argument, NULL, 's'},
        {"top", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *svg = NULL;
    long top = 5;
    int o;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":s:n:h", opts, NULL)) != -1) {
        switch (o) {
        case 's': svg = optarg; break;
        case 'n': {
            int rc = cli_parse_long("trace", "trace", "--top", optarg, 0, 1000000, &top);
            if (rc) return rc;
            break;
        }
        case 'h': fputs(trace_usage, stdout); return 0;
        case ':': return cli_usage_error("trace", "trace", "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error("trace", "trace", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind == argc) return cli_usage_error("trace", "trace", "no trace file given");
    if (optind != argc - 1) return cli_usage_error("trace", "trace", "one trace file, not %d", argc - optind);
    struct trace t = {.path = argv[optind]};
    json_error_t jerr;
    t.root = json_load_file(t.path, 0, &jerr);
    if (!t.root) {
        fprintf(stderr, "usched trace: %s: line %d: %s\n", t.path, jerr.line, jerr.text);
        return 1;
    }
    int rc = 1;
    if (!json_is_object(t.root)) bad(&t, "%s", "not a JSON object");
    else if (load_topology(&t) == 0 && load_events(&t) == 0) {
        rc = summary(&t, (int)top);
        if (rc == 0 && svg) {
            rc = write_svg(&t, svg);
            if (rc == 0) printf("\ntimeline: %s\n", svg);
        }
    }
    free(t.cpu);
    free(t.runs);
    free(t.parks);
    json_decref(t.root);
    return rc;
}
