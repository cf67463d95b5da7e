/*
 * Echo over loopback: N concurrent connections (10,000 at full scale; fewer
 * with USCHED_STRESS_SCALE, under TSan's thread cap or a low fd limit), each
 * sending 100 messages of 1 B to 64 KiB that a server fiber echoes back.
 * Every connection is open at once; its writer fiber and its reader fiber
 * share the socket; the reader checks every byte against the generator and
 * reads in odd sizes, so partial reads and writes (and writev) are
 * exercised. The writer stays at most two messages ahead of the reader, so
 * that 10,000 connections stay within the kernel's TCP memory (tcp_mem) and
 * never hit its memory pressure. A watchdog fails the run if no byte moves
 * for 20 s.
 *
 * Usage: io_echo [topology]
 */
#include <stdlib.h>
#include <string.h>

#include "io_test.h"

#define MSGS 100
#define BIG 65536

static usched_t *s;
static struct sockaddr_in addr;
static int lfd;
static long nconn;
static _Atomic long progress, served;

static inline uint8_t gen(long conn, int m, size_t k)
{
    return (uint8_t)(conn * 131 + m * 31 + (long)k * 7 + (long)(k >> 8));
}

static size_t msg_size(long conn, int m)
{
    if (m == 0) return 1;
    if (m == 1) return BIG; /* every connection moves one 64 KiB message */
    uint32_t x = (uint32_t)(conn * 2654435761u) ^ (uint32_t)(m * 40503u);
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    int k = (int)(x % 15);                 /* log-uniform, 1 B .. 32 KiB */
    size_t base = (size_t)1 << k;
    return base + (x >> 8) % base;
}

static void server(void *arg)
{
    int fd = (int)(long)arg;
    char *buf = malloc(16384);
    ASSERT(buf);
    for (;;) {
        ssize_t n = usched_read(fd, buf, 16384, USCHED_FOREVER);
        ASSERT(n >= 0);
        if (n == 0) break;
        ASSERT_EQ(usched_write(fd, buf, (size_t)n, USCHED_FOREVER), n);
    }
    free(buf);
    ASSERT_OK(usched_close(fd));
    atomic_fetch_add(&served, 1);
}

static void acceptor(void *arg)
{
    (void)arg;
    for (long i = 0; i < nconn; i++) {
        int c = usched_accept(lfd, NULL, NULL, USCHED_FOREVER);
        ASSERT_OK(c);
        ASSERT_OK(usched_spawn(s, NULL, server, (void *)(long)c));
    }
}

struct conn {
    long id;
    int fd;
    usched_sem_t window; /* the reader's credit: at most 2 messages in flight */
};

static void writer(void *arg)
{
    struct conn *c = arg;
    uint8_t *buf = malloc(BIG);
    ASSERT(buf);
    for (int m = 0; m < MSGS; m++) {
        size_t n = msg_size(c->id, m);
        if (m >= 2) ASSERT_OK(usched_sem_wait(&c->window));
        for (size_t k = 0; k < n; k++) buf[k] = gen(c->id, m, k);
        if (m % 3 == 2 && n >= 3) { /* a vector of three pieces */
            struct iovec v[3] = {{buf, n / 3}, {buf + n / 3, n / 3}, {buf + 2 * (n / 3), n - 2 * (n / 3)}};
            ASSERT_EQ(usched_writev(c->fd, v, 3, USCHED_FOREVER), (long)n);
        } else {
            ASSERT_EQ(usched_write(c->fd, buf, n, USCHED_FOREVER), (long)n);
        }
    }
    free(buf);
    ASSERT_OK(shutdown(c->fd, SHUT_WR));
}

static void client(void *arg)
{
    struct conn c = {.id = (long)arg};
    ASSERT_OK(usched_sem_init(&c.window, 0));
    c.fd = io_dial(&addr);
    usched_task_t *w;
    ASSERT_OK(usched_spawn(s, &w, writer, &c));
    uint8_t *buf = malloc(32768);
    ASSERT(buf);
    uint32_t rnd = (uint32_t)c.id * 747796405u + 1;
    for (int m = 0; m < MSGS; m++) {
        size_t n = msg_size(c.id, m), k = 0;
        while (k < n) {
            rnd = rnd * 1103515245u + 12345u;
            size_t want = 1 + (rnd >> 8) % 32768;
            if (want > n - k) want = n - k;
            ssize_t got = usched_read(c.fd, buf, want, USCHED_FOREVER);
            ASSERT_GT(got, 0);
            for (ssize_t i = 0; i < got; i++)
                if (buf[i] != gen(c.id, m, k + (size_t)i))
                    TEST_FAIL_("conn %ld msg %d byte %zu: got %u, expected %u", c.id, m, k + (size_t)i,
                               buf[i], gen(c.id, m, k + (size_t)i));
            k += (size_t)got;
            atomic_fetch_add(&progress, got);
        }
        ASSERT_OK(usched_sem_post(&c.window));
    }
    ASSERT_EQ(usched_read(c.fd, buf, 1, USCHED_FOREVER), 0); /* the server closed after our EOF */
    free(buf);
    ASSERT_OK(usched_join(w));
    ASSERT_OK(usched_close(c.fd));
    ASSERT_OK(usched_sem_destroy(&c.window));
}

int main(int argc, char **argv)
{
    const char *topo = argc > 1 ? argv[1] : NULL;
    setvbuf(stdout, NULL, _IONBF, 0);
    nconn = test_scale(10000);
    nconn = test_cap_alive(nconn * 3) / 3; /* three fibers per connection */
    long lim = io_raise_nofile(2 * nconn + 256);
    if (2 * nconn + 256 > lim) nconn = (lim - 256) / 2;
    ASSERT_GT(nconn, 0);

    ASSERT_OK(usched_create(&s));
    if (topo) ASSERT_OK(usched_set(s, "topology", topo));
    ASSERT_OK(usched_start(s));
    printf("%s: %ld connections x %d messages (fd limit %ld)\n", topo ? topo : "this machine", nconn,
           MSGS, lim);
    lfd = io_listener(&addr, 4096);
    struct io_watchdog wd;
    io_watchdog_start(&wd, &progress, 20, "echo", s);
    double t0 = test_now();
    usched_task_t *acc;
    ASSERT_OK(usched_spawn(s, &acc, acceptor, NULL));
    usched_task_t **cl = calloc((size_t)nconn, sizeof *cl);
    ASSERT(cl);
    for (long i = 0; i < nconn; i++) ASSERT_OK(usched_spawn(s, &cl[i], client, (void *)i));
    for (long i = 0; i < nconn; i++) ASSERT_OK(usched_join(cl[i]));
    ASSERT_OK(usched_join(acc));
    ASSERT_OK(usched_wait(s));
    io_watchdog_stop(&wd);
    ASSERT_EQ(atomic_load(&served), nconn);
    double dt = test_now() - t0;
    printf("%ld bytes checked in %.2f s; io_events %llu, io_polls %llu, io_poll_blocks %llu\n",
           atomic_load(&progress), dt, (unsigned long long)io_stat(s, "io_events"),
           (unsigned long long)io_stat(s, "io_polls"), (unsigned long long)io_stat(s, "io_poll_blocks"));
    ASSERT_OK(usched_close(lfd));
    free(cl);
    ASSERT_OK(usched_destroy(s));
    printf("ok\n");
    return 0;
}
