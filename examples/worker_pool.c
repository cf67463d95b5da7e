/*
 * A worker pool: a fixed number of worker fibers take jobs from one channel;
 * a wait group tells the submitter when every job is done.
 *
 * The submitter is the program's main thread (not a fiber): sending on a
 * channel from a plain thread blocks that thread when the channel is full,
 * and usched_wg_wait blocks it until the count drops to zero.
 *
 *   cc worker_pool.c $(pkg-config --cflags --libs usched) -o worker_pool
 *   ./worker_pool [JOBS]
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <usched.h>

#define WORKERS 8

struct pool {
    usched_chan_t *jobs;
    usched_wg_t done;            /* one count per job */
    atomic_uint_fast64_t result; /* sum of every job's answer */
    atomic_int by_worker[WORKERS];
};

struct worker {
    struct pool *p;
    int id;
};

/* The work: the number of steps of the Collatz sequence from n to 1. */
static unsigned collatz(uint64_t n)
{
    unsigned steps = 0;
    for (; n != 1; steps++) n = n % 2 ? 3 * n + 1 : n / 2;
    return steps;
}

static void worker(void *arg)
{
    struct worker *w = arg;
    void *msg;
    while (usched_chan_recv(w->p->jobs, &msg) == 0) { /* until closed and drained */
        atomic_fetch_add(&w->p->result, collatz((uint64_t)(uintptr_t)msg));
        atomic_fetch_add(&w->p->by_worker[w->id], 1);
        usched_wg_done(&w->p->done);
    }
}

int main(int argc, char **argv)
{
    long njobs = argc > 1 ? atol(argv[1]) : 20000;
    if (njobs < 1) {
        fprintf(stderr, "worker_pool: JOBS '%s' must be a positive number\n", argv[1]);
        return 2;
    }
    static struct pool p;
    struct worker w[WORKERS];
    usched_task_t *t[WORKERS];
    usched_t *s;
    int r = usched_create(&s);
    if (r == 0) r = usched_start(s);
    if (r == 0) r = usched_chan_create(&p.jobs, 128);
    if (r == 0) r = usched_wg_init(&p.done);
    if (r < 0) {
        fprintf(stderr, "worker_pool: %s: %s\n", usched_strerror(r), usched_last_error());
        return 1;
    }
    for (int i = 0; i < WORKERS; i++) {
        w[i] = (struct worker){&p, i};
        usched_spawn(s, &t[i], worker, &w[i]);
    }

    usched_wg_add(&p.done, (int)njobs); /* count the jobs before handing them out */
    for (long j = 1; j <= njobs; j++) usched_chan_send(p.jobs, (void *)(uintptr_t)j);
    usched_wg_wait(&p.done); /* every job done */

    usched_chan_close(p.jobs); /* the workers' loops end */
    for (int i = 0; i < WORKERS; i++) usched_join(t[i]);

    /* Check against a plain loop. */
    uint64_t want = 0;
    for (long j = 1; j <= njobs; j++) want += collatz((uint64_t)j);
    long jobs_seen = 0;
    printf("jobs per worker:");
    for (int i = 0; i < WORKERS; i++) {
        printf(" %d", atomic_load(&p.by_worker[i]));
        jobs_seen += atomic_load(&p.by_worker[i]);
    }
    uint64_t got = atomic_load(&p.result);
    printf("\n%ld jobs, total Collatz steps %llu (%s)\n", jobs_seen, (unsigned long long)got,
           got == want && jobs_seen == njobs ? "correct" : "WRONG");

    usched_wg_destroy(&p.done);
    usched_chan_destroy(p.jobs);
    usched_destroy(s);
    return got == want && jobs_seen == njobs ? 0 : 1;
}
