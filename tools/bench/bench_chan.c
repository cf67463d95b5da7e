/*
 * usched bench: the workloads built on channels (pingpong, pairs, select), as
 * bench/WORKLOADS.md defines them. Integers travel as the message pointer
 * itself; -1 tells a server to end.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bench_wl.h"

#define STOP_MSG ((void *)(intptr_t)-1)

static usched_chan_t *chan_new(size_t capacity)
{
    usched_chan_t *c = NULL;
    if (usched_chan_create(&c, capacity) < 0) {
        bench_fail("channel of capacity %zu: %s", capacity, usched_last_error());
        return NULL;
    }
    return c;
}

static void chan_free(usched_chan_t *c)
{
    int r;
    if (c && (r = usched_chan_destroy(c)) < 0) bench_fail("channel destroy: %s", usched_strerror(r));
}

static int chan_send(usched_chan_t *c, void *m)
{
    int r = usched_chan_send(c, m);
    if (r < 0) bench_fail("channel send: %s", usched_strerror(r));
    return r;
}

static int chan_recv(usched_chan_t *c, void **m)
{
    int r = usched_chan_recv(c, m);
    if (r < 0) bench_fail("channel receive: %s", usched_strerror(r));
    return r;
}

/* ---- pingpong and pairs: a client and an echo server over req/rep ---------------- */

struct pair {
    usched_chan_t *req, *rep;
    const atomic_int *stop; /* pairs: the shared flag (relaxed); pingpong: NULL */
    long limit;             /* pingpong: round trips */
    const struct bench_params *p;
    long done;
    int ok;
    double ns; /* pingpong: per round trip */
    usched_task_t *client, *server;
};

static void echo_server(void *arg)
{
    struct pair *p = arg;
    void *m;
    while (chan_recv(p->req, &m) == 0 && (intptr_t)m >= 0)
        if (chan_send(p->rep, (void *)((intptr_t)m + 1)) < 0) break;
}

/* One round trip; 0 if the reply is wrong or a channel failed. */
static int round_trip(struct pair *p, intptr_t i)
{
    void *r;
    return chan_send(p->req, (void *)i) == 0 && chan_recv(p->rep, &r) == 0 && (intptr_t)r == i + 1;
}

static void pingpong_client(void *arg)
{
    struct pair *p = arg;
    double t0 = bench_now();
    long i;
    int ok = 1;
    for (i = 0; i < p->limit; i++) {
        if (i % PEER_CHECK_EVERY == 0 && i && p->p->have_duration && bench_now() - t0 >= p->p->duration)
            break;
        ok &= round_trip(p, i);
    }
    p->ok = ok;
    p->ns = (bench_now() - t0) * 1e9 / (double)i;
    p->done = i;
    chan_send(p->req, STOP_MSG);
}

static void pair_client(void *arg)
{
    struct pair *p = arg;
    long i = 0;
    int ok = 1; /* kept local, as the peers do: the pairs' structs share cache lines */
    while (!atomic_load_explicit(p->stop, memory_order_relaxed)) ok &= round_trip(p, i++);
    p->ok = ok;
    p->done = i;
    chan_send(p->req, STOP_MSG);
}

static void pair_free(struct pair *p)
{
    chan_free(p->req);
    chan_free(p->rep);
}

static int pair_init(struct pair *p, const struct bench_params *bp, const atomic_int *stop)
{
    *p = (struct pair){.p = bp, .stop = stop, .ok = 1, .limit = bp->n};
    p->req = chan_new(0);
    p->rep = chan_new(0);
    return p->req && p->rep ? 0 : -1;
}

/* Spawns the server, then the client (from the calling fiber or thread). */
static int pair_start(usched_t *s, struct pair *p, void (*client)(void *))
{
    if (usched_spawn(s, &p->server, echo_server, p) < 0) {
        bench_fail("spawn of a server: %s", usched_last_error());
        return -1;
    }
    if (usched_spawn(s, &p->client, client, p) < 0) {
        bench_fail("spawn of a client: %s", usched_last_error());
        usched_chan_close(p->req);
        usched_join(p->server);
        return -1;
    }
    return 0;
}

static void pair_join(struct pair *p)
{
    int r;
    if ((r = usched_join(p->client)) < 0) bench_fail("join of a client: %s", usched_strerror(r));
    if ((r = usched_join(p->server)) < 0) bench_fail("join of a server: %s", usched_strerror(r));
}

int bench_pingpong(usched_t *s, const struct bench_params *bp, struct bench_out *out)
{
    struct pair p;
    if (pair_init(&p, bp, NULL) == 0 && pair_start(s, &p, pingpong_client) == 0) {
        pair_join(&p);
        if (!p.ok) bench_fail("pingpong: a reply was not the request + 1");
    }
    pair_free(&p);
    out->value = p.ns;
    return bench_failed(out) ? -1 : 0;
}

/* pairs: the main task starts every pair, sleeps, sets the flag, joins. */
struct pairs_run {
    struct pair *ps;
    int npairs, started;
    const struct bench_params *p;
    atomic_int stop;
    double elapsed;
    long total;
    int ok;
};

static void pairs_main(void *arg)
{
    struct pairs_run *r = arg;
    usched_t *s = usched_self();
    double t0 = bench_now();
    for (int i = 0; i < r->npairs; i++) {
        if (pair_init(&r->ps[i], r->p, &r->stop) < 0 || pair_start(s, &r->ps[i], pair_client) < 0) {
            pair_free(&r->ps[i]);
            break;
        }
        r->started++;
    }
    int e = usched_sleep_ns((uint64_t)(r->p->duration * 1e9));
    if (e < 0) bench_fail("sleep: %s", usched_strerror(e));
    atomic_store_explicit(&r->stop, 1, memory_order_relaxed);
    for (int i = 0; i < r->started; i++) pair_join(&r->ps[i]);
    r->elapsed = bench_now() - t0;
    r->ok = 1;
    for (int i = 0; i < r->started; i++) {
        r->total += r->ps[i].done;
        r->ok &= r->ps[i].ok;
        pair_free(&r->ps[i]);
    }
}

int bench_pairs(usched_t *s, const struct bench_params *p, struct bench_out *out)
{
    struct pairs_run r = {.npairs = usched_ncpus(s), .p = p};
    r.ps = calloc((size_t)r.npairs, sizeof *r.ps);
    if (!r.ps) {
        snprintf(out->err, sizeof out->err, "pairs: out of memory");
        return -1;
    }
    bench_root(s, pairs_main, &r);
    free(r.ps);
    if (!bench_failed(out) && !r.ok) bench_fail("pairs: a reply was not the request + 1");
    out->value = (double)r.total / r.elapsed;
    return bench_failed(out) ? -1 : 0;
}

/* ---- select: clients, a server pool and the shared table ---------------------------- */

static struct peer_row *select_table; /* built once, read-only afterwards */

/* A client's own cache lines (allocated aligned): the servers write row, and
 * clients on two CPUs must not share a line through their neighbours'. */
struct select_client {
    usched_chan_t *reply; /* capacity 1: the server never waits on it */
    struct peer_row row;  /* written by a server before it sends on reply */
    uint64_t key;         /* the request: this client is the message */
    uint64_t rng;
    long done;
    int ok;
    usched_task_t *t;
} __attribute__((aligned(64)));

struct select_run {
    const struct bench_params *p;
    usched_chan_t *req; /* capacity = clients: a send never waits for room */
    struct select_client *cs;
    usched_task_t **servers;
    int nclients, nservers;
    atomic_int stop;
    double elapsed;
    long total;
    int ok;
};

static void select_server(void *arg)
{
    struct select_run *r = arg;
    void *m;
    /* the channel is closed, once every client has ended, to stop the servers */
    while (usched_chan_recv(r->req, &m) == 0) {
        struct select_client *c = m;
        const struct peer_row *row = peer_select_find(select_table, c->key);
        if (row)
            c->row = *row;
        else
            memset(&c->row, 0, sizeof c->row);
        if (chan_send(c->reply, c) < 0) break;
    }
}

struct select_arg {
    struct select_run *r;
    struct select_client *c;
};

static void select_client(void *arg)
{
    struct select_run *r = ((struct select_arg *)arg)->r;
    struct select_client *c = ((struct select_arg *)arg)->c;
    void *m;
    long done = 0;
    int ok = 1; /* kept local, as the peers do */
    while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
        c->key = peer_select_key(&c->rng);
        if (chan_send(r->req, c) < 0 || chan_recv(c->reply, &m) < 0) break;
        ok &= m == c && peer_select_ok(c->key, &c->row);
        done++;
    }
    c->ok &= ok;
    c->done = done;
}

static void select_main(void *arg)
{
    struct select_run *r = arg;
    usched_t *s = usched_self();
    struct select_arg *args = calloc((size_t)r->nclients, sizeof *args);
    int nserv = 0, ncli = 0;
    if (!args) {
        bench_fail("select: out of memory");
        return;
    }
    double t0 = bench_now();
    for (; nserv < r->nservers; nserv++)
        if (usched_spawn(s, &r->servers[nserv], select_server, r) < 0) {
            bench_fail("spawn of a server: %s", usched_last_error());
            break;
        }
    for (; nserv == r->nservers && ncli < r->nclients; ncli++) {
        struct select_client *c = &r->cs[ncli];
        c->rng = peer_xorshift_seed(r->p->seed, (uint64_t)ncli);
        c->ok = 1;
        args[ncli] = (struct select_arg){r, c};
        if (!(c->reply = chan_new(1))) break;
        if (usched_spawn(s, &c->t, select_client, &args[ncli]) < 0) {
            bench_fail("spawn of a client: %s", usched_last_error());
            chan_free(c->reply);
            break;
        }
    }
    if (ncli == r->nclients) {
        int e = usched_sleep_ns((uint64_t)(r->p->duration * 1e9));
        if (e < 0) bench_fail("sleep: %s", usched_strerror(e));
    }
    atomic_store_explicit(&r->stop, 1, memory_order_relaxed);
    for (int i = 0; i < ncli; i++) {
        int e = usched_join(r->cs[i].t);
        if (e < 0) bench_fail("join of a client: %s", usched_strerror(e));
    }
    r->elapsed = bench_now() - t0;
    usched_chan_close(r->req);
    for (int i = 0; i < nserv; i++) {
        int e = usched_join(r->servers[i]);
        if (e < 0) bench_fail("join of a server: %s", usched_strerror(e));
    }
    r->ok = 1;
    for (int i = 0; i < ncli; i++) {
        r->total += r->cs[i].done;
        r->ok &= r->cs[i].ok;
        chan_free(r->cs[i].reply);
    }
    free(args);
}

int bench_select(usched_t *s, const struct bench_params *p, struct bench_out *out)
{
    struct select_run r = {.p = p, .nclients = p->clients, .nservers = usched_ncpus(s)};
    if (!select_table && !(select_table = peer_select_table())) {
        snprintf(out->err, sizeof out->err, "select: out of memory for the table");
        return -1;
    }
    r.cs = aligned_alloc(64, (size_t)r.nclients * sizeof *r.cs); /* sizeof is a multiple of 64 */
    if (r.cs) memset(r.cs, 0, (size_t)r.nclients * sizeof *r.cs);
    r.servers = calloc((size_t)r.nservers, sizeof *r.servers);
    if (!r.cs || !r.servers || !(r.req = chan_new((size_t)r.nclients))) {
        free(r.cs);
        free(r.servers);
        if (!bench_failed(out)) snprintf(out->err, sizeof out->err, "select: out of memory");
        return -1;
    }
    bench_root(s, select_main, &r);
    chan_free(r.req);
    free(r.cs);
    free(r.servers);
    if (!bench_failed(out) && !r.ok) bench_fail("select: a reply row was not the row looked up");
    out->value = (double)r.total / r.elapsed;
    return bench_failed(out) ? -1 : 0;
}
