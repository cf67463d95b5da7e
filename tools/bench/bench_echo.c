/*
 * usched bench: the echo workloads (bench/WORKLOADS.md): TCP echo over
 * loopback with usched's I/O calls. echo: one connection, round-trip
 * latency; echo100: 100 connections, messages per second. The server is an
 * acceptor fiber and a fiber per connection; the clients are fibers too.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../../bench/peers/common/peer_echo.h"
#include "bench_wl.h"

struct echo_run {
    const struct bench_params *p;
    int nconn;
    int lfd;
    struct sockaddr_in addr;
    usched_task_t **servers;
    atomic_int stop;
    atomic_long total; /* round trips done, all clients */
    atomic_int bad;
    usched_wg_t ready;  /* clients connected */
    double elapsed;
};

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void echo_server(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[PEER_ECHO_BUF];
    for (;;) {
        ssize_t n = usched_read(fd, buf, sizeof buf, USCHED_FOREVER);
        if (n == 0) break;
        if (n < 0) {
            bench_fail("echo server: read: %s", usched_strerror((int)n));
            break;
        }
        ssize_t w = usched_write(fd, buf, (size_t)n, USCHED_FOREVER);
        if (w != n) {
            bench_fail("echo server: write: %s", w < 0 ? usched_strerror((int)w) : "short");
            break;
        }
    }
    usched_close(fd);
}

static void echo_acceptor(void *arg)
{
    struct echo_run *r = arg;
    for (int i = 0; i < r->nconn; i++) {
        int c = usched_accept(r->lfd, NULL, NULL, USCHED_FOREVER);
        if (c < 0) {
            bench_fail("echo: accept: %s", usched_strerror(c));
            return;
        }
        nodelay(c);
        int e = usched_spawn(usched_self(), &r->servers[i], echo_server, (void *)(intptr_t)c);
        if (e < 0) {
            bench_fail("echo: spawn: %s", usched_strerror(e));
            usched_close(c);
            return;
        }
    }
}

/* One round trip on fd: write the message, read it back, check it. */
static int round_trip(int fd, long c, long i)
{
    uint8_t m[PEER_ECHO_MSG], back[PEER_ECHO_MSG];
    peer_echo_fill(m, c, i);
    ssize_t w = usched_write(fd, m, sizeof m, USCHED_FOREVER);
    if (w != (ssize_t)sizeof m) {
        bench_fail("echo client: write: %s", w < 0 ? usched_strerror((int)w) : "short");
        return -1;
    }
    size_t got = 0;
    while (got < sizeof back) {
        ssize_t n = usched_read(fd, back + got, sizeof back - got, USCHED_FOREVER);
        if (n <= 0) {
            bench_fail("echo client: read: %s", n < 0 ? usched_strerror((int)n) : "end of stream");
            return -1;
        }
        got += (size_t)n;
    }
    return peer_echo_check(back, c, i) ? 0 : -1;
}

struct echo_client {
    struct echo_run *r;
    long index;
};

static int dial(struct echo_run *r)
{
    int fd = usched_socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        bench_fail("echo: socket: %s", usched_strerror(fd));
        return -1;
    }
    nodelay(fd);
    int e = usched_connect(fd, (struct sockaddr *)&r->addr, sizeof r->addr, USCHED_FOREVER);
    if (e < 0) {
        bench_fail("echo: connect: %s", usched_strerror(e));
        usched_close(fd);
        return -1;
    }
    return fd;
}

/* echo100: round trips until stop. */
static void echo_client_loop(void *arg)
{
    struct echo_client *c = arg;
    struct echo_run *r = c->r;
    int fd = dial(r);
    usched_wg_done(&r->ready);
    if (fd < 0) return;
    long i = 0;
    while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
        if (round_trip(fd, c->index, i) < 0) {
            atomic_store(&r->bad, 1);
            break;
        }
        i++;
    }
    atomic_fetch_add(&r->total, i);
    usched_close(fd);
}

static int echo_listen(struct echo_run *r)
{
    r->lfd = usched_socket(AF_INET, SOCK_STREAM, 0);
    if (r->lfd < 0) return r->lfd;
    memset(&r->addr, 0, sizeof r->addr);
    r->addr.sin_family = AF_INET;
    r->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof r->addr;
    if (bind(r->lfd, (struct sockaddr *)&r->addr, sizeof r->addr) < 0 || listen(r->lfd, 1024) < 0 ||
        getsockname(r->lfd, (struct sockaddr *)&r->addr, &l) < 0) {
        int e = -errno;
        usched_close(r->lfd);
        return e;
    }
    return 0;
}

static void echo_main(void *arg)
{
    struct echo_run *r = arg;
    usched_t *s = usched_self();
    int e = echo_listen(r);
    if (e < 0) {
        bench_fail("echo: listen on 127.0.0.1: %s", usched_strerror(e));
        return;
    }
    usched_task_t *acc;
    if ((e = usched_spawn(s, &acc, echo_acceptor, r)) < 0) {
        bench_fail("echo: spawn: %s", usched_strerror(e));
        usched_close(r->lfd);
        return;
    }
    if (r->nconn == 1) {
        /* echo: this fiber is the client; --duration caps like pingpong. */
        int fd = dial(r);
        if (fd >= 0) {
            double t0 = bench_now();
            long i;
            for (i = 0; i < r->p->n; i++) {
                if (i && i % PEER_CHECK_EVERY == 0 && r->p->have_duration &&
                    bench_now() - t0 >= r->p->duration)
                    break;
                if (round_trip(fd, 0, i) < 0) {
                    atomic_store(&r->bad, 1);
                    break;
                }
            }
            r->elapsed = bench_now() - t0;
            atomic_store(&r->total, i);
            usched_close(fd);
        }
    } else {
        struct echo_client *cs = calloc((size_t)r->nconn, sizeof *cs);
        usched_task_t **ct = calloc((size_t)r->nconn, sizeof *ct);
        usched_wg_init(&r->ready);
        int started = 0;
        for (; cs && ct && started < r->nconn; started++) {
            cs[started] = (struct echo_client){r, started};
            usched_wg_add(&r->ready, 1);
            if ((e = usched_spawn(s, &ct[started], echo_client_loop, &cs[started])) < 0) {
                usched_wg_done(&r->ready);
                bench_fail("echo100: spawn: %s", usched_strerror(e));
                break;
            }
        }
        usched_wg_wait(&r->ready); /* every client connected: start the clock */
        double t0 = bench_now();
        usched_sleep_ns((uint64_t)(r->p->duration * 1e9));
        atomic_store(&r->stop, 1);
        for (int i = 0; i < started; i++) usched_join(ct[i]);
        r->elapsed = bench_now() - t0;
        usched_wg_destroy(&r->ready);
        free(cs);
        free(ct);
        if (started < r->nconn) r->nconn = started; /* the acceptor waits for no more */
    }
    usched_join(acc);
    for (int i = 0; i < r->nconn; i++)
        if (r->servers[i]) usched_join(r->servers[i]);
    usched_close(r->lfd);
}

static int echo_run(usched_t *s, const struct bench_params *p, struct bench_out *out, int nconn)
{
    struct echo_run r = {.p = p, .nconn = nconn};
    r.servers = calloc((size_t)nconn, sizeof *r.servers);
    if (!r.servers) {
        snprintf(out->err, sizeof out->err, "echo: out of memory");
        return -1;
    }
    bench_root(s, echo_main, &r);
    free(r.servers);
    if (!bench_failed(out) && atomic_load(&r.bad)) bench_fail("echo: a reply differed from its message");
    long total = atomic_load(&r.total);
    if (!bench_failed(out) && total == 0) bench_fail("echo: no round trip completed");
    if (bench_failed(out)) return -1;
    out->value = nconn == 1 ? r.elapsed * 1e9 / (double)total : (double)total / r.elapsed;
    return 0;
}

int bench_echo(usched_t *s, const struct bench_params *p, struct bench_out *out)
{
    return echo_run(s, p, out, 1);
}

int bench_echo100(usched_t *s, const struct bench_params *p, struct bench_out *out)
{
    return echo_run(s, p, out, PEER_ECHO_CONNS);
}
