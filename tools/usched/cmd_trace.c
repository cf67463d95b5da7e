/*
 * usched trace FILE [--svg OUT.svg] [--json OUT.json] [--from MS] [--to MS] [--top N]
 *
 * Reads a trace written by USCHED_TRACE / usched_set(s, "trace", FILE) /
 * --trace / usched_trace_dump (Perfetto protobuf, docs/trace.md) as a
 * stream (trace_read.c: events of all CPUs merged in time order, one at a
 * time) and prints a summary: per CPU busy fraction, steals and migrations
 * by topology level, event counts, wake-up latency p50/p90/p99/max, the
 * longest runs and the fibers that waited longest. --svg also draws a
 * timeline of the window --from/--to; --json converts the window to Chrome
 * JSON (the format earlier versions wrote).
 *
 * Memory is bounded by the CPUs and fibers, not by the events: per CPU its
 * open run and a chunk buffer, per fiber its pending wake-up, name and
 * waits; the latencies go into log-scale histograms (1/16 of a power of two
 * wide, so a percentile is within 4.4% of the exact one), the longest runs
 * into a heap of N. The SVG merges runs narrower than a pixel as it goes.
 *
 * Exit status: 0 done; 1 the file cannot be read or is not a usched trace
 * (the message names the file, the offset and what is wrong), or OUT
 * cannot be written; 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_opts.h"
#include "trace_read.h"
#include "usched.h"
#include "usched/policy.h"

int cmd_trace(int argc, char **argv);

static const char trace_usage[] =
    "usage: usched trace FILE [--svg OUT.svg] [--json OUT.json] [--from MS] [--to MS] [--top N]\n"
    "\n"
    "Summarises a trace written with USCHED_TRACE=FILE (or --trace FILE on usched\n"
    "bench and usched serve, or usched_trace_dump): per CPU busy fraction, steals\n"
    "and migrations by level, event counts, wake-up latency percentiles, the\n"
    "longest runs, the fibers that waited longest. The file itself (Perfetto\n"
    "protobuf) opens in ui.perfetto.dev.\n"
    "\n"
    "  -s, --svg OUT.svg   also draw a timeline: a lane per CPU, grouped by\n"
    "                      package, LLC and core; runs coloured by fiber; wake-ups\n"
    "                      that crossed an LLC (red) or landed beside a busy SMT\n"
    "                      sibling (orange) marked\n"
    "  -j, --json OUT.json also convert to Chrome JSON (chrome://tracing)\n"
    "  -f, --from MS       start of the window, in ms from the trace's start\n"
    "  -t, --to MS         end of the window (default: the end of the trace)\n"
    "  -n, --top N         rows in the longest-runs and longest-waits lists\n"
    "                      (default 5)\n"
    "  -h, --help          print this help\n";

#define NLEVELS USCHED_NLEVELS
static const char *const level_names[NLEVELS] = {
#define X(id, name, desc) [USCHED_LVL_##id] = #name,
    USCHED_LEVEL_MAP(X)
#undef X
};

static const char *const block_names[USCHED__NTBLK] = {
#define X(name) #name,
    USCHED_TRACE_BLOCKS(X)
#undef X
};

static const char *const tev_names[USCHED__NTEV] = {
#define X(name, desc) #name,
    USCHED_TRACE_EVENTS(X)
#undef X
};

static const char *const reason_names[] = {
#define X(id, name, desc) #name,
    USCHED_REASON_MAP(X)
#undef X
};

static const char *reason_name(unsigned r)
{
    return r < sizeof reason_names / sizeof reason_names[0] ? reason_names[r] : "?";
}

static const char *level_name(unsigned l)
{
    return l < NLEVELS ? level_names[l] : "?";
}

/* ---- what the stream builds: runs, parks, per-fiber state -------------------------- */

/* A run slice, complete once its stop is seen. */
struct run {
    uint64_t ts, dur, fiber, wake_ns, waker, flow;
    int cpu, wake_cpu, from_cpu;
    uint32_t runq;
    uint16_t reason;
    uint8_t kind; /* 0: not woken; else the wake-up's event type + 1 */
    uint8_t end, on, xllc, busy_sibling;
};

struct fib {
    uint64_t id;
    uint64_t wake_ns, waker, flow;
    int wake_cpu, last_cpu;
    uint16_t reason;
    uint8_t kind;
    char *name;
    uint64_t wait_max, wait_total;
    uint32_t nwaits;
};

struct fibmap {
    struct fib *v;
    size_t cap, n;
};

static struct fib *fib_get(struct fibmap *m, uint64_t id)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 1024;
        struct fib *nv = calloc(ncap, sizeof *nv);
        if (!nv) return NULL;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->v[i].id) continue;
            size_t j = (size_t)(m->v[i].id * 0x9e3779b97f4a7c15ull) & (ncap - 1);
            while (nv[j].id) j = (j + 1) & (ncap - 1);
            nv[j] = m->v[i];
        }
        free(m->v);
        m->v = nv;
        m->cap = ncap;
    }
    size_t j = (size_t)(id * 0x9e3779b97f4a7c15ull) & (m->cap - 1);
    while (m->v[j].id && m->v[j].id != id) j = (j + 1) & (m->cap - 1);
    if (!m->v[j].id) {
        m->v[j].id = id;
        m->v[j].last_cpu = -1;
        m->v[j].wake_cpu = -1;
        m->n++;
    }
    return &m->v[j];
}

/* ---- the summary's accumulators ----------------------------------------------------- */

#define HSUB 16 /* buckets per power of two */
#define HNB (64 * HSUB)
struct hist {
    uint64_t n[HNB], count, max;
};

static int hist_bucket(uint64_t v)
{
    if (v < HSUB) return (int)v;
    int p = 63 - __builtin_clzll(v);
    return p * HSUB + (int)((v >> (p - 4)) & (HSUB - 1));
}

static uint64_t hist_low(int i)
{
    if (i < HSUB) return (uint64_t)i;
    int p = i / HSUB;
    return (1ull << p) | ((uint64_t)(i % HSUB) << (p - 4));
}

static void hist_add(struct hist *h, uint64_t v)
{
    h->n[hist_bucket(v)]++;
    h->count++;
    if (v > h->max) h->max = v;
}

static double hist_q(const struct hist *h, double q)
{
    uint64_t want = (uint64_t)(q * (double)(h->count - 1)) + 1, acc = 0;
    for (int i = 0; i < HNB; i++) {
        acc += h->n[i];
        if (acc >= want) {
            uint64_t hi = i + 1 < HNB ? hist_low(i + 1) - 1 : h->max;
            return (double)(hi < h->max ? hi : h->max);
        }
    }
    return (double)h->max;
}

#define PARK_TAIL 16
struct tcpu {
    int cpu, package, llc, core;
    uint64_t busy_ns, parked_ns;
    unsigned long runs;
    /* the last parks, whose part after the last run is taken off at the end */
    uint64_t tail_a[PARK_TAIL], tail_b[PARK_TAIL];
    unsigned ntail;
    /* the stream's state */
    bool running, parked;
    struct run run;
    uint64_t park_ns;
    uint8_t park_poll;
    uint32_t runq_written;
    /* JSON: what happens on the CPU during a run is written after it */
    FILE *pend;
    char *pbuf;
    size_t plen;
};

struct ctx {
    const char *path;
    struct tr_file *tf;
    const struct tr_meta *meta;
    int n;
    struct tcpu *cpu;
    struct fibmap fibs;
    uint64_t t0, from, to, first_run, last_end, last_ns;
    unsigned long long counts[USCHED__NTEV];
    unsigned long steals[NLEVELS], migrations[NLEVELS], stolen, blocked[USCHED__NTBLK], preempted;
    unsigned long woken, xllc, busy_sibling, flows;
    struct hist wake, spawn;
    struct run *top; /* a min-heap of the longest runs */
    int ntop, maxtop;
    /* outputs */
    FILE *json;
    int json_first, out_pid, out_tid;
    FILE *svg_runs, *svg_parks, *svg_marks;
    double sx0, sx1, scale;
    int *lane;
    double *last_x1, *last_mark;
    double lh, top_y;
    unsigned long svg_runs_n;
    bool oom;
};

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


/* ---- JSON (Chrome trace) ------------------------------------------------------------- */

/* Where a CPU's JSON goes: after its open run or park (whose slice is
 * written when it ends, with its start time: an instant written before it
 * would stand ahead of it in the file, out of time order - a stall the
 * monitor saw on a CPU whose trace shows it parked), or straight to the
 * file. */
static FILE *jout(struct ctx *c, int cpu)
{
    if (cpu < 0 || cpu >= c->n || !(c->cpu[cpu].running || c->cpu[cpu].parked)) return c->json;
    struct tcpu *p = &c->cpu[cpu];
    if (!p->pend) p->pend = open_memstream(&p->pbuf, &p->plen);
    if (!p->pend) c->oom = true;
    return p->pend ? p->pend : c->json;
}

/* The events buffered during a CPU's run or park, after its slice. */
static void jflush(struct tcpu *p, FILE *f)
{
    if (!p->pend) return;
    fclose(p->pend);
    p->pend = NULL;
    fwrite(p->pbuf, 1, p->plen, f);
    free(p->pbuf);
    p->pbuf = NULL;
}

static void jts(FILE *f, const struct ctx *c, uint64_t ns)
{
    uint64_t d = ns > c->t0 ? ns - c->t0 : 0;
    fprintf(f, "%llu.%03u", (unsigned long long)(d / 1000), (unsigned)(d % 1000));
}

static void jopen(struct ctx *c, FILE *f, const char *ph, const char *cat, int cpu, uint64_t ns)
{
    int pid = cpu >= 0 ? c->meta->cpu[cpu].llc + 1 : c->out_pid, tid = cpu >= 0 ? cpu + 1 : c->out_tid;
    fprintf(f, ",\n{\"ph\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":", ph, cat, pid, tid);
    jts(f, c, ns);
}

static void json_label(FILE *f, const struct fib *fb, uint64_t id)
{
    if (fb && fb->name) fprintf(f, "\"%s\"", fb->name); /* usched_set_name allows no quote or control */
    else fprintf(f, "\"fiber %llu\"", (unsigned long long)id);
}

static void json_meta(struct ctx *c)
{
    const struct tr_meta *m = c->meta;
    FILE *f = c->json;
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\n\"usched\":{\"version\":\"%s\",\"policy\":\"%s\",\"ncpus\":%d,"
               "\"smt\":%d,\"cpus\":[",
            m->version, m->policy, m->ncpus, m->smt);
    for (int i = 0; i < m->ncpus; i++)
        fprintf(f, "%s{\"cpu\":%d,\"os\":%d,\"package\":%d,\"llc\":%d,\"l2\":%d,\"core\":%d}", i ? "," : "", i,
                m->cpu[i].os, m->cpu[i].package, m->cpu[i].llc, m->cpu[i].l2, m->cpu[i].core);
    int nllc = 0;
    for (int i = 0; i < m->ncpus; i++)
        if (m->cpu[i].llc + 1 > nllc) nllc = m->cpu[i].llc + 1;
    c->out_pid = nllc + 1;
    c->out_tid = m->ncpus + 1;
    fprintf(f, "],\"dropped\":%llu},\n\"traceEvents\":[", (unsigned long long)m->dropped);
    /* Ids from 1: viewers treat pid and tid 0 as the kernel's idle task. */
    fprintf(f, "\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"outside threads\"}}",
            c->out_pid);
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
            c->out_pid, c->out_pid);
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"spawns and "
               "wake-ups from outside threads\"}}",
            c->out_pid, c->out_tid);
    int last = -1;
    for (int i = 0; i < m->ncpus; i++) {
        int pid = m->cpu[i].llc + 1;
        if (pid != last) {
            fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"package %d, LLC %d\"}}",
                    pid, m->cpu[i].package, pid - 1);
            fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
                    pid, pid);
            last = pid;
        }
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"cpu %d, core %d\"}}",
                pid, i + 1, i, m->cpu[i].core);
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                pid, i + 1, i);
    }
}

static void json_run(struct ctx *c, const struct run *r, const struct fib *fb)
{
    FILE *f = c->json;
    struct tcpu *p = &c->cpu[r->cpu];
    if (r->runq != p->runq_written) {
        p->runq_written = r->runq;
        jopen(c, f, "C", "runq", r->cpu, r->ts);
        fprintf(f, ",\"name\":\"runq cpu %d\",\"args\":{\"fibers\":%u}}", r->cpu, r->runq);
    }
    jopen(c, f, "X", "run", r->cpu, r->ts);
    fprintf(f, ",\"dur\":%llu.%03u,\"name\":", (unsigned long long)(r->dur / 1000), (unsigned)(r->dur % 1000));
    json_label(f, fb, r->fiber);
    static const char *const ends[] = {"running", "yield", "block", "exit", "preempted"};
    fprintf(f, ",\"args\":{\"fiber\":%llu,\"runq\":%u,\"end\":\"%s\"", (unsigned long long)r->fiber, r->runq,
            ends[r->end < 5 ? r->end : 0]);
    if (r->end == USCHED__TSTOP_BLOCK) fprintf(f, ",\"on\":\"%s\"", block_names[r->on < USCHED__NTBLK ? r->on : 0]);
    if (r->kind) {
        fprintf(f, ",\"woken\":\"%s\",\"wake_ts\":", tev_names[r->kind - 1]);
        jts(f, c, r->wake_ns);
        fprintf(f, ",\"wait_ns\":%llu,\"reason\":\"%s\"", (unsigned long long)(r->ts - r->wake_ns),
                reason_name(r->reason));
        if (r->wake_cpu >= 0) fprintf(f, ",\"waker_cpu\":%d", r->wake_cpu);
        if (r->waker) fprintf(f, ",\"waker\":%llu", (unsigned long long)r->waker);
        if (r->xllc) fprintf(f, ",\"xllc\":1");
        if (r->busy_sibling) fprintf(f, ",\"busy_sibling\":1");
    }
    if (r->from_cpu >= 0) fprintf(f, ",\"from_cpu\":%d", r->from_cpu);
    fprintf(f, "}}");
    if (r->kind && r->flow) {
        jopen(c, f, "f", "wake", r->cpu, r->ts);
        fprintf(f, ",\"bp\":\"e\",\"name\":\"wake\",\"id\":%llu}", (unsigned long long)r->flow);
    }
    jflush(p, f); /* what happened on the CPU during the run */
}

/* ---- SVG --------------------------------------------------------------------------------- */

static double sx(const struct ctx *c, uint64_t ns)
{
    double d = ns > c->from ? (double)(ns - c->from) : 0;
    return c->sx0 + d * c->scale;
}

static void svg_run(struct ctx *c, const struct run *r, const struct fib *fb)
{
    int l = c->lane[r->cpu];
    double x = sx(c, r->ts), w = sx(c, r->ts + r->dur) - x;
    if (w < 0.6) w = 0.6;
    if (x + w > c->last_x1[l] + 0.5) { /* not inside the last drawn pixel */
        if (x < c->last_x1[l]) {
            w -= c->last_x1[l] - x;
            x = c->last_x1[l];
        }
        c->last_x1[l] = x + w;
        char col[40], nm[96];
        fiber_colour(col, sizeof col, r->fiber);
        fiber_name(nm, sizeof nm, fb ? fb->name : NULL, r->fiber);
        fprintf(c->svg_runs, "<rect x='%.2f' y='%.1f' width='%.2f' height='%.1f' fill='%s'><title>", x,
                c->top_y + l * c->lh + 3, w, c->lh - 6, col);
        xml_text(c->svg_runs, nm);
        fprintf(c->svg_runs, ", cpu %d, %.3f us</title></rect>\n", r->cpu, (double)r->dur / 1e3);
        c->svg_runs_n++;
    }
    /* Marks: at most one of each kind per lane every 3 pixels. */
    if (r->kind != USCHED__TEV_wake + 1 && r->kind != USCHED__TEV_io_ready + 1) return;
    double y = c->top_y + l * c->lh + 1;
    x = sx(c, r->ts);
    if (r->xllc && x >= c->last_mark[2 * l] + 3) {
        c->last_mark[2 * l] = x;
        fprintf(c->svg_marks, "<path class='xllc' d='M%.2f %.1f l-3 -0 l3 5 l3 -5 z' fill='#d00'/>\n", x, y);
    }
    if (r->busy_sibling && x >= c->last_mark[2 * l + 1] + 3) {
        c->last_mark[2 * l + 1] = x;
        fprintf(c->svg_marks, "<circle class='busy_sibling' cx='%.2f' cy='%.1f' r='2' fill='#f80'/>\n", x, y + c->lh - 4);
    }
}

static void svg_park(struct ctx *c, int cpu, uint64_t a, uint64_t b)
{
    double x = sx(c, a), w = sx(c, b) - x;
    if (w < 0.5) return;
    fprintf(c->svg_parks, "<rect x='%.2f' y='%.1f' width='%.2f' height='3' fill='#bbb'/>\n", x,
            c->top_y + c->lane[cpu] * c->lh + c->lh - 4, w);
}

static int svg_begin(struct ctx *c)
{
    int n = c->n;
    c->lane = malloc((size_t)n * sizeof *c->lane);
    c->last_x1 = malloc((size_t)n * sizeof *c->last_x1);
    c->last_mark = malloc(2 * (size_t)n * sizeof *c->last_mark);
    c->svg_runs = tmpfile();
    c->svg_parks = tmpfile();
    c->svg_marks = tmpfile();
    if (!c->lane || !c->last_x1 || !c->last_mark || !c->svg_runs || !c->svg_parks || !c->svg_marks) return -1;
    int *order = malloc((size_t)n * sizeof *order);
    if (!order) return -1;
    for (int i = 0; i < n; i++) order[i] = i;
    qsort_r(order, (size_t)n, sizeof *order, cmp_topo_order, c->cpu);
    for (int i = 0; i < n; i++) c->lane[order[i]] = i, c->last_x1[i] = -1;
    for (int i = 0; i < 2 * n; i++) c->last_mark[i] = -10;
    free(order);
    c->sx0 = 150;
    c->sx1 = 1400 - 20;
    c->top_y = 46;
    c->lh = n <= 4 ? 36 : n <= 16 ? 24 : 18;
    c->scale = c->to > c->from ? (c->sx1 - c->sx0) / (double)(c->to - c->from) : 1;
    return 0;
}

static int copy_stream(FILE *from, FILE *to)
{
    char buf[65536];
    size_t k;
    rewind(from);
    while ((k = fread(buf, 1, sizeof buf, from)) > 0)
        if (fwrite(buf, 1, k, to) != k) return -1;
    return ferror(from) ? -1 : 0;
}

static int svg_finish(struct ctx *c, const char *out, unsigned long runs)
{
    FILE *f = fopen(out, "w");
    if (!f) {
        fprintf(stderr, "usched trace: cannot create '%s': %s\n", out, strerror(errno));
        return 1;
    }
    int n = c->n;
    int *order = malloc((size_t)n * sizeof *order);
    if (!order) {
        fclose(f);
        return 1;
    }
    for (int i = 0; i < n; i++) order[c->lane[i]] = i;
    const double W = 1400, X0 = c->sx0, X1 = c->sx1, TOP = c->top_y, LH = c->lh;
    const double H = TOP + n * LH + 70;
    double span = (double)(c->to - c->from);
    fprintf(f, "<?xml version='1.0' encoding='UTF-8'?>\n"
               "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' viewBox='0 0 %.0f %.0f' "
               "font-family='sans-serif'>\n",
            W, H, W, H);
    fprintf(f, "<rect width='100%%' height='100%%' fill='white'/>\n");
    fprintf(f, "<text x='10' y='18' font-size='14'>usched trace: policy ");
    xml_text(f, c->meta->policy);
    fprintf(f, ", %d CPU%s, %.3f ms from %.3f ms, %lu runs%s</text>\n", n, n == 1 ? "" : "s", span / 1e6,
            (double)(c->from - c->t0) / 1e6, runs, c->meta->dropped ? " (events dropped: incomplete)" : "");
    for (int i = 0; i <= 10; i++) {
        double x = X0 + (X1 - X0) * i / 10;
        fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n", x, TOP - 4, x, TOP + n * LH);
        fprintf(f, "<text x='%.1f' y='%.1f' font-size='10' text-anchor='%s'>%.3f ms</text>\n", x, TOP - 8,
                i == 10 ? "end" : i ? "middle" : "start", ((double)(c->from - c->t0) + span * i / 10) / 1e6);
    }
    fprintf(f, "<g id='lanes'>\n");
    for (int i = 0; i < n; i++) {
        const struct tcpu *p = &c->cpu[order[i]];
        double y = TOP + i * LH;
        fprintf(f, "<g class='lane' data-cpu='%d'><rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s'/>"
                   "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>cpu %d</text></g>\n",
                p->cpu, X0, y, X1 - X0, LH, p->llc % 2 ? "#f4f4f8" : "#fafafa", X0 - 6, y + LH / 2 + 4, p->cpu);
    }
    fprintf(f, "</g>\n");
    static const char *const kinds[] = {"package", "LLC", "core"};
    for (int k = 0; k < 3; k++) {
        double x = 12 + k * 26;
        for (int i = 0; i < n;) {
            const struct tcpu *p = &c->cpu[order[i]];
            int key = k == 0 ? p->package : k == 1 ? p->llc : p->core;
            int j = i + 1;
            while (j < n) {
                const struct tcpu *d = &c->cpu[order[j]];
                if ((k == 0 ? d->package : k == 1 ? d->llc : d->core) != key || d->package != p->package) break;
                j++;
            }
            if (k < 2 || j - i > 1) { /* a core of one CPU needs no bracket */
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
    free(order);
    int rc = 0;
    fprintf(f, "<g id='parked'>\n");
    rc |= copy_stream(c->svg_parks, f);
    fprintf(f, "</g>\n<g id='runs'>\n");
    rc |= copy_stream(c->svg_runs, f);
    fprintf(f, "</g>\n<g id='marks'>\n");
    rc |= copy_stream(c->svg_marks, f);
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
    int err = ferror(f);
    if (fclose(f) != 0 || err || rc) {
        fprintf(stderr, "usched trace: writing '%s' failed\n", out);
        return 1;
    }
    return 0;
}

/* ---- the stream -------------------------------------------------------------------------- */

static void top_push(struct ctx *c, const struct run *r)
{
    if (c->maxtop <= 0) return;
    struct run *h = c->top;
    if (c->ntop == c->maxtop) {
        if (r->dur <= h[0].dur) return;
        h[0] = *r; /* replace the shortest, sift down */
        for (int i = 0;;) {
            int l = 2 * i + 1, m = i;
            if (l < c->ntop && h[l].dur < h[m].dur) m = l;
            if (l + 1 < c->ntop && h[l + 1].dur < h[m].dur) m = l + 1;
            if (m == i) break;
            struct run t = h[i];
            h[i] = h[m];
            h[m] = t;
            i = m;
        }
        return;
    }
    int i = c->ntop++;
    h[i] = *r;
    while (i > 0 && h[(i - 1) / 2].dur > h[i].dur) {
        struct run t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

/* A run is complete: into the summary and the outputs (when it starts in
 * the window). */
static void finish_run(struct ctx *c, struct tcpu *p)
{
    struct run *r = &p->run;
    p->running = false;
    if (r->ts < c->from) return;
    struct fib *fb = fib_get(&c->fibs, r->fiber);
    if (!fb) {
        c->oom = true;
        return;
    }
    p->runs++;
    p->busy_ns += r->dur;
    if (!c->first_run || r->ts < c->first_run) c->first_run = r->ts;
    if (r->ts + r->dur > c->last_end) c->last_end = r->ts + r->dur;
    if (r->end == USCHED__TSTOP_BLOCK) c->blocked[r->on < USCHED__NTBLK ? r->on : 0]++;
    if (r->end == USCHED__TSTOP_PREEMPT) c->preempted++;
    if (r->kind) {
        uint64_t wait = r->ts - r->wake_ns;
        if (r->kind == USCHED__TEV_spawn + 1) {
            hist_add(&c->spawn, wait);
        } else {
            hist_add(&c->wake, wait);
            c->woken++;
            c->xllc += r->xllc;
            c->busy_sibling += r->busy_sibling;
        }
        fb->nwaits++;
        fb->wait_total += wait;
        if (wait > fb->wait_max) fb->wait_max = wait;
    }
    top_push(c, r);
    if (c->json) json_run(c, r, fb);
    if (c->svg_runs) svg_run(c, r, fb);
}

static void finish_park(struct ctx *c, struct tcpu *p, uint64_t end)
{
    p->parked = false;
    uint64_t a = p->park_ns;
    if (c->json && a >= c->from) {
        jopen(c, c->json, "X", "idle", p->cpu, a);
        fprintf(c->json, ",\"dur\":%llu.%03u,\"name\":\"%s\"}", (unsigned long long)((end - a) / 1000),
                (unsigned)((end - a) % 1000), p->park_poll ? "parked (I/O poller)" : "parked");
    }
    if (c->json) jflush(p, c->json); /* what happened on the CPU during the park */
    /* The summary's parked time lies within the work: from the first run on
     * (the tail after the last run is taken off at the end). */
    if (!c->first_run) return;
    if (a < c->first_run) a = c->first_run;
    if (end <= a) return;
    p->parked_ns += end - a;
    p->tail_a[p->ntail % PARK_TAIL] = a;
    p->tail_b[p->ntail % PARK_TAIL] = end;
    p->ntail++;
    if (c->svg_runs) svg_park(c, p->cpu, a, end);
}

static bool same_llc(const struct ctx *c, int x, int y)
{
    return c->meta->cpu[x].llc == c->meta->cpu[y].llc;
}

static void start_run(struct ctx *c, const struct tr_ev *e)
{
    struct tcpu *p = &c->cpu[e->cpu];
    if (p->parked) finish_park(c, p, e->ns); /* its unpark was not recorded (dropped) */
    if (p->running) { /* its stop was not recorded (dropped) */
        p->run.dur = e->ns - p->run.ts;
        p->run.end = 0;
        finish_run(c, p);
    }
    struct fib *fb = fib_get(&c->fibs, e->id);
    if (!fb) {
        c->oom = true;
        return;
    }
    struct run *r = &p->run;
    memset(r, 0, sizeof *r);
    r->ts = e->ns;
    r->fiber = e->id;
    r->cpu = e->cpu;
    r->runq = e->b;
    r->from_cpu = fb->last_cpu >= 0 && fb->last_cpu != e->cpu ? fb->last_cpu : -1;
    r->wake_cpu = -1;
    if (fb->kind) {
        r->kind = fb->kind;
        r->wake_ns = fb->wake_ns <= e->ns ? fb->wake_ns : e->ns;
        r->reason = fb->reason;
        r->wake_cpu = fb->wake_cpu;
        r->waker = fb->waker;
        r->flow = fb->flow;
        /* Crossed an LLC: ran outside the LLC of both the waker's CPU and
         * the fiber's previous CPU (as the wake_cross_llc counter). */
        int ref = fb->wake_cpu >= 0 ? fb->wake_cpu : fb->last_cpu;
        r->xllc = ref >= 0 && !same_llc(c, e->cpu, ref) && (fb->last_cpu < 0 || !same_llc(c, e->cpu, fb->last_cpu));
        /* Landed beside a busy SMT sibling. */
        for (int o = 0; o < c->n; o++)
            if (o != e->cpu && c->cpu[o].running && c->meta->cpu[o].core == c->meta->cpu[e->cpu].core) {
                r->busy_sibling = 1;
                break;
            }
    }
    fb->kind = 0;
    fb->flow = 0;
    fb->last_cpu = e->cpu;
    p->running = true;
}

static void instant(struct ctx *c, const struct tr_ev *e, const char *cat, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void instant(struct ctx *c, const struct tr_ev *e, const char *cat, const char *fmt, ...)
{
    if (!c->json || e->ns < c->from) return;
    FILE *f = jout(c, e->cpu);
    jopen(c, f, "i", cat, e->cpu, e->ns);
    fprintf(f, ",\"s\":\"t\",\"name\":\"%s\",\"args\":{", cat);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fprintf(f, "}}");
}

static int valid_cpu(const struct ctx *c, const struct tr_ev *e)
{
    if (e->cpu < -1 || e->cpu >= c->n) return 0;
    switch (e->type) {
    case USCHED__TEV_spawn:
    case USCHED__TEV_wake:
    case USCHED__TEV_io_ready:
    case USCHED__TEV_steal:
    case USCHED__TEV_migrate:
        return e->b < (uint32_t)c->n;
    default:
        return 1;
    }
}

static int on_event(struct ctx *c, const struct tr_ev *e)
{
    bool needs_fiber = e->type == USCHED__TEV_spawn || e->type == USCHED__TEV_wake ||
                       e->type == USCHED__TEV_io_ready || e->type == USCHED__TEV_run;
    if (needs_fiber && e->id == 0) { /* fibers are numbered from 1 */
        fprintf(stderr, "usched trace: %s: a %s event without a fiber\n", c->path, tev_names[e->type]);
        return -1;
    }
    if (!valid_cpu(c, e)) {
        fprintf(stderr, "usched trace: %s: a %s event names CPU %u (the trace has %d)\n", c->path,
                tev_names[e->type], e->b, c->n);
        return -1;
    }
    bool in = e->ns >= c->from;
    if (in) c->counts[e->type]++;
    c->last_ns = e->ns;
    struct tcpu *p = e->cpu >= 0 ? &c->cpu[e->cpu] : NULL;
    switch (e->type) {
    case USCHED__TEV_spawn:
    case USCHED__TEV_wake:
    case USCHED__TEV_io_ready: {
        struct fib *fb = fib_get(&c->fibs, e->id);
        if (!fb) return -1;
        fb->kind = (uint8_t)(e->type + 1);
        fb->wake_ns = e->ns;
        fb->wake_cpu = e->cpu;
        fb->waker = e->a;
        fb->reason = e->c;
        fb->flow = 0;
        if (e->type == USCHED__TEV_spawn) {
            instant(c, e, "spawn", "\"fiber\":%llu,\"parent\":%llu,\"cpu\":%u,\"reason\":\"%s\"",
                    (unsigned long long)e->id, (unsigned long long)e->a, e->b, reason_name(e->c));
        } else if (p && p->running && in && c->json) { /* a flow from the waker's running slice */
            fb->flow = ++c->flows;
            FILE *f = jout(c, e->cpu);
            jopen(c, f, "s", "wake", e->cpu, e->ns);
            fprintf(f, ",\"name\":\"wake\",\"id\":%llu}", (unsigned long long)fb->flow);
        }
        break;
    }
    case USCHED__TEV_run:
        if (p) start_run(c, e);
        break;
    case USCHED__TEV_stop:
        if (p && p->running && p->run.fiber == e->id) {
            p->run.dur = e->ns - p->run.ts;
            p->run.end = (uint8_t)e->c;
            p->run.on = e->blk;
            finish_run(c, p);
        }
        break;
    case USCHED__TEV_steal:
        if (in && e->c < NLEVELS) c->steals[e->c]++;
        if (in) c->stolen += e->a;
        instant(c, e, "steal", "\"fiber\":%llu,\"victim\":%u,\"level\":\"%s\",\"fibers\":%llu",
                (unsigned long long)e->id, e->b, level_name(e->c), (unsigned long long)e->a);
        break;
    case USCHED__TEV_migrate:
        if (in && e->c < NLEVELS) c->migrations[e->c]++;
        instant(c, e, "migrate", "\"fiber\":%llu,\"from\":%u,\"level\":\"%s\"", (unsigned long long)e->id, e->b,
                level_name(e->c));
        break;
    case USCHED__TEV_park:
        if (p) {
            p->parked = true;
            p->park_ns = e->ns;
            p->park_poll = (uint8_t)e->c;
        }
        break;
    case USCHED__TEV_unpark:
        if (p && p->parked) finish_park(c, p, e->ns);
        break;
    case USCHED__TEV_io_wait:
        instant(c, e, "io_wait", "\"fiber\":%llu,\"fd\":%lld", (unsigned long long)e->id, (long long)e->a);
        break;
    case USCHED__TEV_stall:
        instant(c, e, "stall", "\"fiber\":%llu,\"held_us\":%llu", (unsigned long long)e->id,
                (unsigned long long)(e->a / 1000));
        break;
    case USCHED__TEV_name: {
        if (!e->id) break; /* a flight recorder's chunk began inside the run */
        for (size_t i = 0; i < e->name_len; i++) /* as usched_set_name allows: written into JSON as is */
            if ((unsigned char)e->name[i] < 0x20 || e->name[i] == '"' || e->name[i] == '\\' || e->name[i] == 0x7f) {
                fprintf(stderr, "usched trace: %s: fiber %llu's name has a control character, quote or backslash\n",
                        c->path, (unsigned long long)e->id);
                return -1;
            }
        struct fib *fb = fib_get(&c->fibs, e->id);
        if (!fb) return -1;
        free(fb->name);
        fb->name = strndup(e->name, e->name_len);
        break;
    }
    default:
        break;
    }
    return c->oom ? -1 : 0;
}

/* ---- the summary -------------------------------------------------------------------------- */

static void print_latency(const char *what, const struct hist *h)
{
    if (!h->count) {
        printf("%-22s none\n", what);
        return;
    }
    char p50[32], p90[32], p99[32], mx[32];
    fmt_ns(p50, sizeof p50, hist_q(h, 0.50));
    fmt_ns(p90, sizeof p90, hist_q(h, 0.90));
    fmt_ns(p99, sizeof p99, hist_q(h, 0.99));
    fmt_ns(mx, sizeof mx, (double)h->max);
    printf("%-22s n=%llu p50=%s p90=%s p99=%s max=%s\n", what, (unsigned long long)h->count, p50, p90, p99, mx);
}

static int cmp_run_dur(const void *a, const void *b)
{
    const struct run *x = a, *y = b;
    return x->dur > y->dur ? -1 : x->dur < y->dur;
}

static int cmp_fib_wait(const void *a, const void *b)
{
    const struct fib *x = *(const struct fib *const *)a, *y = *(const struct fib *const *)b;
    if (x->wait_max != y->wait_max) return x->wait_max > y->wait_max ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int summary(struct ctx *c, int top)
{
    uint64_t t0 = c->first_run, t1 = c->last_end;
    double span = t1 > t0 ? (double)(t1 - t0) : 0;
    unsigned long runs = 0;
    for (int i = 0; i < c->n; i++) {
        struct tcpu *p = &c->cpu[i];
        runs += p->runs;
        unsigned k = p->ntail < PARK_TAIL ? p->ntail : PARK_TAIL;
        for (unsigned j = 0; j < k; j++) { /* parked after the last run: not within the work */
            uint64_t a = p->tail_a[j] > t1 ? p->tail_a[j] : t1, b = p->tail_b[j];
            if (b > a) p->parked_ns -= b - a < p->parked_ns ? b - a : p->parked_ns;
        }
    }
    uint64_t bytes, chunks;
    tr_size(c->tf, &bytes, &chunks);
    unsigned long long nev = 0;
    for (int i = 0; i < USCHED__NTEV; i++) nev += c->counts[i];
    printf("trace %s: policy %s, %d CPU%s, %.3f ms, %lu runs\n", c->path, c->meta->policy, c->n, c->n == 1 ? "" : "s",
           span / 1e6, runs);
    if (c->from > c->t0 || c->to != UINT64_MAX)
        printf("file: %llu bytes, %llu chunks; %llu events in the window\n", (unsigned long long)bytes,
               (unsigned long long)chunks, nev);
    else
        printf("file: %llu bytes, %llu chunks, %llu events, %.1f bytes per event\n", (unsigned long long)bytes,
               (unsigned long long)chunks, nev, nev ? (double)bytes / (double)nev : 0.0);
    if (c->meta->dropped)
        printf("warning: %llu events were dropped when recording (the trace reached its size limit, trace_mb): "
               "the counts below miss them\n",
               (unsigned long long)c->meta->dropped);
    printf("events:");
    for (int i = 0; i < USCHED__NTEV; i++) printf(" %s %llu", tev_names[i], c->counts[i]);
    printf("\n\n%-5s %-8s %-5s %-5s %8s %8s %8s\n", "cpu", "package", "llc", "core", "runs", "busy", "parked");
    for (int i = 0; i < c->n; i++) {
        const struct tcpu *p = &c->cpu[i];
        printf("%-5d %-8d %-5d %-5d %8lu %7.1f%% %7.1f%%\n", i, p->package, p->llc, p->core, p->runs,
               span > 0 ? 100.0 * (double)p->busy_ns / span : 0.0, span > 0 ? 100.0 * (double)p->parked_ns / span : 0.0);
    }
    printf("\n%-10s", "level");
    for (int l = 0; l < NLEVELS; l++) printf(" %8s", level_names[l]);
    printf("\n%-10s", "steals");
    for (int l = 0; l < NLEVELS; l++) printf(" %8lu", c->steals[l]);
    printf("\n%-10s", "migrations");
    for (int l = 0; l < NLEVELS; l++) printf(" %8lu", c->migrations[l]);
    printf("\nstolen     %lu fibers\n\nblocked on ", c->stolen);
    bool any = false;
    for (int i = 0; i < USCHED__NTBLK; i++)
        if (c->blocked[i]) {
            printf(" %s %lu", block_names[i], c->blocked[i]);
            any = true;
        }
    printf("%s\npreempted   %lu (docs/preempt.md)\nstalls      %llu (the stall monitor's, docs/monitor.md)\n\n",
           any ? "" : " nothing", c->preempted, c->counts[USCHED__TEV_stall]);
    print_latency("wake-up latency", &c->wake);
    print_latency("spawn to first run", &c->spawn);
    printf("%-22s %lu crossed an LLC, %lu landed beside a busy SMT sibling (of %lu)\n", "wake-ups", c->xllc,
           c->busy_sibling, c->woken);

    qsort(c->top, (size_t)c->ntop, sizeof *c->top, cmp_run_dur);
    printf("\nlongest runs:\n");
    for (int i = 0; i < c->ntop && i < top; i++) {
        const struct run *r = &c->top[i];
        struct fib *fb = fib_get(&c->fibs, r->fiber);
        char nm[96], d[32];
        fiber_name(nm, sizeof nm, fb ? fb->name : NULL, r->fiber);
        fmt_ns(d, sizeof d, (double)r->dur);
        printf("  %-32s cpu %-4d at %10.3f ms  %s\n", nm, r->cpu, (double)(r->ts - t0) / 1e6, d);
    }
    struct fib **w = malloc((c->fibs.n + 1) * sizeof *w);
    if (!w) return 1;
    size_t nf = 0;
    for (size_t i = 0; i < c->fibs.cap; i++)
        if (c->fibs.v[i].id && c->fibs.v[i].nwaits) w[nf++] = &c->fibs.v[i];
    qsort(w, nf, sizeof *w, cmp_fib_wait);
    printf("\nfibers that waited longest (from a wake-up or spawn to running):\n");
    for (size_t i = 0; i < nf && (int)i < top; i++) {
        char nm[96], mx[32], tot[32];
        fiber_name(nm, sizeof nm, w[i]->name, w[i]->id);
        fmt_ns(mx, sizeof mx, (double)w[i]->wait_max);
        fmt_ns(tot, sizeof tot, (double)w[i]->wait_total);
        printf("  %-32s longest %s, %u waits, %s in all\n", nm, mx, w[i]->nwaits, tot);
    }
    free(w);
    return 0;
}

/* ---- the command ---------------------------------------------------------------------------- */

static int parse_ms(const char *opt, const char *v, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno || !(d >= 0) || d > 1e12)
        return cli_usage_error("trace", "trace", "%s '%s' is not a number of milliseconds >= 0", opt, v);
    *out = d;
    return 0;
}

static int run(struct ctx *c, const char *svg, const char *json, double from_ms, double to_ms, bool has_to, int top)
{
    const struct tr_meta *m = c->meta;
    c->n = m->ncpus;
    c->t0 = m->t0;
    c->cpu = calloc((size_t)c->n, sizeof *c->cpu);
    c->maxtop = top;
    c->top = calloc((size_t)top + 1, sizeof *c->top);
    if (!c->cpu || !c->top) return -1;
    for (int i = 0; i < c->n; i++)
        c->cpu[i] = (struct tcpu){.cpu = i, .package = m->cpu[i].package, .llc = m->cpu[i].llc,
                                  .core = m->cpu[i].core, .runq_written = UINT32_MAX};
    uint64_t first, last;
    if (tr_span(c->tf, &first, &last) < 0) return -2;
    uint64_t base = first < c->t0 ? first : c->t0;
    c->t0 = base;
    c->from = base + (uint64_t)(from_ms * 1e6);
    c->to = has_to ? base + (uint64_t)(to_ms * 1e6) : UINT64_MAX;
    if (has_to && c->to <= c->from) {
        fprintf(stderr, "usched trace: --to %.3f ms is not after --from %.3f ms\n", to_ms, from_ms);
        return -3;
    }
    if (svg) {
        uint64_t to = c->to;
        c->to = has_to ? c->to : last > c->from ? last : c->from + 1;
        if (svg_begin(c) < 0) return -1;
        c->to = has_to ? to : UINT64_MAX;
    }
    if (json) {
        c->json = fopen(json, "w");
        if (!c->json) {
            fprintf(stderr, "usched trace: cannot create '%s': %s\n", json, strerror(errno));
            return -3;
        }
        json_meta(c);
    }
    if (c->from > first && tr_seek(c->tf, c->from > 1000000000ull ? c->from - 1000000000ull : 0) < 0) return -2;
    struct tr_ev e;
    int r;
    while ((r = tr_next(c->tf, &e)) > 0) {
        if (e.ns > c->to) break;
        if (on_event(c, &e) < 0) return c->oom ? -1 : -3;
    }
    if (r < 0) return -2;
    /* Runs and parks still open end with the last event. */
    for (int i = 0; i < c->n; i++) {
        struct tcpu *p = &c->cpu[i];
        if (p->running) {
            p->run.dur = c->last_ns - p->run.ts;
            finish_run(c, p);
        }
        if (p->parked) finish_park(c, p, c->last_ns);
    }
    if (c->json) {
        fprintf(c->json, "\n]}\n");
        int err = ferror(c->json);
        if (fclose(c->json) != 0 || err) {
            c->json = NULL;
            fprintf(stderr, "usched trace: writing '%s' failed\n", json);
            return -3;
        }
        c->json = NULL;
    }
    if (c->oom) return -1;
    if (summary(c, top)) return -1;
    if (svg) {
        if (c->to == UINT64_MAX) c->to = last > c->from ? last : c->from + 1;
        if (svg_finish(c, svg, c->svg_runs_n)) return -3;
        printf("\ntimeline: %s\n", svg);
    }
    if (json) printf("%sjson: %s\n", svg ? "" : "\n", json);
    return 0;
}

static void ctx_free(struct ctx *c)
{
    for (int i = 0; c->cpu && i < c->n; i++) {
        if (c->cpu[i].pend) fclose(c->cpu[i].pend);
        free(c->cpu[i].pbuf);
    }
    for (size_t i = 0; i < c->fibs.cap; i++) free(c->fibs.v[i].name);
    free(c->fibs.v);
    free(c->cpu);
    free(c->top);
    free(c->lane);
    free(c->last_x1);
    free(c->last_mark);
    if (c->json) fclose(c->json);
    if (c->svg_runs) fclose(c->svg_runs);
    if (c->svg_parks) fclose(c->svg_parks);
    if (c->svg_marks) fclose(c->svg_marks);
}

int cmd_trace(int argc, char **argv)
{
    static const struct option opts[] = {
        {"svg", required_argument, NULL, 's'}, {"json", required_argument, NULL, 'j'},
        {"from", required_argument, NULL, 'f'}, {"to", required_argument, NULL, 't'},
        {"top", required_argument, NULL, 'n'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *svg = NULL, *json = NULL;
    long top = 5;
    double from_ms = 0, to_ms = 0;
    bool has_to = false;
    int o, rc;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":s:j:f:t:n:h", opts, NULL)) != -1) {
        switch (o) {
        case 's': svg = optarg; break;
        case 'j': json = optarg; break;
        case 'f':
            if ((rc = parse_ms("--from", optarg, &from_ms))) return rc;
            break;
        case 't':
            if ((rc = parse_ms("--to", optarg, &to_ms))) return rc;
            has_to = true;
            break;
        case 'n':
            if ((rc = cli_parse_long("trace", "trace", "--top", optarg, 0, 1000000, &top))) return rc;
            break;
        case 'h': fputs(trace_usage, stdout); return 0;
        case ':': return cli_usage_error("trace", "trace", "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error("trace", "trace", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind == argc) return cli_usage_error("trace", "trace", "no trace file given");
    if (optind != argc - 1) return cli_usage_error("trace", "trace", "one trace file, not %d", argc - optind);
    struct ctx c = {.path = argv[optind]};
    char err[600];
    if (tr_open(&c.tf, c.path, err, sizeof err) < 0) {
        fprintf(stderr, "usched trace: %s\n", err);
        return 1;
    }
    c.meta = tr_meta(c.tf);
    rc = run(&c, svg, json, from_ms, to_ms, has_to, (int)top);
    if (rc == -1) fprintf(stderr, "usched trace: %s: out of memory\n", c.path);
    else if (rc == -2) fprintf(stderr, "usched trace: %s\n", tr_error(c.tf));
    ctx_free(&c);
    tr_close(c.tf);
    return rc < 0 ? 1 : 0;
}
