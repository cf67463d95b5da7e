/*
 * A scheduler holding 10,000 idle connections (fewer at a lower stress
 * scale or fd limit) with no timers uses no CPU while idle: once every
 * reader waits, no worker wakes, switches or polls for a second (the
 * counters do not move), and the process's CPU time is printed.
 */
#include <sys/socket.h>
#include <time.h>

#include "io/io_impl.h"
#include "io_test.h"

static usched_t *s;
static _Atomic long done;

static void reader(void *arg)
{
    int fd = (int)(long)arg;
    char b;
    ASSERT_EQ(usched_read(fd, &b, 1, USCHED_FOREVER), 1);
    ASSERT_EQ(b, 'x');
    atomic_fetch_add(&done, 1);
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *watched[] = {"switches", "parks", "io_polls", "io_poll_blocks", "io_events",
                                "spins", "futex_wakes"};
#define NW (int)(sizeof watched / sizeof *watched)

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    long n = test_cap_alive(test_scale(10000));
    long lim = io_raise_nofile(2 * n + 256);
    if (2 * n + 256 > lim) n = (lim - 256) / 2;
    int *fds = calloc((size_t)(2 * n), sizeof *fds);
    ASSERT(fds);
    for (long i = 0; i < n; i++) ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds + 2 * i));
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_start(s));
    for (long i = 0; i < n; i++) ASSERT_OK(usched_spawn(s, NULL, reader, (void *)(long)fds[2 * i]));
    /* Until every reader waits on its fd. */
    for (int k = 0; k < 3000; k++) {
        struct usched__io *io = atomic_load(&s->io);
        if (io && atomic_load(&io->nwaiters) == (uint32_t)n) break;
        usleep(10000);
    }
    ASSERT_EQ(atomic_load(&atomic_load(&s->io)->nwaiters), n);
    /* Until every CPU has parked (one of them in the poller). */
    for (int k = 0; k < 1000; k++) {
        int parked = 0;
        for (int c = 0; c < s->ncpus; c++) {
            uint32_t st = atomic_load(&s->wk[c]->state);
            parked += st == WK_PARKED || st == WK_PARKED_POLL;
        }
        if (parked == s->ncpus) break;
        usleep(10000);
    }
    usleep(20000);
    uint64_t before[NW];
    for (int i = 0; i < NW; i++) before[i] = io_stat(s, watched[i]);
    double c0 = cpu_s(), t0 = test_now();
    sleep(1);
    double c1 = cpu_s(), t1 = test_now();
    printf("%ld idle connections: %.3f ms of CPU in %.2f s\n", n, (c1 - c0) * 1e3, t1 - t0);
    for (int i = 0; i < NW; i++) {
        uint64_t d = io_stat(s, watched[i]) - before[i];
        printf("  %s +%llu\n", watched[i], (unsigned long long)d);
        ASSERT_EQ_U(d, 0);
    }
    for (long i = 0; i < n; i++) ASSERT_EQ(usched_write(fds[2 * i + 1], "x", 1, USCHED_FOREVER), 1);
    ASSERT_OK(usched_wait(s));
    ASSERT_EQ(atomic_load(&done), n);
    for (long i = 0; i < 2 * n; i++) ASSERT_OK(usched_close(fds[i]));
    free(fds);
    ASSERT_OK(usched_destroy(s));
    printf("ok\n");
    return 0;
}
