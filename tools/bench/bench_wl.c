/*
 * usched bench: the workload table and the workloads that need only spawn,
 * join and yield (fib, skynet, spawn, yield, build), and pgsim (the pgbench
 * -S pair in process, over rendezvous channels). Definitions:
 * bench/WORKLOADS.md; generators: bench/peers/common/peer.h.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_net.h"
#include "bench_preempt.h"
#include "bench_wl.h"

/* The workloads usched runs alone: their units, and no systems to compare
 * with under --peers (an empty list). */
static const struct peer_workload_info own_infos[] = {
#define X(name, summary, unit, hib, n, timed) {#name, unit, hib, n},
    BENCH_OWN_WORKLOADS(X)
#undef X
};
static const struct bench_systems no_systems = {NULL, 0, NULL, NULL};

enum {
#define X(name, ...) OWN_##name,
    BENCH_OWN_WORKLOADS(X)
#undef X
};

const struct bench_workload bench_workloads[] = {
#define X(name, summary, timed) {#name, summary, bench_##name, &peer_workload_infos[PEER_##name], timed, NULL},
    BENCH_PEER_WORKLOADS(X)
#undef X
#define X(name, summary, unit) \
    {#name, summary, bench_net_##name, &bench_net_infos[BENCH_NET_##name], 1, &bench_net_systems[BENCH_NET_##name]},
    BENCH_NET_WORKLOADS(X)
#undef X
#define X(name, summary, unit, hib, n, timed) {#name, summary, bench_##name, &own_infos[OWN_##name], timed, &no_systems},
    BENCH_OWN_WORKLOADS(X)
#undef X
    /* its own unit and its one peer (Go): bench_preempt.c */
    {"preempt", "short requests beside a CPU hog per CPU: the requests' p99 latency (us; bench_preempt.c)",
     bench_preempt, &bench_preempt_info, 1, &bench_preempt_systems},
};
const int bench_nworkloads = (int)(sizeof bench_workloads / sizeof bench_workloads[0]);

const struct bench_workload *bench_workload_find(const char *name)
{
    for (int i = 0; i < bench_nworkloads; i++)
        if (!strcmp(bench_workloads[i].name, name)) return &bench_workloads[i];
    return NULL;
}

/* ---- failure recording, clock, root fiber ------------------------------------ */

static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int fail_flag; /* any thread; release after fail_msg is written */
static char fail_msg[256];

void bench_fail(const char *fmt, ...)
{
    pthread_mutex_lock(&fail_lock);
    if (!atomic_load_explicit(&fail_flag, memory_order_relaxed)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(fail_msg, sizeof fail_msg, fmt, ap);
        va_end(ap);
        atomic_store_explicit(&fail_flag, 1, memory_order_release);
    }
    pthread_mutex_unlock(&fail_lock);
}

void bench_fail_reset(void)
{
    atomic_store(&fail_flag, 0);
    fail_msg[0] = '\0';
}

int bench_failed(struct bench_out *out)
{
    if (!atomic_load_explicit(&fail_flag, memory_order_acquire)) return 0;
    pthread_mutex_lock(&fail_lock);
    snprintf(out->err, sizeof out->err, "%s", fail_msg);
    pthread_mutex_unlock(&fail_lock);
    return 1;
}

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bench_sleep(double sec)
{
    struct timespec ts = {(time_t)sec, (long)((sec - (double)(time_t)sec) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

void bench_root(usched_t *s, void (*fn)(void *), void *arg)
{
    usched_task_t *t;
    int r = usched_spawn(s, &t, fn, arg);
    if (r < 0) {
        bench_fail("spawn of the root fiber: %s", usched_last_error());
        return;
    }
    if ((r = usched_join(t)) < 0) bench_fail("join of the root fiber: %s", usched_strerror(r));
}

static bool call; /* --call (bench_params.call): set by each run of fib, skynet and spawn */

/* Spawns a joinable fiber from a fiber (with --call, one that may run at
 * once as a call); on failure records it and runs fn inline, so the
 * computation (and its check) still completes. */
static usched_task_t *spawn_or_inline(void (*fn)(void *), void *arg)
{
    usched_task_t *t;
    if ((call ? usched_spawn_call : usched_spawn)(usched_self(), &t, fn, arg) == 0) return t;
    bench_fail("spawn: %s", usched_last_error());
    fn(arg);
    return NULL;
}

static void join_checked(usched_task_t *t)
{
    int r;
    if (t && (r = usched_join(t)) < 0) bench_fail("join: %s", usched_strerror(r));
}

/* --no-inline (bench_params.no_inline): set by each run of fib, skynet and
 * spawn. A join of a child that has not started runs the child's function
 * on the joiner's stack (usched_join); waiting, yielding, until the child
 * has started makes every child a fiber that runs on its own stack, as Go's,
 * Tokio's and Boost.Fiber's children do. fib and skynet wait right after
 * each spawn (the child runs first, depth first: a wait at the join would
 * leave every spawned fiber of the tree yielding in the run queue, each
 * yield passing all of them); spawn waits for its whole batch. */
static bool no_inline;

static void mark_started(atomic_bool *started)
{
    if (no_inline) atomic_store_explicit(started, true, memory_order_release);
}

static void await_started(usched_task_t *t, const atomic_bool *started)
{
    if (!no_inline || !t) return;
    while (!atomic_load_explicit(started, memory_order_acquire)) usched_yield();
}

/* ---- fib: fiber per call down to the cutoff ----------------------------------- */

struct fib {
    int n, cutoff;
    long result;
    double ms;
    atomic_bool started; /* --no-inline */
};

static long fib_task(int n, int cutoff);

static void fib_fiber(void *arg)
{
    struct fib *f = arg;
    mark_started(&f->started);
    f->result = fib_task(f->n, f->cutoff);
}

static long fib_task(int n, int cutoff)
{
    if (n < cutoff) return peer_fib_serial(n);
    struct fib child = {.n = n - 1, .cutoff = cutoff};
    usched_task_t *t = spawn_or_inline(fib_fiber, &child);
    await_started(t, &child.started);
    long y = fib_task(n - 2, cutoff);
    join_checked(t);
    return child.result + y;
}

static void fib_root(void *arg)
{
    struct fib *f = arg;
    double t0 = bench_now();
    f->result = fib_task(f->n, f->cutoff);
    f->ms = (bench_now() - t0) * 1e3;
}

int bench_fib(usched_t *s, const struct bench_params *p, struct bench_out *out)
{
    struct fib f = {.n = (int)p->n, .cutoff = p->cutoff};
    no_inline = p->no_inline;
    call = p->call;
    bench_root(s, fib_root, &f);
    if (f.result != peer_fib_expected(f.n))
        bench_fail("fib(%d) = %ld, expected %ld", f.n, f.result, peer_fib_expected(f.n));
    out->value = f.ms;
    return bench_failed(out) ? -1 : 0;
}

/* ---- skynet: 10 children per fiber down to single leaves ---------------------- */

struct sky {
    long long num, size, sum;
    atomic_bool started; /* --no-inline */
};

static void sky_fiber(void *arg)
{
    struct sky *k = arg;
    mark_started(&k->started);
    if (k->size == 1) {
        k->sum = k->num;
        return;
    }
    struct sky c[10];
    usched_task_t *t[10];
    long long sub = k->size / 10;
    for (int i = 0; i < 10; i++) {
        c[i] = (struct sky){.num = k->num + i * sub, .size = sub};
        t[i] = spawn_or_inline(sky_fiber, &c[i]);
        await_started(t[i], &c[i].started);
    }
    k->sum = 0;
    for (int i = 0; i < 10; i++) {
        join_checked(t[i]);
        k->sum += c[i].sum;
    }
}

struct sky_root {
    struct sky top;
    double ms;
};

/* The clock runs from spawning the root task to having its result. */
static void sky_root(void *arg)
{
    struct sky_root *r = arg;
    double t0 = bench_now();
    usched_task_t *t = spawn_or_inline(sky_fiber, &r->top);
    await_started(t, &r->top.started);
    join_checked(t);
    r->ms = (bench_now() - t0) * 1e3;
}

int bench_skynet(usched_t *s, const struct bench_params *p, struct bench_out *out)
{
    struct sky_root r = {.top = {.num = 0, .size = p->n}};
    no_inline = p->no_inline;
    call = p->call;
    bench_root(s, sky_root, &r);
    if (r.top.sum != peer_skynet_expected(p->n))
        bench_fail("skynet(%ld leaves): sum %lld, expected %lld", p->n, r.top.sum,
                   peer_skynet_expected(p->n));
    out->value = r.ms;
    return bench_failed(out) ? -1 : 0;
}

/* ---- spawn: batches of PEER_SPAWN_BATCH empty fibers, spawned and joined ------- */

struct spawn_run {
    const struct bench_params *p;
    long done;
    atomic_long ran;
    double ns;
};

static void spawn_empty(void *arg)
{
    atomic_fetch_add_explicit(&((struct spawn_run *)arg)->ran, 1, memory_order_relaxed);
}

static void spawn_root(void *arg)
{
    struct spawn_run *r = arg;
    usched_task_t *t[PEER_SPAWN_BATCH];
    double t0 = bench_now();
    while (r->done < r->p->n &&
           !(r->done && r->p->have_duration && bench_now() - t0 >= r->p->duration)) {
        long batch = r->p->n - r->done < PEER_SPAWN_BATCH ? r->p->n - r->done : PEER_SPAWN_BATCH;
        for (long i = 0; i < batch; i++) t[i] = spawn_or_inline(spawn_empty, r);
        /* --no-inline: the joins wait for the whole batch to have run */
        while (no_inline && atomic_load_explicit(&r->ran, memory_order_acquire) < r->done + batch)
            usched_yield();
        for (long i = 0; i < batch; i++) join_checked(t[i]);
        r->done += batch;
    }
    r->ns = (bench_now() - t0) * 1e9 / (double)r->done;
}

int bench_spawn(usched_t *s, const struct bench_params *p, struct bench_out *out)
{
    struct spawn_run r = {.p = p};
    no_inline = p->no_inline;
    call = p->call;
    bench_root(s, spawn_root, &r);
    if (atomic_load(&r.ran) != r.done)
        bench_fail("spawn: %ld fibers spawned, %ld ran", r.done, atomic_load(&r.ran));
    out->value = r.ns;
    return bench_failed(out) ? -1 : 0;
}

/* ---- yield: two fibers on one CPU (the runner gives yield one worker) ------------- */

struct yield_run {
    long n;
    long count[2];
    int bad_cpu;
    double ns;
};

struct yielder {
    struct yield_run *r;
    int i;
};

static void yield_fiber(void *arg)
{
    struct yielder *y = arg;
    for (long i = 0; i < y->r->n; i++) {
        usched_yield();
        y->r->count[y->i]++;
    }
    if (usched_self_cpu() != 0) y->r->bad_cpu = 1;
}

static void yield_root(void *arg)
{
    struct yield_run *r = arg;
    struct yielder y[2] = {{r, 0}, {r, 1}};
    usched_task_t *t[2];
    double t0 = bench_now();
    for (int i = 0; i < 2; i++)
        if (usched_spawn_on(usched_self(), &t[i], 0, yield_fiber, &y[i]) < 0) {
            bench_fail("spawn on CPU 0: %s", usched_last_error());
            t[i] = NULL;
        }
    for (int i = 0; i < 2; i++) join_checked(t[i]);
    r->ns = (bench_now() - t0) * 1e9 / (2.0 * (double)r->n);
}

int bench_yield(usched_t *s, const struct bench_params *p, struct bench_out *out)
{
    struct yield_run r = {.n = p->n};
    usched_task_t *t;
    /* The root is bound to CPU 0 too, so the yielders start when it joins. */
    if (usched_spawn_on(s, &t, 0, yield_root, &r) < 0)
        bench_fail("spawn on CPU 0: %s", usched_last_error());
    else
        join_checked(t);
    if (!bench_failed(out) && (r.count[0] != p->n || r.count[1] != p->n || r.bad_cpu))
        bench_fail("yield: counts %ld and %ld, expected %ld each%s", r.count[0], r.count[1], p->n,
                   r.bad_cpu ? "; a bound fiber left CPU 0" : "");
    out->value = r.ns;
    return bench_failed(out) ? -1 : 0;
}

/* ---- build: a detached fiber per ready job --------------------------------------- */

static struct {
    struct peer_job *jobs;
    uint32_t *start, *succ;
    atomic_uint *pending; /* unfinished dependencies; acq_rel decrements */
    uint64_t *results;
    long n;
} bd;

static void build_job(void *arg);

static void build_ready(uint32_t i)
{
    if (usched_spawn(usched_self(), NULL, build_job, (void *)(uintptr_t)i) < 0) {
        bench_fail("build: spawn of job %u: %s", i, usched_last_error());
        build_job((void *)(uintptr_t)i);
    }
}

static void build_job(void *arg)
{
    uint32_t i = (uint32_t)(uintptr_t)arg;
    /* the acquire of the last decrement of pending[i] made the inputs visible */
    bd.results[i] = peer_build_work(peer_build_input(bd.jobs, bd.results, i), bd.jobs[i].units);
    for (uint32_t k = bd.start[i]; k < bd.start[i + 1]; k++)
        if (atomic_fetch_sub_explicit(&bd.pending[bd.succ[k]], 1, memory_order_acq_rel) == 1)
            build_ready(bd.succ[k]);
}

static void build_root(void *arg)
{
    (void)arg;
    for (long i = 0; i < bd.n; i++)
        if (bd.jobs[i].ndeps == 0) build_ready((uint32_t)i);
}

static void build_free(void)
{
    free(bd.jobs);
    free(bd.start);
    free(bd.succ);
    free(bd.pending);
    free(bd.results);
    memset(&bd, 0, sizeof bd);
}

int bench_build(usched_t *s, const struct bench_params *p, struct bench_out *out)
{
    bd.n = p->n;
    bd.jobs = calloc((size_t)bd.n, sizeof *bd.jobs);
    bd.pending = calloc((size_t)bd.n, sizeof *bd.pending);
    bd.results = calloc((size_t)bd.n, sizeof *bd.results);
    if (!bd.jobs || !bd.pending || !bd.results) {
        build_free();
        snprintf(out->err, sizeof out->err, "build: out of memory for %ld jobs", p->n);
        return -1;
    }
    peer_build_dag(bd.jobs, bd.n, p->seed);
    if (peer_build_succ(bd.jobs, bd.n, &bd.start, &bd.succ) < 0) {
        build_free();
        snprintf(out->err, sizeof out->err, "build: out of memory for %ld jobs", p->n);
        return -1;
    }
    for (long i = 0; i < bd.n; i++) atomic_init(&bd.pending[i], bd.jobs[i].ndeps);
    double t0 = bench_now();
    if (usched_spawn(s, NULL, build_root, NULL) < 0)
        bench_fail("build: spawn of the root fiber: %s", usched_last_error());
    int r = usched_wait(s);
    out->value = (bench_now() - t0) * 1e3;
    if (r < 0) bench_fail("build: wait: %s", usched_strerror(r));
    uint64_t sum = 0;
    for (long i = 0; i < bd.n; i++) sum += bd.results[i];
    if (!bench_failed(out) && !peer_build_check(bd.jobs, bd.n, p->seed, sum))
        bench_fail("build: checksum 0x%016llx of %ld jobs (seed %llu) is wrong",
                   (unsigned long long)sum, bd.n, (unsigned long long)p->seed);
    build_free();
    return bench_failed(out) ? -1 : 0;
}

/* ---- pgsim: the pgbench -S pair, client and backend fibers ------------------------ */

/*
 * Each client fiber has its own backend fiber (PostgreSQL runs a backend
 * process per connection) and a rendezvous channel each way. A transaction:
 * the client spends PGSIM_CLIENT_NS of CPU (pgbench building the query and
 * parsing the answer, libpq, the socket calls), sends a key and waits; the
 * backend spends PGSIM_BACKEND_NS (parse, plan, the index look-up, the
 * reply) and answers. Both costs are CPU seconds per transaction of the real
 * pair, measured on the development machine (bench/WORKLOADS.md has the
 * command and the numbers). The CPU is a fixed number of iterations of a
 * dependent multiply-xorshift chain, calibrated once per process (the
 * fastest of 7 timings), not a timed spin: two fibers on emulated siblings
 * share one real CPU and really take twice as long, as on SMT.
 */
#define PGSIM_CLIENT_NS 37000  /* pgbench: 0.60 CPU s over 16,418 transactions */
#define PGSIM_BACKEND_NS 93000 /* its two backends: 1.52 CPU s over the same */

static uint64_t pgsim_spin(uint64_t iters, uint64_t x)
{
    for (uint64_t i = 0; i < iters; i++) {
        x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        x ^= x >> 29;
    }
    return x;
}

/* Work-loop iterations per nanosecond of this CPU (once; read only after). */
static double pgsim_rate;

static void pgsim_calibrate(void)
{
    if (pgsim_rate > 0) return;
    const uint64_t iters = 1u << 20;
    double best = 1e9;
    volatile uint64_t sink = 0;
    for (int k = 0; k < 7; k++) {
        double t0 = bench_now();
        sink += pgsim_spin(iters, (uint64_t)k + 1);
        double dt = bench_now() - t0;
        if (dt > 0 && dt < best) best = dt;
    }
    (void)sink;
    pgsim_rate = (double)iters / (best * 1e9);
    fprintf(stderr, "pgsim: %.0f and %.0f work-loop iterations (client, backend) = %.0f and %.0f us of CPU "
                    "per transaction on this machine\n",
            PGSIM_CLIENT_NS * pgsim_rate, PGSIM_BACKEND_NS * pgsim_rate, PGSIM_CLIENT_NS / 1e3,
            PGSIM_BACKEND_NS / 1e3);
}

struct pgsim_conn {
    usched_chan_t *req, *rep;
    usched_task_t *client, *backend;
    const atomic_int *stop;
    uint64_t client_iters, backend_iters;
    long done;
    int ok;
    uint64_t sink; /* the work's result, kept so the compiler keeps the work */
} __attribute__((aligned(64)));

static void pgsim_backend(void *arg)
{
    struct pgsim_conn *c = arg;
    uint64_t sink = 0;
    void *m;
    int r;
    while ((r = usched_chan_recv(c->req, &m)) == 0 && (intptr_t)m >= 0) {
        sink += pgsim_spin(c->backend_iters, (uint64_t)(intptr_t)m);
        if ((r = usched_chan_send(c->rep, (void *)((intptr_t)m + 1))) < 0) break;
    }
    if (r < 0) bench_fail("pgsim backend: %s", usched_strerror(r));
    c->sink += sink;
}

static void pgsim_client(void *arg)
{
    struct pgsim_conn *c = arg;
    uint64_t sink = 0;
    long i = 0;
    int ok = 1, r = 0;
    while (!atomic_load_explicit(c->stop, memory_order_relaxed)) {
        sink += pgsim_spin(c->client_iters, (uint64_t)i);
        void *m;
        if ((r = usched_chan_send(c->req, (void *)(intptr_t)i)) < 0 || (r = usched_chan_recv(c->rep, &m)) < 0)
            break;
        ok &= (intptr_t)m == i + 1;
        i++;
    }
    if (r < 0) bench_fail("pgsim client: %s", usched_strerror(r));
    c->ok = ok;
    c->done = i;
    c->sink += sink;
    if ((r = usched_chan_send(c->req, (void *)(intptr_t)-1)) < 0) bench_fail("pgsim client: %s", usched_strerror(r));
}

struct pgsim_run {
    struct pgsim_conn *cs;
    int nconn, started;
    const struct bench_params *p;
    atomic_int stop;
    double elapsed;
    long total;
    int ok;
};

static void pgsim_main(void *arg)
{
    struct pgsim_run *r = arg;
    usched_t *s = usched_self();
    uint64_t ci = (uint64_t)(PGSIM_CLIENT_NS * pgsim_rate), bi = (uint64_t)(PGSIM_BACKEND_NS * pgsim_rate);
    double t0 = bench_now();
    for (int i = 0; i < r->nconn; i++) {
        struct pgsim_conn *c = &r->cs[i];
        *c = (struct pgsim_conn){.stop = &r->stop, .client_iters = ci, .backend_iters = bi, .ok = 1};
        if (usched_chan_create(&c->req, 0) < 0 || usched_chan_create(&c->rep, 0) < 0) {
            bench_fail("pgsim: channel: %s", usched_last_error());
            break;
        }
        if (usched_spawn(s, &c->backend, pgsim_backend, c) < 0) {
            bench_fail("pgsim: spawn of a backend: %s", usched_last_error());
            break;
        }
        if (usched_spawn(s, &c->client, pgsim_client, c) < 0) {
            bench_fail("pgsim: spawn of a client: %s", usched_last_error());
            usched_chan_close(c->req);
            usched_join(c->backend);
            break;
        }
        r->started++;
    }
    int e = usched_sleep_ns((uint64_t)(r->p->duration * 1e9));
    if (e < 0) bench_fail("sleep: %s", usched_strerror(e));
    atomic_store_explicit(&r->stop, 1, memory_order_relaxed);
    r->ok = 1;
    for (int i = 0; i < r->started; i++) {
        join_checked(r->cs[i].client);
        join_checked(r->cs[i].backend);
    }
    r->elapsed = bench_now() - t0;
    for (int i = 0; i < r->nconn; i++) {
        struct pgsim_conn *c = &r->cs[i];
        if (i < r->started) {
            r->total += c->done;
            r->ok &= c->ok;
        }
        if (c->req) usched_chan_destroy(c->req);
        if (c->rep) usched_chan_destroy(c->rep);
    }
}

int bench_pgsim(usched_t *s, const struct bench_params *p, struct bench_out *out)
{
    pgsim_calibrate();
    struct pgsim_run r = {.nconn = p->clients > 0 ? p->clients : 2, .p = p};
    r.cs = aligned_alloc(64, (size_t)r.nconn * sizeof *r.cs); /* sizeof is a multiple of 64 */
    if (!r.cs) {
        snprintf(out->err, sizeof out->err, "pgsim: out of memory");
        return -1;
    }
    memset(r.cs, 0, (size_t)r.nconn * sizeof *r.cs);
    bench_root(s, pgsim_main, &r);
    free(r.cs);
    if (!bench_failed(out) && !r.ok) bench_fail("pgsim: a reply was not the request + 1");
    if (!bench_failed(out) && r.total <= 0) bench_fail("pgsim: no transaction completed");
    out->value = r.elapsed > 0 ? (double)r.total / r.elapsed : 0;
    return bench_failed(out) ? -1 : 0;
}
