/*
 * The wake-up latency histograms' summary (usched_stats_print) and the
 * periodic one-line summary of every CPU (USCHED_SCHEDTRACE=MS, printed by
 * the stall monitor's thread, as Go's sysmon prints its schedtrace): what
 * the scheduler prints of itself, beside the trace file that trace.c
 * records.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/export.h"
#include "core/core.h"
#include "core/schedtrace.h"

/* ---- wake-up latency --------------------------------------------------------------- */

static void lat_sum(usched_t *s, int cpu, uint64_t *n, uint64_t *max)
{
    for (int c = 0; c < s->ncpus; c++) {
        if (cpu >= 0 && c != cpu) continue;
        usched__lat_t *h = &s->wk[c]->lat;
        for (int i = 0; i < USCHED__LAT_NB; i++) n[i] += atomic_load_explicit(&h->n[i], memory_order_relaxed);
        uint64_t mx = atomic_load_explicit(&h->max, memory_order_relaxed);
        if (mx > *max) *max = mx;
    }
}

/* The upper end of the bucket holding the q-quantile, capped at max. */
static uint64_t lat_quantile(const uint64_t *n, uint64_t count, uint64_t max, double q)
{
    if (!count) return 0;
    uint64_t want = (uint64_t)(q * (double)count + 0.999999), acc = 0;
    if (want < 1) want = 1;
    for (int i = 0; i < USCHED__LAT_NB; i++) {
        acc += n[i];
        if (acc >= want) {
            uint64_t hi = i + 1 < USCHED__LAT_NB ? usched__lat_low(i + 1) - 1 : UINT64_MAX;
            return hi < max ? hi : max;
        }
    }
    return max;
}

USCHED_EXPORT int usched_wakelat(usched_t *s, int cpu, struct usched_wakelat *out)
{
    if (!s || !out) return usched__error(EINVAL, "wakelat: NULL argument");
    if (!atomic_load(&s->started)) return usched__error(ESRCH, "wakelat: scheduler not started");
    if (cpu < -1 || cpu >= s->ncpus)
        return usched__error(EINVAL, "wakelat: cpu %d out of range [-1, %d)", cpu, s->ncpus);
    uint64_t n[USCHED__LAT_NB] = {0}, max = 0, count = 0;
    lat_sum(s, cpu, n, &max);
    for (int i = 0; i < USCHED__LAT_NB; i++) count += n[i];
    memset(out, 0, sizeof *out);
    out->count = count;
    out->p50_ns = lat_quantile(n, count, max, 0.50);
    out->p90_ns = lat_quantile(n, count, max, 0.90);
    out->p99_ns = lat_quantile(n, count, max, 0.99);
    out->max_ns = max;
    return 0;
}

void usched__wakelat_print(usched_t *s, FILE *f)
{
    for (int cpu = -1; cpu < s->ncpus; cpu++) {
        struct usched_wakelat l;
        if (usched_wakelat(s, cpu, &l) < 0) return;
        char what[32];
        if (cpu < 0) snprintf(what, sizeof what, "wake_latency");
        else snprintf(what, sizeof what, "wake_latency cpu %d", cpu);
        fprintf(f, "%-20s n=%llu p50=%lluns p90=%lluns p99=%lluns max=%lluns\n", what,
                (unsigned long long)l.count, (unsigned long long)l.p50_ns, (unsigned long long)l.p90_ns,
                (unsigned long long)l.p99_ns, (unsigned long long)l.max_ns);
    }
}

void usched__wakelat_reset(usched_t *s)
{
    for (int c = 0; c < s->ncpus; c++) {
        usched__lat_t *h = &s->wk[c]->lat;
        for (int i = 0; i < USCHED__LAT_NB; i++) atomic_store(&h->n[i], 0);
        atomic_store(&h->max, 0);
    }
}

/* ---- the periodic summary (USCHED_SCHEDTRACE=MS) ---------------------------------- */

static const char *wk_state(struct usched__wk *w)
{
    uint32_t st = atomic_load_explicit(&w->state, memory_order_relaxed);
    if (st == WK_PARKED) return "parked";
    if (st == WK_PARKED_POLL) return "polling";
    return atomic_load_explicit(&w->current, memory_order_relaxed) ? "running" : "spinning";
}

/* The periodic summary's state, owned by the monitor's thread. */
struct usched__schedtrace {
    uint64_t period_ns;
    uint64_t next_ns; /* when the next line is due */
    uint64_t *last;   /* [ncpus] switches at the last line */
    char *line;
};

int usched__schedtrace_new(struct usched *s, struct usched__schedtrace **out)
{
    *out = NULL;
    if (s->schedtrace_ms <= 0) return 0;
    struct usched__schedtrace *st = calloc(1, sizeof *st);
    if (st) {
        st->last = calloc((size_t)s->ncpus, sizeof *st->last);
        st->line = malloc((size_t)s->ncpus * 64 + 128);
    }
    if (!st || !st->last || !st->line) {
        usched__schedtrace_free(st);
        return usched__error(ENOMEM, "schedtrace: no memory for %d CPUs' lines", s->ncpus);
    }
    st->period_ns = (uint64_t)s->schedtrace_ms * 1000000;
    st->next_ns = usched__now_ns() + st->period_ns;
    *out = st;
    return 0;
}

void usched__schedtrace_free(struct usched__schedtrace *st)
{
    if (!st) return;
    free(st->last);
    free(st->line);
    free(st);
}

uint64_t usched__schedtrace_tick(struct usched *s, struct usched__schedtrace *st, uint64_t now)
{
    if (now < st->next_ns) return st->next_ns - now;
    /* One line however late the monitor is (it was descheduled, or busy
     * serving a stall), then the next a whole period later: lines are
     * never printed in a burst to catch up. */
    st->next_ns += st->period_ns;
    if (st->next_ns <= now) st->next_ns = now + st->period_ns;
    char *line = st->line;
    uint64_t ms = (now - s->trace_t0) / 1000000;
    int len = snprintf(line, 128, "usched: schedtrace %llums: live=%llu global=%u", (unsigned long long)ms,
                       (unsigned long long)atomic_load(&s->life.live), atomic_load(&s->gq.n));
    for (int c = 0; c < s->ncpus; c++) {
        struct usched__wk *w = s->wk[c];
        uint64_t sw = atomic_load_explicit(&w->stats.v[USCHED_STAT_switches], memory_order_relaxed);
        unsigned q = usched__ring_len(&w->ring) + (unsigned)atomic_load(&w->inbox_n) +
                     (atomic_load_explicit(&w->next, memory_order_relaxed) != NULL);
        len += snprintf(line + len, 64, " | cpu%d %s q=%u sw=%llu", c, wk_state(w), q,
                        (unsigned long long)(sw >= st->last[c] ? sw - st->last[c] : sw)); /* reset since */
        st->last[c] = sw;
    }
    fprintf(stderr, "%s\n", line);
    return st->next_ns - now;
}
