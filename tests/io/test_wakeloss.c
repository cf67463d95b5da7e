/*
 * Wake-up loss through the poller: pairs of fibers on different CPUs
 * ping-pong one byte over socketpairs (and TCP pairs), so that every CPU
 * runs dry and parks between messages - one of them in epoll_wait (the
 * poller role), the others on their futex - and every message needs a
 * readiness event, a placement and often a break of the blocked poller
 * (P1'-P4', W3' in src/io/poller.c). Runs with spin_us=0 (park at once:
 * the tightest race) and with a short spin. A watchdog fails the test if no
 * message moves for 10 s.
 *
 * Usage: io_wakeloss [topology]
 */
#include <stdbool.h>
#include <sys/socket.h>

#include "io_test.h"

static usched_t *s;
static _Atomic long progress;
static long rounds;

struct pair {
    int fd[2];
};

static void pinger(void *arg)
{
    struct pair *p = arg;
    char b = 0;
    for (long i = 0; i < rounds; i++) {
        b = (char)i;
        ASSERT_EQ(usched_write(p->fd[0], &b, 1, USCHED_FOREVER), 1);
        char r;
        ASSERT_EQ(usched_read(p->fd[0], &r, 1, USCHED_FOREVER), 1);
        ASSERT_EQ(r, (char)(i + 1));
        atomic_fetch_add(&progress, 1);
    }
}

static void ponger(void *arg)
{
    struct pair *p = arg;
    for (long i = 0; i < rounds; i++) {
        char r;
        ASSERT_EQ(usched_read(p->fd[1], &r, 1, USCHED_FOREVER), 1);
        ASSERT_EQ(r, (char)i);
        r++;
        ASSERT_EQ(usched_write(p->fd[1], &r, 1, USCHED_FOREVER), 1);
    }
}

static void setup_tcp(void *arg)
{
    struct pair *p = arg;
    io_tcp_pair(&p->fd[0], &p->fd[1]);
}

static void run(const char *topo, const char *knobs, int npairs, bool tcp)
{
    ASSERT_OK(usched_create(&s));
    if (topo) ASSERT_OK(usched_set(s, "topology", topo));
    ASSERT_OK(usched_set(s, "knobs", knobs));
    ASSERT_OK(usched_start(s));
    int n = usched_ncpus(s);
    printf("%s, %s, %d %s pairs x %ld rounds\n", topo ? topo : "this machine", knobs, npairs,
           tcp ? "TCP" : "socketpair", rounds);
    struct io_watchdog wd;
    io_watchdog_start(&wd, &progress, 10, knobs, s);
    struct pair p[8];
    usched_task_t *t[16];
    for (int i = 0; i < npairs; i++) {
        if (tcp) {
            usched_task_t *st;
            ASSERT_OK(usched_spawn(s, &st, setup_tcp, &p[i]));
            ASSERT_OK(usched_join(st));
        } else {
            ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, p[i].fd));
        }
        /* Bound to two different CPUs: each message crosses CPUs. */
        ASSERT_OK(usched_spawn_on(s, &t[2 * i], (2 * i) % n, pinger, &p[i]));
        ASSERT_OK(usched_spawn_on(s, &t[2 * i + 1], (2 * i + 1) % n, ponger, &p[i]));
    }
    for (int i = 0; i < 2 * npairs; i++) ASSERT_OK(usched_join(t[i]));
    for (int i = 0; i < npairs; i++) {
        ASSERT_OK(usched_close(p[i].fd[0]));
        ASSERT_OK(usched_close(p[i].fd[1]));
    }
    io_watchdog_stop(&wd);
    printf("  io_poll_blocks %llu, io_breaks %llu, io_polls %llu, parks %llu\n",
           (unsigned long long)io_stat(s, "io_poll_blocks"), (unsigned long long)io_stat(s, "io_breaks"),
           (unsigned long long)io_stat(s, "io_polls"), (unsigned long long)io_stat(s, "parks"));
    ASSERT_OK(usched_destroy(s));
}

int main(int argc, char **argv)
{
    const char *topo = argc > 1 ? argv[1] : NULL;
    setvbuf(stdout, NULL, _IONBF, 0);
    rounds = test_scale(20000);
    run(topo, "spin_us=0", 1, false);
    run(topo, "spin_us=0", 4, false);
    run(topo, "spin_us=0", 2, true);
    run(topo, "spin_us=20", 4, false);
    printf("ok: %ld messages\n", atomic_load(&progress));
    return 0;
}
