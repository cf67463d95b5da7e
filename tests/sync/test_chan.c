/*
 * Channels, every message counted, on the topology given as argv[1] (absent:
 * this machine):
 *  1. request/response pairs over rendezvous channels (1,000 pairs x 10,000
 *     round trips at scale 100): every reply matches its request;
 *  2. 64 producers / 64 consumers over a bounded channel: count, sum, no
 *     duplicate, FIFO per producer;
 *  3. close while fibers wait on both ends (and recv_timeout cancelled by
 *     close): every waiter returns -EPIPE, buffered messages stay readable;
 *  4. try_send/try_recv, recv_timeout, destroy while waited on (-EBUSY);
 *  5. outside threads feeding fibers and reading from them (they block);
 *  6. near wake-ups (knob near_wake): a send prefers a receiver that last
 *     ran on the sender's CPU, else in its LLC (a 2x2 virtual topology),
 *     passes the head over at most 16 times, and an outside thread's send
 *     (or near_wake=0) takes the longest waiter.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "sync/sync.h"
#include "sync_test.h"

static usched_t *sched;

/* ---- 1. request/response pairs ----------------------------------------- */

struct pair {
    usched_chan_t *req, *resp;
    long rounds;
    long served;  /* server's count */
    long matched; /* client's count */
};

static void pair_server(void *arg)
{
    struct pair *p = arg;
    void *m;
    int rc;
    while ((rc = usched_chan_recv(p->req, &m)) == 0) {
        p->served++;
        ASSERT_OK(usched_chan_send(p->resp, (void *)((uintptr_t)m + 1)));
    }
    ASSERT_EQ(rc, -EPIPE);
}

static void pair_client(void *arg)
{
    struct pair *p = arg;
    uintptr_t base = (uintptr_t)p << 20; /* distinct per pair */
    for (long r = 0; r < p->rounds; r++) {
        void *m;
        ASSERT_OK(usched_chan_send(p->req, (void *)(base + (uintptr_t)r * 2)));
        ASSERT_OK(usched_chan_recv(p->resp, &m));
        ASSERT_EQ_U((uintptr_t)m, base + (uintptr_t)r * 2 + 1);
        p->matched++;
    }
    ASSERT_OK(usched_chan_close(p->req));
}

static void test_pairs(void)
{
    long npairs = test_scale(1000) < 1000 ? test_scale(1000) : 1000;
    long rounds = test_scale(10000);
    struct pair *pairs = calloc((size_t)npairs, sizeof *pairs);
    usched_task_t **ts = calloc((size_t)npairs * 2, sizeof *ts);
    double t0 = test_now();
    for (long i = 0; i < npairs; i++) {
        ASSERT_OK(usched_chan_create(&pairs[i].req, 0));
        ASSERT_OK(usched_chan_create(&pairs[i].resp, 0));
        pairs[i].rounds = rounds;
        ASSERT_OK(usched_spawn(sched, &ts[2 * i], pair_server, &pairs[i]));
        ASSERT_OK(usched_spawn(sched, &ts[2 * i + 1], pair_client, &pairs[i]));
    }
    for (long i = 0; i < 2 * npairs; i++) ASSERT_OK(usched_join(ts[i]));
    double dt = test_now() - t0;
    long total = 0;
    for (long i = 0; i < npairs; i++) {
        ASSERT_EQ(pairs[i].served, rounds);
        ASSERT_EQ(pairs[i].matched, rounds);
        total += pairs[i].matched;
        ASSERT_OK(usched_chan_destroy(pairs[i].req));
        ASSERT_OK(usched_chan_destroy(pairs[i].resp));
    }
    printf("  pairs: %ld pairs x %ld round trips = %ld, all matched (%.0f ns per round trip overall)\n",
           npairs, rounds, total, dt * 1e9 / (double)total);
    free(pairs);
    free(ts);
}

/* ---- 2. producers / consumers over a bounded channel ---------------------- */

enum { NPROD = 64, NCONS = 64 };
static usched_chan_t *pc_chan;
static long pc_per;
static _Atomic long pc_count, pc_sum;
static _Atomic unsigned char *pc_seen;
static usched_wg_t pc_producers;

static void producer(void *arg)
{
    long id = (long)arg;
    for (long i = 0; i < pc_per; i++)
        ASSERT_OK(usched_chan_send(pc_chan, (void *)(uintptr_t)(id * pc_per + i + 1)));
    ASSERT_OK(usched_wg_done(&pc_producers));
}

static void consumer(void *arg)
{
    (void)arg;
    long last[NPROD];
    for (int i = 0; i < NPROD; i++) last[i] = -1;
    long n = 0, sum = 0;
    void *m;
    int rc;
    while ((rc = usched_chan_recv(pc_chan, &m)) == 0) {
        long v = (long)(uintptr_t)m - 1;
        ASSERT(v >= 0 && v < NPROD * pc_per);
        long prod = v / pc_per, seq = v % pc_per;
        ASSERT_GT(seq, last[prod]); /* FIFO per channel: a producer's order is kept */
        last[prod] = seq;
        ASSERT_EQ(atomic_fetch_add(&pc_seen[v], 1), 0); /* no duplicate */
        n++;
        sum += v + 1;
    }
    ASSERT_EQ(rc, -EPIPE);
    atomic_fetch_add(&pc_count, n);
    atomic_fetch_add(&pc_sum, sum);
}

static void pc_closer(void *arg)
{
    (void)arg;
    ASSERT_OK(usched_wg_wait(&pc_producers));
    ASSERT_OK(usched_chan_close(pc_chan));
}

static void test_prod_cons(size_t cap)
{
    pc_per = test_scale(20000);
    long total = NPROD * pc_per;
    pc_seen = calloc((size_t)total, 1);
    atomic_store(&pc_count, 0);
    atomic_store(&pc_sum, 0);
    ASSERT_OK(usched_chan_create(&pc_chan, cap));
    ASSERT_OK(usched_wg_init(&pc_producers));
    ASSERT_OK(usched_wg_add(&pc_producers, NPROD));
    usched_task_t *ts[NPROD + NCONS + 1];
    int k = 0;
    for (long i = 0; i < NCONS; i++) ASSERT_OK(usched_spawn(sched, &ts[k++], consumer, NULL));
    for (long i = 0; i < NPROD; i++) ASSERT_OK(usched_spawn(sched, &ts[k++], producer, (void *)i));
    ASSERT_OK(usched_spawn(sched, &ts[k++], pc_closer, NULL));
    for (int i = 0; i < k; i++) ASSERT_OK(usched_join(ts[i]));
    ASSERT_EQ(atomic_load(&pc_count), total);
    ASSERT_EQ(atomic_load(&pc_sum), total * (total + 1) / 2);
    for (long v = 0; v < total; v++) ASSERT_EQ(pc_seen[v], 1);
    ASSERT_OK(usched_wg_destroy(&pc_producers));
    ASSERT_OK(usched_chan_destroy(pc_chan));
    free((void *)pc_seen);
    printf("  %d producers / %d consumers, capacity %zu: %ld messages, sum %ld, no loss, no duplicate\n",
           NPROD, NCONS, cap, total, atomic_load(&pc_sum));
}

/* ---- 3. close while fibers wait on both ends ---------------------------- */

static _Atomic long got_epipe;

static void blocked_recv(void *arg)
{
    void *m;
    ASSERT_EQ(usched_chan_recv(arg, &m), -EPIPE);
    atomic_fetch_add(&got_epipe, 1);
}

static void blocked_recv_timeout(void *arg)
{
    void *m;
    ASSERT_EQ(usched_chan_recv_timeout(arg, &m, 3600ull * 1000000000ull), -EPIPE);
    atomic_fetch_add(&got_epipe, 1);
}

static void blocked_send(void *arg)
{
    ASSERT_EQ(usched_chan_send(arg, (void *)1), -EPIPE);
    atomic_fetch_add(&got_epipe, 1);
}

static void test_close(void)
{
    enum { K = 50 };
    /* receivers (plain and timed) on an empty rendezvous channel */
    usched_chan_t *c;
    ASSERT_OK(usched_chan_create(&c, 0));
    atomic_store(&got_epipe, 0);
    for (int i = 0; i < K; i++)
        ASSERT_OK(usched_spawn(sched, NULL, i % 2 ? blocked_recv : blocked_recv_timeout, c));
    WAIT_UNTIL(usched__chan_nwaiters(c) == K);
    ASSERT_EQ(usched_chan_destroy(c), -EBUSY);
    ASSERT_STR_CONTAINS(usched_last_error(), "waiting");
    ASSERT_OK(usched_chan_close(c));
    WAIT_UNTIL(atomic_load(&got_epipe) == K);
    ASSERT_EQ(usched_chan_close(c), -EPIPE);
    ASSERT_EQ(usched_chan_send(c, NULL), -EPIPE);
    ASSERT_OK(usched_chan_destroy(c));

    /* senders on a full bounded channel; the buffered messages survive */
    ASSERT_OK(usched_chan_create(&c, 4));
    for (uintptr_t i = 1; i <= 4; i++) ASSERT_OK(usched_chan_send(c, (void *)i));
    atomic_store(&got_epipe, 0);
    for (int i = 0; i < K; i++) ASSERT_OK(usched_spawn(sched, NULL, blocked_send, c));
    WAIT_UNTIL(usched__chan_nwaiters(c) == K);
    ASSERT_OK(usched_chan_close(c));
    WAIT_UNTIL(atomic_load(&got_epipe) == K);
    for (uintptr_t i = 1; i <= 4; i++) {
        void *m;
        ASSERT_OK(usched_chan_recv(c, &m));
        ASSERT_EQ_U((uintptr_t)m, i);
    }
    void *m;
    ASSERT_EQ(usched_chan_recv(c, &m), -EPIPE);
    ASSERT_EQ(usched_chan_try_recv(c, &m), -EPIPE);
    ASSERT_OK(usched_chan_destroy(c));
    printf("  close: %d receivers and %d senders woken with -EPIPE, buffered messages kept\n", K, K);
}

/* ---- 4. try ops and timeouts ------------------------------------------------ */

static _Atomic int timeout_phase;

static void timeout_fiber(void *arg)
{
    usched_chan_t *c = arg;
    void *m;
    uint64_t t0 = (uint64_t)(test_now() * 1e9);
    ASSERT_EQ(usched_chan_recv_timeout(c, &m, 2000000), -ETIMEDOUT);
    uint64_t dt = (uint64_t)(test_now() * 1e9) - t0;
    ASSERT_GE(dt, 2000000); /* never early */
    ASSERT_EQ(usched_chan_recv_timeout(c, &m, 0), -ETIMEDOUT);
    /* a message that arrives in time wins over the timeout */
    atomic_store(&timeout_phase, 1);
    ASSERT_OK(usched_chan_recv_timeout(c, &m, 3600ull * 1000000000ull));
    ASSERT_EQ_U((uintptr_t)m, 42);
}

static void test_try_timeout(void)
{
    usched_chan_t *c;
    void *m;
    ASSERT_OK(usched_chan_create(&c, 0));
    ASSERT_EQ(usched_chan_try_send(c, (void *)1), -EAGAIN); /* no receiver */
    ASSERT_EQ(usched_chan_try_recv(c, &m), -EAGAIN);
    ASSERT_OK(usched_chan_destroy(c));

    ASSERT_OK(usched_chan_create(&c, 2));
    ASSERT_OK(usched_chan_try_send(c, (void *)1));
    ASSERT_OK(usched_chan_try_send(c, (void *)2));
    ASSERT_EQ(usched_chan_try_send(c, (void *)3), -EAGAIN); /* full */
    ASSERT_OK(usched_chan_try_recv(c, &m));
    ASSERT_EQ_U((uintptr_t)m, 1);
    ASSERT_OK(usched_chan_try_recv(c, &m));
    ASSERT_EQ_U((uintptr_t)m, 2);
    ASSERT_EQ(usched_chan_try_recv(c, &m), -EAGAIN);

    usched_task_t *t;
    ASSERT_OK(usched_spawn(sched, &t, timeout_fiber, c));
    /* Send once the fiber is in its third (long) wait, after two timeouts. */
    WAIT_UNTIL(atomic_load(&timeout_phase) == 1 && usched__chan_nwaiters(c) == 1);
    ASSERT_OK(usched_chan_try_send(c, (void *)42)); /* handed to the waiting fiber */
    ASSERT_OK(usched_join(t));
    ASSERT_OK(usched_chan_destroy(c));

    /* from an outside thread: the thread blocks, then times out */
    ASSERT_OK(usched_chan_create(&c, 0));
    double t0 = test_now();
    ASSERT_EQ(usched_chan_recv_timeout(c, &m, 5000000), -ETIMEDOUT);
    ASSERT(test_now() - t0 >= 0.005);
    ASSERT_EQ(usched__chan_nwaiters(c), 0);
    ASSERT_OK(usched_chan_destroy(c));
    printf("  try_send/try_recv -EAGAIN, recv_timeout -ETIMEDOUT (fiber and thread)\n");
}

/* ---- 5. outside threads on both ends ------------------------------------- */

static long out_n;
static _Atomic long out_sum;

static void *thread_feeder(void *arg)
{
    usched_chan_t *c = arg;
    for (long i = 1; i <= out_n; i++) ASSERT_OK(usched_chan_send(c, (void *)(uintptr_t)i));
    ASSERT_OK(usched_chan_close(c));
    return NULL;
}

static void fiber_reader(void *arg)
{
    usched_chan_t *c = arg;
    void *m;
    long expect = 1, sum = 0;
    int rc;
    while ((rc = usched_chan_recv(c, &m)) == 0) {
        ASSERT_EQ((long)(uintptr_t)m, expect); /* single reader: exact FIFO */
        expect++;
        sum += (long)(uintptr_t)m;
    }
    ASSERT_EQ(rc, -EPIPE);
    atomic_fetch_add(&out_sum, sum);
}

static void fiber_feeder(void *arg)
{
    usched_chan_t *c = arg;
    for (long i = 1; i <= out_n; i++) ASSERT_OK(usched_chan_send(c, (void *)(uintptr_t)i));
    ASSERT_OK(usched_chan_close(c));
}

static void test_outside(void)
{
    out_n = test_scale(100000);
    size_t caps[2] = {0, 8};
    for (int k = 0; k < 2; k++) {
        usched_chan_t *c;
        ASSERT_OK(usched_chan_create(&c, caps[k]));
        atomic_store(&out_sum, 0);
        usched_task_t *t;
        ASSERT_OK(usched_spawn(sched, &t, fiber_reader, c));
        pthread_t th;
        ASSERT_EQ(pthread_create(&th, NULL, thread_feeder, c), 0);
        pthread_join(th, NULL);
        ASSERT_OK(usched_join(t));
        ASSERT_EQ(atomic_load(&out_sum), out_n * (out_n + 1) / 2);
        ASSERT_OK(usched_chan_destroy(c));

        /* fibers feed, this (outside) thread reads */
        ASSERT_OK(usched_chan_create(&c, caps[k]));
        ASSERT_OK(usched_spawn(sched, &t, fiber_feeder, c));
        void *m;
        long expect = 1;
        int rc;
        while ((rc = usched_chan_recv(c, &m)) == 0) ASSERT_EQ((long)(uintptr_t)m, expect++);
        ASSERT_EQ(rc, -EPIPE);
        ASSERT_EQ(expect - 1, out_n);
        ASSERT_OK(usched_join(t));
        ASSERT_OK(usched_chan_destroy(c));
    }
    printf("  outside threads: %ld messages each way, capacity 0 and 8, in order\n", out_n);
}

/* ---- 6. near wake-ups -------------------------------------------------------- */

enum { NEAR_MAX = 3 };
static usched_chan_t *near_c;
static _Atomic long near_got[NEAR_MAX];

struct near_run {
    usched_t *s;
    int nrecv;
    const int *cpus;   /* receiver i is bound to cpus[i] and waits i-th */
    usched_task_t *r[NEAR_MAX];
};

static void near_receiver(void *arg)
{
    void *m;
    while (usched_chan_recv(near_c, &m) == 0) atomic_fetch_add(&near_got[(intptr_t)arg], 1);
}

struct near_send {
    int n, nrecv;
};

/* Sends n messages, each once every receiver waits again. */
static void near_sender(void *arg)
{
    struct near_send *a = arg;
    for (int i = 0; i < a->n; i++) {
        WAIT_UNTIL(usched__chan_nwaiters(near_c) == a->nrecv);
        ASSERT_OK(usched_chan_send(near_c, (void *)1));
    }
    WAIT_UNTIL(usched__chan_nwaiters(near_c) == a->nrecv);
}

static uint64_t near_count(usched_t *s)
{
    uint64_t v;
    ASSERT_OK(usched_stat(s, "near_wakes", &v));
    return v;
}

/* The receivers wait in order, each bound (so its last CPU is known). */
static void near_start(struct near_run *nr)
{
    ASSERT_OK(usched_chan_create(&near_c, 0));
    for (int i = 0; i < NEAR_MAX; i++) atomic_store(&near_got[i], 0);
    for (intptr_t i = 0; i < nr->nrecv; i++) {
        ASSERT_OK(usched_spawn_on(nr->s, &nr->r[i], nr->cpus[i], near_receiver, (void *)i));
        WAIT_UNTIL(usched__chan_nwaiters(near_c) == i + 1);
    }
}

/* want: messages each receiver got. */
static void near_stop(struct near_run *nr, const long *want)
{
    for (int i = 0; i < nr->nrecv; i++) ASSERT_EQ(atomic_load(&near_got[i]), want[i]);
    ASSERT_OK(usched_chan_close(near_c));
    for (int i = 0; i < nr->nrecv; i++) ASSERT_OK(usched_join(nr->r[i]));
    ASSERT_OK(usched_chan_destroy(near_c));
}

/* A fiber bound to `from` sends n. */
static void near_round(usched_t *s, const int *cpus, int nrecv, int from, int n, const long *want)
{
    struct near_run nr = {.s = s, .nrecv = nrecv, .cpus = cpus};
    struct near_send a = {.n = n, .nrecv = nrecv};
    usched_task_t *snd;
    near_start(&nr);
    ASSERT_OK(usched_spawn_on(s, &snd, from, near_sender, &a));
    ASSERT_OK(usched_join(snd));
    near_stop(&nr, want);
}

static void test_near(void)
{
    static const int c01[] = {0, 1};
    uint64_t before = near_count(sched);
    /* receiver 0 on CPU 0 waits first, receiver 1 on CPU 1 behind it; a
     * sender on CPU 1: 16 sends go to receiver 1, the 17th to the head,
     * passed over 16 times */
    near_round(sched, c01, 2, 1, 16, (const long[]){0, 16});
    ASSERT_EQ_U(near_count(sched) - before, 16);
    near_round(sched, c01, 2, 1, 17, (const long[]){1, 16});
    ASSERT_EQ_U(near_count(sched) - before, 32);
    /* knob off: FIFO, the longest waiter first */
    ASSERT_OK(usched_set(sched, "knobs", "near_wake=0"));
    near_round(sched, c01, 2, 1, 1, (const long[]){1, 0});
    ASSERT_EQ_U(near_count(sched) - before, 32);
    ASSERT_OK(usched_set(sched, "knobs", "near_wake=1"));
    /* an outside thread has no CPU to be near: FIFO */
    struct near_run nr = {.s = sched, .nrecv = 2, .cpus = c01};
    near_start(&nr);
    ASSERT_OK(usched_chan_send(near_c, (void *)1));
    WAIT_UNTIL(usched__chan_nwaiters(near_c) == 2);
    near_stop(&nr, (const long[]){1, 0});
    ASSERT_EQ_U(near_count(sched) - before, 32);

    /* By topology: two packages of one LLC with two CPUs each (0-1, 2-3),
     * a sender on CPU 2. */
    usched_t *s4 = sync_test_start("pack:2 l3:1 core:2 pu:1");
    ASSERT_EQ(usched_ncpus(s4), 4);
    /* the receiver in the sender's LLC before the head in the other */
    near_round(s4, (const int[]){0, 3}, 2, 2, 1, (const long[]){0, 1});
    /* both in the other LLC: the head */
    near_round(s4, (const int[]){0, 1}, 2, 2, 1, (const long[]){1, 0});
    /* the sender's own CPU before its LLC, whatever the order */
    near_round(s4, (const int[]){3, 1, 2}, 3, 2, 1, (const long[]){0, 0, 1});
    ASSERT_EQ_U(near_count(s4), 2);
    ASSERT_OK(usched_destroy(s4));
    printf("  near wake-ups: the sender's CPU, then its LLC, before the longest waiter; the head "
           "after 16 passes; FIFO from outside\n");
}

int main(int argc, char **argv)
{
    const char *topo = argc > 1 ? argv[1] : NULL;
    sched = sync_test_start(topo);
    printf("topology %s: %d CPUs\n", topo ? topo : "(this machine)", usched_ncpus(sched));
    test_try_timeout();
    test_close();
    test_outside();
    test_near();
    test_prod_cons(16);
    test_prod_cons(1);
    test_pairs();
    ASSERT_OK(usched_destroy(sched));
    printf("ok\n");
    return 0;
}
