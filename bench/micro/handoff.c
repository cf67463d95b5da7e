/*
 * Hand-off paths in isolation, for counting what one of them costs in
 * locked (atomic read-modify-write) instructions (bench/micro/count_locked.py
 * steps through the code between two calls of handoff_mark()):
 *   pingpong  two fibers, round trips over two rendezvous channels
 *   spawn     a fiber spawns an empty fiber and joins it
 *   spawnrun  a fiber spawns an empty fiber, yields so that the child runs
 *             as a fiber (its own stack and context, an exit), then joins
 *             it
 *   spawn8    a fiber spawns 8 empty fibers, then joins them in spawn
 *             order: a mark per batch, so divide by 8
 *   spawn1000 the same with 1,000 (usched bench spawn's batches, which
 *             outgrow caches that 8 fit in): divide by 1,000
 *   call1000  the same with usched_spawn_call: the first 64 children are
 *             fibers joined inline, the other 936 run as calls
 *   yield     two fibers bound to the CPU yield to each other (usched bench
 *             yield); a mark per yield of one of them, so two switches
 * One worker (topology "pack:1 core:1 pu:1"), so the whole path runs on
 * one thread. Usage: bench_handoff pingpong|spawn|spawnrun|spawn8|spawn1000|call1000|yield [iterations [topology]]
 * A topology of two CPUs in one LLC ("pack:1 l3:1 core:2 pu:1") takes the
 * path of the 2-CPU benchmark machine: with a one-CPU LLC every wake-up
 * counts as wide (the wake_wide factor is the LLC size, 1), and the
 * rendezvous wake-ups go through the idle search instead of the sync
 * hand-off; the second worker parks and the pair stays on the first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "usched.h"

static long iters;
static usched_chan_t *ping, *pong;

/* Called once per round trip / spawn, by the driving fiber only. */
__attribute__((noinline)) void handoff_mark(long i);
__attribute__((noinline)) void handoff_mark(long i)
{
    __asm__ volatile("" ::"r"(i) : "memory");
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_handoff: %s: %s\n", what, usched_strerror(rc));
    exit(1);
}

static void echo(void *arg)
{
    (void)arg;
    void *m;
    for (long i = 0; i < iters; i++) {
        int rc = usched_chan_recv(ping, &m);
        if (rc == 0) rc = usched_chan_send(pong, m);
        if (rc < 0) die("echo", rc);
    }
}

static void pinger(void *arg)
{
    (void)arg;
    void *m;
    for (long i = 0; i < iters; i++) {
        handoff_mark(i);
        int rc = usched_chan_send(ping, (void *)(i + 1));
        if (rc == 0) rc = usched_chan_recv(pong, &m);
        if (rc < 0) die("ping", rc);
        if (m != (void *)(i + 1)) {
            fprintf(stderr, "bench_handoff: round trip %ld came back as %p\n", i, m);
            exit(1);
        }
    }
}

static void nop(void *arg)
{
    (void)arg;
}

static void spawner(void *arg)
{
    (void)arg;
    for (long i = 0; i < iters; i++) {
        handoff_mark(i);
        usched_task_t *t;
        int rc = usched_spawn(usched_self(), &t, nop, NULL);
        if (rc == 0) rc = usched_join(t);
        if (rc < 0) die("spawn", rc);
    }
}

static void spawn_runner(void *arg)
{
    (void)arg;
    for (long i = 0; i < iters; i++) {
        handoff_mark(i);
        usched_task_t *t;
        int rc = usched_spawn(usched_self(), &t, nop, NULL);
        if (rc < 0) die("spawn", rc);
        usched_yield();
        if ((rc = usched_join(t)) < 0) die("join", rc);
    }
}

static usched_task_t *batch_t[1000];
static int batch_call; /* call1000: spawn with usched_spawn_call */

static void spawner_batch(void *arg)
{
    int n = (int)(long)arg;
    for (long i = 0; i < iters; i++) {
        handoff_mark(i);
        usched_task_t **t = batch_t;
        for (int k = 0; k < n; k++) {
            int rc = (batch_call ? usched_spawn_call : usched_spawn)(usched_self(), &t[k], nop, NULL);
            if (rc < 0) die("spawn", rc);
        }
        for (int k = 0; k < n; k++) {
            int rc = usched_join(t[k]);
            if (rc < 0) die("join", rc);
        }
    }
}

static void yielder(void *arg)
{
    for (long i = 0; i < iters; i++) {
        if (arg) handoff_mark(i);
        usched_yield();
    }
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "pingpong";
    iters = argc > 2 ? atol(argv[2]) : 100000;
    const char *topo = argc > 3 ? argv[3] : "pack:1 core:1 pu:1";
    if (iters <= 0 || (strcmp(what, "pingpong") && strcmp(what, "spawn") && strcmp(what, "spawn8") &&
                       strcmp(what, "spawn1000") && strcmp(what, "call1000") && strcmp(what, "spawnrun") &&
                       strcmp(what, "yield"))) {
        fprintf(stderr, "usage: bench_handoff pingpong|spawn|spawnrun|spawn8|spawn1000|call1000|yield [iterations > 0 [topology]]\n");
        return 2;
    }
    usched_t *s;
    int rc;
    if ((rc = usched_create(&s)) < 0 || (rc = usched_set(s, "topology", topo)) < 0 ||
        (rc = usched_start(s)) < 0)
        die("scheduler", rc);
    usched_task_t *a, *b = NULL;
    if (!strcmp(what, "pingpong")) {
        if ((rc = usched_chan_create(&ping, 0)) < 0 || (rc = usched_chan_create(&pong, 0)) < 0)
            die("chan_create", rc);
        if ((rc = usched_spawn(s, &b, echo, NULL)) < 0) die("spawn", rc);
        if ((rc = usched_spawn(s, &a, pinger, NULL)) < 0) die("spawn", rc);
    } else if (!strcmp(what, "yield")) {
        if ((rc = usched_spawn_on(s, &b, 0, yielder, NULL)) < 0) die("spawn_on", rc);
        if ((rc = usched_spawn_on(s, &a, 0, yielder, "mark")) < 0) die("spawn_on", rc);
    } else if (!strcmp(what, "spawn8") || !strcmp(what, "spawn1000") || !strcmp(what, "call1000")) {
        batch_call = !strcmp(what, "call1000");
        if ((rc = usched_spawn(s, &a, spawner_batch, (void *)(long)(strcmp(what, "spawn8") ? 1000 : 8))) < 0)
            die("spawn", rc);
    } else if ((rc = usched_spawn(s, &a, !strcmp(what, "spawnrun") ? spawn_runner : spawner, NULL)) < 0) {
        die("spawn", rc);
    }
    if ((rc = usched_join(a)) < 0 || (b && (rc = usched_join(b)) < 0)) die("join", rc);
    usched_destroy(s);
    printf("bench_handoff %s: %ld done\n", what, iters);
    return 0;
}
