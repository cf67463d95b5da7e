/*
 * The poller role beside a spinning CPU (src/io/poller.c, P1'): a parking
 * CPU leaves the role to a spinner for the length of a spin and looks again,
 * so readiness is never left to a CPU that stopped polling. Two workers
 * (cpus 0,1), no contention verdicts (a contended CPU never spins), and no
 * stall monitor.
 *
 *   pingpong  two fibers bounce a byte over a socketpair 20,000 times (one
 *             CPU parks while the other spins: the deferral's path; its
 *             count is printed, not asserted, as it depends on timing);
 *   hog       with spin_us=200000, once one CPU spins and another has
 *             parked beside it (so it left the poller role to the spinner),
 *             a fiber bound to the spinning CPU computes with no scheduling
 *             point until a reader fiber got its byte; the stall monitor is
 *             off (stall_us=0), so only the parked CPU can see the
 *             readiness, once its deferral ends. An outside thread writes
 *             the byte once the hog computes on the spinning CPU (the
 *             hog says so when it starts). The reader must get
 *             it, on another CPU, while the hog still runs (bounded at 20 s:
 *             a lost readiness fails, it never hangs). The parked CPU may
 *             renew a deferral the spinner polled through, but not one
 *             that no CPU polled through: a renewal on the hog's being
 *             awake alone fails here.
 */
#include <sched.h>
#include <sys/socket.h>
#include <time.h>

#include "io/io_impl.h"
#include "io_test.h"

#define ROUNDS 20000
#define BOUND_S 20.0

static usched_t *s;
static long rounds;
static int pp[2], hp[2];
static _Atomic int got, reader_cpu = -1, hog_cpu = -1, hog_ok, waiting;

static void bounce(void *arg)
{
    int fd = pp[(long)arg];
    char b = 'p';
    for (long i = 0; i < rounds; i++) {
        if ((long)arg == 0) ASSERT_EQ(usched_write(fd, &b, 1, USCHED_FOREVER), 1);
        ASSERT_EQ(usched_read(fd, &b, 1, USCHED_FOREVER), 1);
        if ((long)arg == 1) ASSERT_EQ(usched_write(fd, &b, 1, USCHED_FOREVER), 1);
    }
}

static void reader(void *arg)
{
    (void)arg;
    char b;
    atomic_store(&waiting, 1);
    ASSERT_EQ(usched_read(hp[0], &b, 1, USCHED_FOREVER), 1);
    ASSERT_EQ(b, 'h');
    atomic_store(&reader_cpu, usched_self_cpu());
    atomic_store(&got, 1);
}

static void hog(void *arg)
{
    (void)arg;
    double end = test_now() + BOUND_S;
    atomic_store(&hog_cpu, usched_self_cpu()); /* it computes from here on */
    while (!atomic_load(&got) && test_now() < end) {
    }
    atomic_store(&hog_ok, atomic_load(&got));
}

static void nop(void *arg)
{
    (void)arg;
}

static uint64_t stat_of(const char *name)
{
    uint64_t v = 0;
    ASSERT_OK(usched_stat(s, name, &v));
    return v;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    ASSERT_OK(usched_create(&s));
    /* no contention verdicts: a contended CPU never spins (C2), and a
     * loaded machine (tests run in parallel) makes workers contended */
    ASSERT_OK(usched_set(s, "knobs", "stall_us=0,contend_pct=0,io_poller=shared"));
    /* Two workers: then one CPU spins and the other parks beside it (with
     * more, Go's rule lets several spin). */
    cpu_set_t mine;
    ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
    if (CPU_COUNT(&mine) < 2) {
        printf("skipped: 1 CPU\n");
        usched_destroy(s);
        return 77;
    }
    ASSERT_OK(usched_set(s, "cpus", "0,1"));
    ASSERT_OK(usched_start(s));
    if (usched_ncpus(s) < 2) {
        printf("skipped: 1 CPU\n");
        usched_destroy(s);
        return 77;
    }

    /* pingpong (fewer round trips under a stress scale: sanitizers) */
    rounds = test_scale(ROUNDS);
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, pp));
    ASSERT_OK(usched_spawn(s, NULL, bounce, (void *)1L));
    ASSERT_OK(usched_spawn(s, NULL, bounce, (void *)0L));
    ASSERT_OK(usched_wait(s));
    printf("pingpong: %ld round trips; io_poller_deferred %llu (renewed %llu), io_poll_blocks %llu\n", rounds,
           (unsigned long long)stat_of("io_poller_deferred"), (unsigned long long)stat_of("io_poller_renewed"),
           (unsigned long long)stat_of("io_poll_blocks"));

    /* hog */
    ASSERT_OK(usched_set(s, "knobs", "spin_us=200000"));
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, hp));
    ASSERT_OK(usched_spawn(s, NULL, reader, NULL));
    /* Until the reader waits on its fd (the poller counts it). */
    for (double end = test_now() + BOUND_S; test_now() < end; usleep(100)) {
        struct usched__io *io = atomic_load(&s->io);
        if (atomic_load(&waiting) && io && usched__io_nwaiters(io) == 1) break;
    }
    ASSERT_EQ(usched__io_nwaiters(atomic_load(&s->io)), 1);
    /* One CPU spinning, one parked beside it (it deferred the role): wake
     * every CPU with a fiber each; the first to go idle spins, the others
     * park beside it. */
    int spinner = -1;
    for (int attempt = 0; attempt < 20 && spinner < 0; attempt++) {
        uint64_t deferred0 = stat_of("io_poller_deferred");
        for (int c = 0; c < s->ncpus; c++) ASSERT_OK(usched_spawn_on(s, NULL, c, nop, NULL));
        double end = test_now() + 0.15; /* the spin lasts 200 ms */
        while (spinner < 0 && test_now() < end) {
            int parked = 0, awake = -1;
            for (int c = 0; c < s->ncpus; c++) {
                if (atomic_load(&s->wk[c]->state) == WK_PARKED)
                    parked++;
                else
                    awake = c;
            }
            if (parked == s->ncpus - 1 && atomic_load(&s->park.nspinning) == 1 &&
                stat_of("io_poller_deferred") > deferred0)
                spinner = awake;
            else
                usleep(100);
        }
        if (spinner < 0) usleep(250000); /* missed (a slow machine): let it settle, try again */
    }
    ASSERT(spinner >= 0);
    ASSERT_OK(usched_spawn_on(s, NULL, spinner, hog, NULL));
    /* The byte goes out once the hog computes on the spinning CPU (it has
     * no scheduling point until the reader got it). */
    for (double end = test_now() + BOUND_S; atomic_load(&hog_cpu) < 0 && test_now() < end;) usleep(100);
    ASSERT_EQ(atomic_load(&hog_cpu), spinner);
    ASSERT_EQ(atomic_load(&got), 0);
    ASSERT_EQ(write(hp[1], "h", 1), 1);
    ASSERT_OK(usched_wait(s));
    printf("hog: reader got its byte on CPU %d while CPU %d computed: %d\n", atomic_load(&reader_cpu),
           spinner, atomic_load(&hog_ok));
    ASSERT_EQ(atomic_load(&got), 1);
    ASSERT_EQ(atomic_load(&hog_ok), 1);
    ASSERT_NE(atomic_load(&reader_cpu), spinner);

    ASSERT_OK(usched_destroy(s));
    close(pp[0]), close(pp[1]), close(hp[0]), close(hp[1]);
    printf("ok\n");
    return 0;
}
