/*
 * Micro benchmark of the run-queue building blocks (src/rq), side by side
 * with a pthread-mutex-protected queue and, when built with libck-dev,
 * concurrencykit's ck_ring. Reports numbers; asserts nothing.
 *
 *   owner push+pop   one thread: push one, pop one (ns per pair), and
 *                    push 128 then pop 128 (ns per item)
 *   steal            the owner pushes N items (popping and running one itself
 *                    when the queue is full) while a thief on the other CPU
 *                    takes from it and runs what it took: ns per item, the
 *                    share stolen, items per steal and successful steals. "run" is a spin of `work` iterations (0: the
 *                    queue alone; 200 and 2000: about 65 ns and 650 ns of
 *                    fiber work on a Zen 4)
 *   inbox            one producer hands N items to a consumer on the other
 *                    CPU (ns per item)
 *
 * Usage: bench_rq [items]   (default 4000000)
 * Threads are pinned to CPUs 0 and 1 when the machine allows it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "rq/rq.h"

#ifdef USCHED_HAVE_CK
#include <ck_ring.h>
#endif

#define HALF (RQ_RING_SIZE / 2)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    (void)pthread_setaffinity_np(pthread_self(), sizeof s, &s); /* best effort */
}

static void *item(long i) { return (void *)(uintptr_t)(i + 1); }

/* Two-thread runs: the caller (CPU 0) starts the peer (CPU 1), and both
 * begin when the peer is pinned. */
static _Atomic int go;

static pthread_t start_peer(void *(*fn)(void *))
{
    pthread_t th;
    atomic_store(&go, 0);
    if (pthread_create(&th, NULL, fn, NULL) != 0) {
        fprintf(stderr, "bench_rq: cannot create a thread\n");
        exit(1);
    }
    pin(0);
    while (atomic_load(&go) != 1) {}
    atomic_store(&go, 2);
    return th;
}

static void peer_ready(void)
{
    pin(1);
    atomic_store(&go, 1);
    while (atomic_load(&go) != 2) {}
}

/* Stand-in for running a fiber. */
static inline void run(int work)
{
    for (int k = 0; k < work; k++)
        __asm__ volatile("" ::: "memory");
}

/* ---- the queues, each behind the same four inline operations ------------
 * K_init(q), K_push(q, p) -> bool, K_pop(q) -> item or NULL, and
 * K_steal(victim, thief, &last) -> items taken (thief's owner calls it). */

/* usched ring_spmc */
typedef usched__ring_spmc_t ring_q;
static inline void ring_init(ring_q *q) { usched__ring_init(q); }
static inline bool ring_push(ring_q *q, void *p) { return usched__ring_push(q, p) == 0; }
static inline void *ring_pop(ring_q *q) { return usched__ring_pop(q); }
static inline unsigned ring_steal(ring_q *v, ring_q *t, void **last)
{
    unsigned n;
    *last = usched__ring_steal(v, t, &n);
    return n;
}

/* Baseline: the same 256-slot ring under a pthread mutex; steal takes half
 * under the victim's lock. */
typedef struct {
    pthread_mutex_t mu;
    uint32_t head, tail;
    void *slots[RQ_RING_SIZE];
} __attribute__((aligned(USCHED_CACHELINE))) mutex_q;
static inline void mutex_init(mutex_q *q)
{
    pthread_mutex_init(&q->mu, NULL);
    q->head = q->tail = 0;
}
static inline bool mutex_push(mutex_q *q, void *p)
{
    pthread_mutex_lock(&q->mu);
    bool ok = q->tail - q->head < RQ_RING_SIZE;
    if (ok) q->slots[q->tail++ % RQ_RING_SIZE] = p;
    pthread_mutex_unlock(&q->mu);
    return ok;
}
static inline void *mutex_pop(mutex_q *q)
{
    pthread_mutex_lock(&q->mu);
    void *p = q->head != q->tail ? q->slots[q->head++ % RQ_RING_SIZE] : NULL;
    pthread_mutex_unlock(&q->mu);
    return p;
}
static inline unsigned mutex_steal(mutex_q *v, mutex_q *t, void **last)
{
    void *buf[HALF];
    pthread_mutex_lock(&v->mu);
    uint32_t n = v->tail - v->head;
    n -= n / 2;
    for (uint32_t i = 0; i < n; i++)
        buf[i] = v->slots[v->head++ % RQ_RING_SIZE];
    pthread_mutex_unlock(&v->mu);
    *last = n ? buf[n - 1] : NULL;
    for (uint32_t i = 0; i + 1 < n; i++)
        mutex_push(t, buf[i]);
    return n;
}

#ifdef USCHED_HAVE_CK
/* ck_ring SPMC (256 slots hold 255): thieves dequeue one item per CAS, as
 * ck has no batch steal. */
typedef struct {
    ck_ring_t r;
    ck_ring_buffer_t buf[RQ_RING_SIZE];
} __attribute__((aligned(USCHED_CACHELINE))) ck_q;
static inline void ck_init(ck_q *q) { ck_ring_init(&q->r, RQ_RING_SIZE); }
static inline bool ck_push(ck_q *q, void *p) { return ck_ring_enqueue_spmc(&q->r, q->buf, p); }
static inline void *ck_pop(ck_q *q)
{
    void *p;
    return ck_ring_dequeue_spmc(&q->r, q->buf, &p) ? p : NULL;
}
static inline unsigned ck_steal(ck_q *v, ck_q *t, void **last)
{
    (void)t;
    *last = ck_pop(v);
    return *last != NULL;
}
#define CK_RING(X) X(ck)
#else
#define CK_RING(X)
#endif

#define RINGS(X) X(ring) X(mutex) CK_RING(X)

/* ---- owner push+pop ----------------------------------------------------- */
#define OWNER_BENCH(K)                                                          \
    static void owner_##K(long n)                                              \
    {                                                                           \
        static K##_q q;                                                         \
        K##_init(&q);                                                           \
        uintptr_t sink = 0;                                                     \
        double t0 = now();                                                      \
        for (long i = 0; i < n; i++) {                                          \
            K##_push(&q, item(i));                                              \
            sink += (uintptr_t)K##_pop(&q);                                     \
        }                                                                       \
        double t1 = now();                                                      \
        for (long i = 0; i < n; i += HALF) {                                    \
            for (long k = 0; k < HALF; k++)                                     \
                K##_push(&q, item(k));                                          \
            for (long k = 0; k < HALF; k++)                                     \
                sink += (uintptr_t)K##_pop(&q);                                 \
        }                                                                       \
        double t2 = now();                                                      \
        printf("  %-8s %8.1f %12.1f%s\n", #K, (t1 - t0) * 1e9 / (double)n,      \
               (t2 - t1) * 1e9 / (double)(2 * n), sink ? "" : " (?)");         \
    }
RINGS(OWNER_BENCH)

/* ---- steal -------------------------------------------------------------- */
static _Atomic long st_consumed;
static int st_work;

#define STEAL_BENCH(K)                                                          \
    static K##_q st_##K[2];                                                     \
    static long st_n_##K, st_steals_##K, st_stolen_##K;                         \
    static void *thief_##K(void *arg)                                           \
    {                                                                           \
        (void)arg;                                                              \
        peer_ready();                                                           \
        long stolen = 0, steals = 0;                                            \
        while (atomic_load_explicit(&st_consumed, memory_order_relaxed) < st_n_##K) { \
            void *last;                                                         \
            unsigned n = K##_steal(&st_##K[0], &st_##K[1], &last);              \
            if (!n) continue;                                                   \
            steals++;                                                           \
            stolen += n;                                                        \
            run(st_work);                                                       \
            while (K##_pop(&st_##K[1]))                                         \
                run(st_work);                                                   \
            atomic_fetch_add_explicit(&st_consumed, n, memory_order_relaxed);   \
        }                                                                       \
        st_steals_##K = steals;                                                 \
        st_stolen_##K = stolen;                                                 \
        return NULL;                                                            \
    }                                                                           \
    static void steal_##K(long n, int work)                                     \
    {                                                                           \
        st_work = work;                                                         \
        K##_init(&st_##K[0]);                                                   \
        K##_init(&st_##K[1]);                                                   \
        st_n_##K = n;                                                           \
        atomic_store(&st_consumed, 0);                                          \
        pthread_t th = start_peer(thief_##K);                                   \
        double t0 = now();                                                      \
        long own = 0;                                                           \
        for (long i = 0; i < n; i++)                                            \
            while (!K##_push(&st_##K[0], item(i)))                              \
                if (K##_pop(&st_##K[0])) {                                      \
                    own++;                                                      \
                    run(work);                                                  \
                }                                                               \
        atomic_fetch_add(&st_consumed, own);                                    \
        void *p;                                                                \
        while ((p = K##_pop(&st_##K[0]))) {                                     \
            run(work);                                                          \
            atomic_fetch_add(&st_consumed, 1);                                  \
        }                                                                       \
        pthread_join(th, NULL);                                                 \
        double dt = now() - t0;                                                 \
        printf("  %-8s %5d %8.1f %9.1f%% %10.1f %8ld\n", #K, work, dt * 1e9 / (double)n, \
               100.0 * (double)st_stolen_##K / (double)n,                       \
               st_steals_##K ? (double)st_stolen_##K / (double)st_steals_##K : 0.0, \
               st_steals_##K);                                                  \
    }
RINGS(STEAL_BENCH)

/* ---- inbox: cross-thread hand-off ----------------------------------------- */
typedef struct {
    usched__mpsc_node_t node;
    long seq;
} inode_t;
static inode_t *inodes;

/* usched inbox_mpsc */
typedef usched__inbox_mpsc_t inbox_q;
static inline void inbox_init(inbox_q *q) { usched__inbox_init(q); }
static inline void inbox_put(inbox_q *q, inode_t *n) { usched__inbox_push(q, &n->node); }
static inline inode_t *inbox_get(inbox_q *q) { return (inode_t *)usched__inbox_pop(q); }

/* Baseline: an intrusive list under a pthread mutex. */
typedef struct {
    pthread_mutex_t mu;
    usched__mpsc_node_t *first, *last;
} mlist_q;
static inline void mlist_init(mlist_q *q)
{
    pthread_mutex_init(&q->mu, NULL);
    q->first = q->last = NULL;
}
static inline void mlist_put(mlist_q *q, inode_t *n)
{
    atomic_store_explicit(&n->node.next, NULL, memory_order_relaxed);
    pthread_mutex_lock(&q->mu);
    if (q->last) atomic_store_explicit(&q->last->next, &n->node, memory_order_relaxed);
    else q->first = &n->node;
    q->last = &n->node;
    pthread_mutex_unlock(&q->mu);
}
static inline inode_t *mlist_get(mlist_q *q)
{
    pthread_mutex_lock(&q->mu);
    usched__mpsc_node_t *n = q->first;
    if (n) {
        q->first = atomic_load_explicit(&n->next, memory_order_relaxed);
        if (!q->first) q->last = NULL;
    }
    pthread_mutex_unlock(&q->mu);
    return (inode_t *)n;
}

#ifdef USCHED_HAVE_CK
/* ck_ring MPSC, bounded (4096 slots): the producer spins while it is full. */
typedef struct {
    ck_ring_t r;
    ck_ring_buffer_t buf[4096];
} ckmpsc_q;
static inline void ckmpsc_init(ckmpsc_q *q) { ck_ring_init(&q->r, 4096); }
static inline void ckmpsc_put(ckmpsc_q *q, inode_t *n)
{
    while (!ck_ring_enqueue_mpsc(&q->r, q->buf, n)) {}
}
static inline inode_t *ckmpsc_get(ckmpsc_q *q)
{
    inode_t *n;
    return ck_ring_dequeue_mpsc(&q->r, q->buf, &n) ? n : NULL;
}
#define CK_MPSC(X) X(ckmpsc)
#else
#define CK_MPSC(X)
#endif

#define INBOXES(X) X(inbox) X(mlist) CK_MPSC(X)

#define INBOX_BENCH(K)                                                          \
    static K##_q ib_##K;                                                        \
    static long ib_n_##K;                                                       \
    static void *producer_##K(void *arg)                                        \
    {                                                                           \
        (void)arg;                                                              \
        peer_ready();                                                           \
        for (long i = 0; i < ib_n_##K; i++)                                     \
            K##_put(&ib_##K, &inodes[i]);                                       \
        return NULL;                                                            \
    }                                                                           \
    static void inbox_bench_##K(long n)                                         \
    {                                                                           \
        K##_init(&ib_##K);                                                      \
        ib_n_##K = n;                                                           \
        pthread_t th = start_peer(producer_##K);                                \
        double t0 = now();                                                      \
        long got = 0, empty = 0, bad = 0;                                       \
        while (got < n) {                                                       \
            inode_t *x = K##_get(&ib_##K);                                      \
            if (!x) {                                                           \
                empty++;                                                        \
                continue;                                                       \
            }                                                                   \
            bad += x->seq != got;                                               \
            got++;                                                              \
        }                                                                       \
        double dt = now() - t0;                                                 \
        pthread_join(th, NULL);                                                 \
        printf("  %-8s %8.1f %14.2f%s\n", #K, dt * 1e9 / (double)n,             \
               (double)empty / (double)n, bad ? "  (out of order!)" : "");      \
    }
INBOXES(INBOX_BENCH)

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 4000000;
    if (n < HALF) {
        fprintf(stderr, "bench_rq: items '%s' must be at least %u\n", argv[1], HALF);
        return 2;
    }
    n -= n % HALF;
    inodes = calloc((size_t)n, sizeof *inodes);
    if (!inodes) {
        fprintf(stderr, "bench_rq: cannot allocate %ld nodes\n", n);
        return 1;
    }
    for (long i = 0; i < n; i++)
        inodes[i].seq = i;
    printf("bench_rq: %ld items, %ld CPUs online%s\n", n, (long)sysconf(_SC_NPROCESSORS_ONLN),
#ifdef USCHED_HAVE_CK
           ", ck_ring from libck"
#else
           ", no libck (ck_ring rows skipped)"
#endif
    );
#define RUN(K) owner_##K(n);
    printf("owner push+pop (one thread)\n  %-8s %8s %12s\n", "queue", "ns/pair",
           "ns/item x128");
    RINGS(RUN)
#undef RUN
#define RUN(K) steal_##K(n / 4, work);
    printf("steal (owner pushes on CPU 0, thief on CPU 1)\n  %-8s %5s %8s %10s %10s %8s\n",
           "queue", "work", "ns/item", "stolen", "per steal", "steals");
    static const int works[] = {0, 200, 2000};
    for (unsigned w = 0; w < sizeof works / sizeof works[0]; w++) {
        int work = works[w];
        RINGS(RUN)
    }
#undef RUN
#define RUN(K) inbox_bench_##K(n);
    printf("inbox hand-off (producer CPU 1 -> consumer CPU 0)\n  %-8s %8s %14s\n", "queue",
           "ns/item", "empty polls/item");
    INBOXES(RUN)
#undef RUN
    free(inodes);
    return 0;
}
