/*
 * Blocking primitives micro-benchmark (a report, not a test):
 *   - channel ping-pong round trip between two fibers: rendezvous and
 *     capacity 1, both fibers bound to CPU 0, bound to CPUs 0 and 1, and
 *     unbound (the policy places them);
 *   - mutex: uncontended lock+unlock, and two fibers contending (FIFO
 *     hand-off) on one CPU and on two;
 *   - semaphore ping-pong (post/wait hand-off) on one CPU.
 * Prints ns per operation (wall clock), best and median of several runs;
 * for the one-CPU cases also the CPU time of that worker thread per
 * operation, which a loaded machine (other processes preempting the worker)
 * does not inflate. Cross-CPU cases run a tenth of the operations: each
 * message may cost a worker park and futex wake.
 *
 *   bench_sync [operations per run (default 1000000)] [runs (default 5)]
 * The policy and knobs come from the environment (USCHED_POLICY, ...).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "usched.h"

static usched_t *sched;
static long iters;
static double cpu_ns; /* thread CPU time of the measured fiber's worker, ns total */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_sync: %s: %s (%s)\n", what, usched_strerror(rc), usched_last_error());
    exit(1);
}

#define CHECK(call)                                                             \
    do {                                                                        \
        int rc_ = (call);                                                       \
        if (rc_ < 0) die(#call, rc_);                                           \
    } while (0)

/* ---- channel ping-pong ------------------------------------------------------- */

static usched_chan_t *ping, *pong;

static void pinger(void *arg)
{
    (void)arg;
    void *m;
    double c0 = thread_cpu();
    for (long i = 0; i < iters; i++) {
        CHECK(usched_chan_send(ping, (void *)i));
        CHECK(usched_chan_recv(pong, &m));
    }
    cpu_ns = thread_cpu() - c0; /* meaningful when both fibers share this worker */
}

static void ponger(void *arg)
{
    (void)arg;
    void *m;
    for (long i = 0; i < iters; i++) {
        CHECK(usched_chan_recv(ping, &m));
        CHECK(usched_chan_send(pong, m));
    }
}

/* cpu < 0: unbound. Returns ns per round trip. */
static double run_pingpong(size_t cap, int cpu_a, int cpu_b)
{
    CHECK(usched_chan_create(&ping, cap));
    CHECK(usched_chan_create(&pong, cap));
    usched_task_t *a, *b;
    double t0 = now();
    if (cpu_b >= 0)
        CHECK(usched_spawn_on(sched, &b, cpu_b, ponger, NULL));
    else
        CHECK(usched_spawn(sched, &b, ponger, NULL));
    if (cpu_a >= 0)
        CHECK(usched_spawn_on(sched, &a, cpu_a, pinger, NULL));
    else
        CHECK(usched_spawn(sched, &a, pinger, NULL));
    CHECK(usched_join(a));
    CHECK(usched_join(b));
    double dt = now() - t0;
    CHECK(usched_chan_destroy(ping));
    CHECK(usched_chan_destroy(pong));
    return dt * 1e9 / (double)iters;
}

/* ---- mutex ---------------------------------------------------------------------- */

static usched_mutex_t mu;
static long shared_counter;
static double lock_cpu0;

static void locker(void *arg)
{
    long n = (long)arg;
    double c0 = thread_cpu();
    if (lock_cpu0 < 0 || c0 < lock_cpu0) lock_cpu0 = c0;
    for (long i = 0; i < n; i++) {
        CHECK(usched_mutex_lock(&mu));
        shared_counter++;
        CHECK(usched_mutex_unlock(&mu));
    }
    /* One-CPU runs: both fibers share this thread, so from the first start
     * to the last end is the CPU time of all of them. */
    cpu_ns = thread_cpu() - lock_cpu0;
}

/* nthreads fibers, each n lock/unlock pairs; ns per pair overall. */
static double run_mutex(int nfibers, int cpu_a, int cpu_b)
{
    CHECK(usched_mutex_init(&mu));
    shared_counter = 0;
    lock_cpu0 = -1;
    usched_task_t *t[2];
    long n = iters;
    double t0 = now();
    for (int i = 0; i < nfibers; i++) {
        int cpu = i == 0 ? cpu_a : cpu_b;
        CHECK(usched_spawn_on(sched, &t[i], cpu, locker, (void *)n));
    }
    for (int i = 0; i < nfibers; i++) CHECK(usched_join(t[i]));
    double dt = now() - t0;
    if (shared_counter != n * nfibers) {
        fprintf(stderr, "bench_sync: mutex counter %ld, expected %ld\n", shared_counter, n * nfibers);
        exit(1);
    }
    CHECK(usched_mutex_destroy(&mu));
    return dt * 1e9 / (double)(n * nfibers);
}

/* ---- semaphore ping-pong ----------------------------------------------------------- */

static usched_sem_t sa, sb;

static void sem_a(void *arg)
{
    (void)arg;
    double c0 = thread_cpu();
    for (long i = 0; i < iters; i++) {
        CHECK(usched_sem_post(&sb));
        CHECK(usched_sem_wait(&sa));
    }
    cpu_ns = thread_cpu() - c0;
}

static void sem_b(void *arg)
{
    (void)arg;
    for (long i = 0; i < iters; i++) {
        CHECK(usched_sem_wait(&sb));
        CHECK(usched_sem_post(&sa));
    }
}

static double run_sem(int cpu_a, int cpu_b)
{
    CHECK(usched_sem_init(&sa, 0));
    CHECK(usched_sem_init(&sb, 0));
    usched_task_t *a, *b;
    double t0 = now();
    CHECK(usched_spawn_on(sched, &b, cpu_b, sem_b, NULL));
    CHECK(usched_spawn_on(sched, &a, cpu_a, sem_a, NULL));
    CHECK(usched_join(a));
    CHECK(usched_join(b));
    double dt = now() - t0;
    CHECK(usched_sem_destroy(&sa));
    CHECK(usched_sem_destroy(&sb));
    return dt * 1e9 / (double)iters;
}

/* ---- driver ------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

enum { KIND_PING, KIND_MUTEX, KIND_SEM };

static void report(const char *name, int runs, int kind, size_t cap, int a, int b, int nfibers)
{
    double v[64], c[64];
    long saved = iters;
    bool one_cpu = a >= 0 && a == b;
    if (!one_cpu && kind != KIND_MUTEX && iters >= 10000) iters /= 10;
    for (int r = 0; r < runs; r++) {
        switch (kind) {
        case KIND_PING: v[r] = run_pingpong(cap, a, b); break;
        case KIND_MUTEX: v[r] = run_mutex(nfibers, a, b); break;
        default: v[r] = run_sem(a, b); break;
        }
        /* mutex: the last fiber's CPU time covers both when they share a CPU */
        c[r] = cpu_ns / (double)(kind == KIND_MUTEX ? iters * nfibers : iters);
    }
    qsort(v, (size_t)runs, sizeof v[0], cmp_double);
    qsort(c, (size_t)runs, sizeof c[0], cmp_double);
    printf("%-42s best %9.1f ns  median %9.1f ns", name, v[0], v[runs / 2]);
    if (one_cpu) printf("   cpu best %6.1f ns  median %6.1f ns", c[0], c[runs / 2]);
    printf("\n");
    iters = saved;
}

int main(int argc, char **argv)
{
    iters = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    if (iters <= 0 || runs <= 0 || runs > 64) {
        fprintf(stderr, "usage: bench_sync [round trips per run > 0] [runs 1..64]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(usched_create(&sched));
    CHECK(usched_start(sched));
    int n = usched_ncpus(sched);
    int other = n > 1 ? 1 : 0;
    printf("bench_sync: %d CPUs, %ld operations per run, %d runs\n", n, iters, runs);
    report("chan rendezvous ping-pong, one CPU (rt)", runs, KIND_PING, 0, 0, 0, 0);
    report("chan cap-1 ping-pong, one CPU (rt)", runs, KIND_PING, 1, 0, 0, 0);
    report("chan rendezvous ping-pong, CPUs 0/1 (rt)", runs, KIND_PING, 0, 0, other, 0);
    report("chan cap-1 ping-pong, CPUs 0/1 (rt)", runs, KIND_PING, 1, 0, other, 0);
    report("chan rendezvous ping-pong, unbound (rt)", runs, KIND_PING, 0, -1, -1, 0);
    report("sem ping-pong, one CPU (rt)", runs, KIND_SEM, 0, 0, 0, 0);
    report("mutex lock+unlock, uncontended", runs, KIND_MUTEX, 0, 0, 0, 1);
    report("mutex lock+unlock, 2 fibers one CPU", runs, KIND_MUTEX, 0, 0, 0, 2);
    report("mutex lock+unlock, 2 fibers CPUs 0/1", runs, KIND_MUTEX, 0, 0, other, 2);
    CHECK(usched_destroy(sched));
    return 0;
}
