/*
 * Wake-up loss: many rounds of park/wake races across CPUs, with spin_us=0
 * (every idle CPU parks at once: the tightest race) and with the default
 * spin. A watchdog thread fails the test, instead of letting it hang, if no
 * round completes for 10 seconds while a runnable fiber is waiting.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "core/sched.h"
#include "test.h"
#include "usched.h"

static usched_t *s;
static _Atomic long progress;
static _Atomic int finished;
static const char *phase = "";

/* Phase 2: block/wake ping-pong between two fibers on different CPUs through
 * the core's blocking protocol. */
struct pp {
    _Atomic uint32_t lock;
    usched_task_t *waiter[2];
    int turn;
    long n;
};

static struct pp *live_pp; /* the ping-pong under way, for the dump */

/* What each worker was doing when the watchdog fired (racy reads: a
 * diagnosis, never asserted). */
static void dump_workers(void)
{
    fprintf(stderr, "nparked=%u nspinning=%u waking=%u gq_n=%u\n", (unsigned)atomic_load(&s->park.nparked),
            (unsigned)atomic_load(&s->park.nspinning), (unsigned)atomic_load(&s->park.waking),
            (unsigned)atomic_load(&s->gq.n));
    for (int c = 0; c < s->ncpus; c++) {
        struct usched__wk *w = s->wk[c];
        fprintf(stderr,
                "cpu %d: state=%u inbox_n=%d inbox_empty=%d inbox_lock=%u ring=%u next=%p current=%p "
                "sched_seq=%u bound_head=%p nbound=%u idle=%d\n",
                c, (unsigned)atomic_load(&w->state), (int)atomic_load(&w->inbox_n),
                (int)usched__inbox_empty(&w->inbox), (unsigned)atomic_load(&w->inbox_lock),
                usched__ring_len(&w->ring), (void *)atomic_load(&w->next), (void *)atomic_load(&w->current),
                (unsigned)atomic_load(&w->sched_seq), (void *)w->bound_head, (unsigned)atomic_load(&w->nbound),
                w->idle);
    }
    struct pp *p = live_pp;
    if (p)
        fprintf(stderr, "ping-pong: lock=%u turn=%d waiter=%p,%p\n", (unsigned)atomic_load(&p->lock), p->turn,
                (void *)p->waiter[0], (void *)p->waiter[1]);
}

static void *watchdog(void *arg)
{
    (void)arg;
    long last = -1;
    int still = 0;
    while (!atomic_load(&finished)) {
        sleep(1);
        long p = atomic_load(&progress);
        still = p == last ? still + 1 : 0;
        last = p;
        if (still >= 10) {
            fprintf(stderr, "watchdog: no progress for 10 s in phase '%s' at round %ld: a wake-up was lost\n",
                    phase, p);
            usched_stats_print(s, stderr);
            dump_workers();
            abort();
        }
    }
    return NULL;
}

static void nop(void *arg)
{
    (void)arg;
}

/* Phase 1: join across CPUs (remote spawn wakes a parked CPU; the exit wakes
 * the joiner back on a CPU that may be parking). */
static void cross_join(void *arg)
{
    long n = (long)arg;
    int ncpus = usched_ncpus(s);
    for (long i = 0; i < n; i++) {
        usched_task_t *t;
        ASSERT_OK(usched_spawn_on(s, &t, (int)((usched_self_cpu() + 1 + i) % ncpus), nop, NULL));
        ASSERT_OK(usched_join(t));
        atomic_fetch_add(&progress, 1);
    }
}


static void pp_unlock(void *arg)
{
    atomic_store_explicit(&((struct pp *)arg)->lock, 0, memory_order_release);
}

static void pp_lock(struct pp *p)
{
    while (atomic_exchange_explicit(&p->lock, 1, memory_order_acquire)) usched_yield();
}

static void pp_fiber(void *arg)
{
    struct pp *p = arg;
    int me = usched_self_cpu() == 0 ? 0 : 1;
    for (long i = 0; i < p->n; i++) {
        pp_lock(p);
        while (p->turn != me) {
            p->waiter[me] = usched__current();
            usched__block(pp_unlock, p);
            pp_lock(p);
        }
        p->turn = !me;
        usched_task_t *other = p->waiter[!me];
        p->waiter[!me] = NULL;
        pp_unlock(p);
        if (other) usched__wake(other, 0);
        atomic_fetch_add(&progress, 1);
    }
}

/* Phase 4: one byte ping-pong over a socketpair between two CPUs: every
 * message is a readiness event, and the CPUs park between messages, one of
 * them in the I/O poller (P1'-P4', W3'; tests/io/test_wakeloss.c does more). */
struct sp {
    int fd[2];
    long n;
};

static void sp_fiber(void *arg)
{
    struct sp *p = arg;
    int me = usched_self_cpu() == 0 ? 0 : 1;
    char b = 0;
    for (long i = 0; i < p->n; i++) {
        if (me == 0) ASSERT_EQ(usched_write(p->fd[0], &b, 1, USCHED_FOREVER), 1);
        ASSERT_EQ(usched_read(p->fd[me], &b, 1, USCHED_FOREVER), 1);
        if (me == 1) ASSERT_EQ(usched_write(p->fd[1], &b, 1, USCHED_FOREVER), 1);
        atomic_fetch_add(&progress, 1);
    }
}

/* Phase 3: an outside thread spawns bursts into an idle (parked) scheduler. */
static void outside_bursts(long rounds)
{
    for (long r = 0; r < rounds; r++) {
        usched_task_t *t[4];
        for (int i = 0; i < 4; i++) ASSERT_OK(usched_spawn(s, &t[i], nop, NULL));
        for (int i = 0; i < 4; i++) ASSERT_OK(usched_join(t[i]));
        atomic_fetch_add(&progress, 1);
        if (r % 64 == 0) usleep(200); /* let every worker park */
    }
}

static void run(const char *topo, const char *knobs)
{
    ASSERT_OK(usched_create(&s));
    if (topo) ASSERT_OK(usched_set(s, "topology", topo));
    ASSERT_OK(usched_set(s, "knobs", knobs));
    ASSERT_OK(usched_start(s));
    printf("%s, %s\n", topo ? topo : "this machine", knobs);

    phase = "cross join";
    usched_task_t *t;
    ASSERT_OK(usched_spawn_on(s, &t, 0, cross_join, (void *)test_scale(8000)));
    ASSERT_OK(usched_join(t));

    phase = "block/wake ping-pong";
    struct pp p = {.turn = 0, .n = test_scale(8000)};
    live_pp = &p;
    usched_task_t *a, *b;
    ASSERT_OK(usched_spawn_on(s, &a, 0, pp_fiber, &p));
    ASSERT_OK(usched_spawn_on(s, &b, usched_ncpus(s) - 1, pp_fiber, &p));
    ASSERT_OK(usched_join(a));
    ASSERT_OK(usched_join(b));
    live_pp = NULL;

    phase = "socketpair ping-pong through the poller";
    struct sp q = {.n = test_scale(4000)};
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, q.fd));
    ASSERT_OK(usched_spawn_on(s, &a, 0, sp_fiber, &q));
    ASSERT_OK(usched_spawn_on(s, &b, usched_ncpus(s) - 1, sp_fiber, &q));
    ASSERT_OK(usched_join(a));
    ASSERT_OK(usched_join(b));
    ASSERT_OK(usched_close(q.fd[0]));
    ASSERT_OK(usched_close(q.fd[1]));

    phase = "outside bursts";
    outside_bursts(test_scale(2000));
    ASSERT_OK(usched_destroy(s));
}

int main(void)
{
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog, NULL);
    run(NULL, "spin_us=0");
    run(NULL, "spin_us=50");
    run("pack:2 l3:1 l2:6 core:1 pu:2", "spin_us=0");
    run("pack:2 l3:1 l2:6 core:1 pu:2", "spin_us=20");
    atomic_store(&finished, 1);
    pthread_join(wd, NULL);
    printf("ok: %ld rounds\n", atomic_load(&progress));
    return 0;
}
