/* Helpers shared by the I/O tests: loopback listeners on ephemeral ports,
 * connected pairs, a watchdog and the fd limit. */
#ifndef USCHED_TEST_IO_H
#define USCHED_TEST_IO_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test.h"
#include "usched.h"

/* A TCP listener on 127.0.0.1, port chosen by the kernel; *addr gets it. */
static inline int io_listener(struct sockaddr_in *addr, int backlog)
{
    int fd = usched_socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_OK(fd);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ASSERT_OK(bind(fd, (struct sockaddr *)&a, sizeof a));
    ASSERT_OK(listen(fd, backlog));
    socklen_t l = sizeof *addr;
    ASSERT_OK(getsockname(fd, (struct sockaddr *)addr, &l));
    return fd;
}

/* A connected TCP socket to addr (fiber or thread). */
static inline int io_dial(const struct sockaddr_in *addr)
{
    int fd = usched_socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_OK(fd);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ASSERT_EQ(usched_connect(fd, (const struct sockaddr *)addr, sizeof *addr, USCHED_FOREVER), 0);
    return fd;
}

/* A connected TCP pair over loopback: *a dialled, *b accepted. */
static inline void io_tcp_pair(int *a, int *b)
{
    struct sockaddr_in addr;
    int l = io_listener(&addr, 4);
    *a = io_dial(&addr);
    *b = usched_accept(l, NULL, NULL, USCHED_FOREVER);
    ASSERT_OK(*b);
    ASSERT_OK(usched_close(l));
}

/* Raises RLIMIT_NOFILE (soft and, when allowed, hard) to want; returns the
 * soft limit in force. */
static inline long io_raise_nofile(long want)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if ((long)rl.rlim_max < want) {
        struct rlimit r2 = {(rlim_t)want, (rlim_t)want};
        if (setrlimit(RLIMIT_NOFILE, &r2) == 0) return want;
    }
    if ((long)rl.rlim_cur < want) {
        rl.rlim_cur = (long)rl.rlim_max < want ? rl.rlim_max : (rlim_t)want;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    return (long)rl.rlim_cur;
}

/* Watchdog: fails the test if `progress` does not move for `secs`. */
struct io_watchdog {
    _Atomic long *progress;
    _Atomic int stop;
    int secs;
    const char *what;
    usched_t *s;
    pthread_t th;
};

static void *io_watchdog_main(void *arg)
{
    struct io_watchdog *w = arg;
    long last = -1;
    int still = 0;
    while (!atomic_load(&w->stop)) {
        usleep(100000);
        long p = atomic_load(w->progress);
        still = p == last ? still + 1 : 0;
        last = p;
        if (still >= w->secs * 10) {
            fprintf(stderr, "watchdog: no progress for %d s in '%s' at %ld: a wake-up was lost\n",
                    w->secs, w->what, p);
            if (w->s) usched_stats_print(w->s, stderr);
            abort();
        }
    }
    return NULL;
}

static inline void io_watchdog_start(struct io_watchdog *w, _Atomic long *progress, int secs,
                                     const char *what, usched_t *s)
{
    w->progress = progress;
    atomic_store(&w->stop, 0);
    w->secs = secs;
    w->what = what;
    w->s = s;
    pthread_create(&w->th, NULL, io_watchdog_main, w);
}

static inline void io_watchdog_stop(struct io_watchdog *w)
{
    atomic_store(&w->stop, 1);
    pthread_join(w->th, NULL);
}

/* io_poller=percpu (the default; the io_shared_ tests set shared with
 * USCHED_KNOBS in the environment): an epoll set per CPU. */
static inline bool io_percpu(usched_t *s)
{
    int64_t v = 0;
    ASSERT_OK(usched_knob_get(s, "io_poller", &v));
    return v == 1;
}

static inline uint64_t io_stat(usched_t *s, const char *name)
{
    uint64_t v = 0;
    ASSERT_OK(usched_stat(s, name, &v));
    return v;
}

#endif
