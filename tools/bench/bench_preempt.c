/*
 * usched bench preempt: short requests beside CPU hogs on the same CPUs
 * (docs/preempt.md, bench/WORKLOADS.md "preempt").
 *
 * One hog fiber per CPU computes without a call for the whole run (it reads
 * the clock every PREEMPT_HOG_CHUNK turns to know when to stop). A
 * generator fiber releases one request every PREEMPT_GAP_US microseconds
 * (open loop: request i arrives at t0 + i x gap, whenever the generator
 * gets to run) as a new fiber that computes PREEMPT_REQ_ITERS rounds of
 * peer_mix64 (a few microseconds) and records its latency: completion
 * minus its arrival time. The value is the 99th percentile in
 * microseconds; the median goes to the --json line (p50_us). Without
 * preemption a request waits for the end of the run.
 *
 * The Go peer (bench/peers/go/preempt.go) does the same with goroutines;
 * Go preempts a goroutine that ran 10 ms.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_peer.h"
#include "bench_preempt.h"

#define PREEMPT_GAP_US 1000
#define PREEMPT_REQ_ITERS 2000
#define PREEMPT_HOG_CHUNK 100000

const struct peer_workload_info bench_preempt_info = {"preempt", "us", 0, 0};

struct pre_run {
    usched_t *s;
    double t0, end;
    long n;
    double *lat;     /* [n] seconds, written by request i */
    _Atomic long done;
    _Atomic uint64_t sum; /* requests' results, checked against a serial run */
};

struct pre_req {
    struct pre_run *r;
    long i;
};

static double last_p50_us; /* for the --json line of the run just made */

static uint64_t request_work(long i)
{
    uint64_t x = (uint64_t)i;
    for (int k = 0; k < PREEMPT_REQ_ITERS; k++) x = peer_mix64(x + (uint64_t)k);
    return x;
}

static void request(void *arg)
{
    struct pre_req *q = arg;
    struct pre_run *r = q->r;
    atomic_fetch_add_explicit(&r->sum, request_work(q->i), memory_order_relaxed);
    r->lat[q->i] = bench_now() - (r->t0 + (double)q->i * PREEMPT_GAP_US * 1e-6);
    atomic_fetch_add_explicit(&r->done, 1, memory_order_release);
    free(q);
}

static void hog(void *arg)
{
    struct pre_run *r = arg;
    volatile uint64_t x = 0;
    while (bench_now() < r->end)
        for (int k = 0; k < PREEMPT_HOG_CHUNK; k++) x = x + 1;
}

static void generator(void *arg)
{
    struct pre_run *r = arg;
    for (long i = 0; i < r->n; i++) {
        double at = r->t0 + (double)i * PREEMPT_GAP_US * 1e-6, now = bench_now();
        if (at > now && usched_sleep_ns((uint64_t)((at - now) * 1e9)) < 0) {
            bench_fail("preempt: usched_sleep_ns failed");
            return;
        }
        struct pre_req *q = malloc(sizeof *q);
        if (!q) {
            bench_fail("preempt: out of memory");
            return;
        }
        q->r = r, q->i = i;
        int rc = usched_spawn(r->s, NULL, request, q);
        if (rc < 0) {
            free(q);
            bench_fail("preempt: spawn of request %ld failed: %s", i, usched_strerror(rc));
            return;
        }
    }
}

static void root(void *arg)
{
    struct pre_run *r = arg;
    int ncpus = usched_ncpus(r->s);
    for (int c = 0; c < ncpus; c++) {
        int rc = usched_spawn_on(r->s, NULL, c, hog, r);
        if (rc < 0) {
            bench_fail("preempt: spawn of the hog of CPU %d failed: %s", c, usched_strerror(rc));
            return;
        }
    }
    generator(r);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int bench_preempt(usched_t *s, const struct bench_params *p, struct bench_out *out)
{
    struct pre_run r = {.s = s};
    r.n = (long)(p->duration * 1e6 / PREEMPT_GAP_US);
    if (r.n < 1) r.n = 1;
    r.lat = calloc((size_t)r.n, sizeof *r.lat);
    if (!r.lat) {
        snprintf(out->err, sizeof out->err, "preempt: out of memory for %ld requests", r.n);
        return -1;
    }
    r.t0 = bench_now() + 0.01; /* the hogs start first */
    r.end = r.t0 + p->duration;
    bench_root(s, root, &r);
    int rc = usched_wait(s);
    if (rc < 0) bench_fail("preempt: usched_wait failed: %s", usched_strerror(rc));
    uint64_t want = 0;
    for (long i = 0; i < r.n; i++) want += request_work(i);
    if (atomic_load(&r.done) != r.n)
        bench_fail("preempt: %ld of %ld requests completed", (long)atomic_load(&r.done), r.n);
    else if (atomic_load(&r.sum) != want)
        bench_fail("preempt: the requests' checksum is %llx, expected %llx",
                   (unsigned long long)atomic_load(&r.sum), (unsigned long long)want);
    if (bench_failed(out)) {
        free(r.lat);
        return -1;
    }
    qsort(r.lat, (size_t)r.n, sizeof *r.lat, cmp_double);
    last_p50_us = r.lat[r.n / 2] * 1e6;
    out->value = r.lat[(size_t)((double)r.n * 0.99)] * 1e6;
    free(r.lat);
    return 0;
}

/* ---- the Go peer ----------------------------------------------------------- */

static void run_go(const char *peers_dir, const char *system, const struct bench_params *p,
                   struct bench_peer_out *out)
{
    cpu_set_t set;
    int threads = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    char nthreads[16], dur[32];
    snprintf(nthreads, sizeof nthreads, "%d", threads);
    snprintf(dur, sizeof dur, "%g", p->duration);
    char *argv[] = {"peer-go", "preempt", "--threads", nthreads, "--duration", dur, NULL};
    const struct bench_peer_expect want = {.workload = "preempt", .unit = "us", .higher_is_better = 0,
                                           .threads = threads};
    last_p50_us = 0; /* the peer reports its p99 only */
    bench_peer_run(peers_dir, system, argv, &want, out);
}

static void json_p50(FILE *f)
{
    if (last_p50_us > 0) fprintf(f, ",\"p50_us\":%.1f", last_p50_us);
}

static const char *const systems[] = {"go"};
const struct bench_systems bench_preempt_systems = {systems, 1, run_go, json_p50};
