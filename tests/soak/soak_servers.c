/*
 * The server soak (part of soak.c's run): each server of servers/ on the
 * scheduler under test, with well-behaved clients and hostile ones at once.
 *   well-behaved  request/response clients, every reply checked exactly;
 *                 pgbench runs tpcb-like transactions and adds up the deltas
 *                 it committed;
 *   pipeline      sends many requests for large replies, reads none, and
 *                 closes (the server's unsent output must stay bounded);
 *   garbage       random bytes, then end of input, then reads to the close;
 *   abrupt        half a request (pgbench: half a transaction), then close;
 *   slowloris     a byte at a time, never a whole request, until the idle
 *                 timeout closes it.
 * Checked: every well-behaved request answered correctly and counted; each
 * hostile connection ends (closed by the server, or by the client); the
 * most unsent output of any connection within --max-output plus one reply
 * piece; the protocol's state check (pgbench: the balances agree), and
 * pgbench's sum(delta) equal to the deltas the clients committed.
 * Clients are plain threads with blocking sockets (a 30 s receive timeout
 * turns a hang into a failure).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"
#include "soak.h"

#define GOOD_CLIENTS 4
#define HOSTILE_CLIENTS 4 /* one of each kind but slowloris, which has its own */
#define SLOWLORIS 4
#define MAX_OUTPUT (64 << 10)
#define IDLE_MS 3000
#define BIG_VALUE (1 << 20) /* redis: the value the pipelines GET */

struct soak_srv {
    const struct srv_proto *proto;
    int port;
    long per_client;               /* well-behaved requests per client */
    long hostile_rounds;           /* connections per hostile client */
    atomic_long answered;          /* well-behaved requests answered correctly */
    atomic_llong committed_delta;  /* pgbench */
    atomic_long hostile_done;
};

static _Noreturn void fail(const struct soak_srv *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static _Noreturn void fail(const struct soak_srv *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "soak: %s servers %s: ", soak_label, x->proto->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static int dial(const struct soak_srv *x)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) fail(x, "socket: %s", strerror(errno));
    struct timeval tv = {30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)x->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) fail(x, "connect: %s", strerror(errno));
    return fd;
}

static void put(const struct soak_srv *x, int fd, const void *p, size_t n)
{
    if (send(fd, p, n, MSG_NOSIGNAL) != (ssize_t)n) fail(x, "send: %s", strerror(errno));
}

static void get(const struct soak_srv *x, int fd, void *p, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = recv(fd, (char *)p + got, n - got, 0);
        if (r <= 0) fail(x, "recv after %zu of %zu bytes: %s", got, n, r ? strerror(errno) : "end of file");
        got += (size_t)r;
    }
}

static void expect(const struct soak_srv *x, int fd, const void *want, size_t n)
{
    char buf[8192];
    if (n > sizeof buf) fail(x, "reply too long to check");
    get(x, fd, buf, n);
    if (memcmp(buf, want, n)) fail(x, "wrong reply: got '%.*s', expected '%.*s'", (int)n, buf, (int)n, (const char *)want);
}

/* Reads until the server closes (end of file or reset). */
static void drain_to_close(const struct soak_srv *x, int fd)
{
    char buf[65536];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET)) break;
        if (r < 0) fail(x, "a hostile connection was not closed: %s", strerror(errno));
    }
    close(fd);
}

static uint32_t rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return (uint32_t)(*s >> 33);
}

/* ---- PostgreSQL messages ---------------------------------------------------------- */

static void pg_startup(const struct soak_srv *x, int fd)
{
    char m[] = "LLLL\0\x03\0\0user\0soak\0database\0soak\0\0";
    srv_put_be32(m, sizeof m - 1);
    put(x, fd, m, sizeof m - 1);
}

static void pg_send_query(const struct soak_srv *x, int fd, const char *q)
{
    size_t l = strlen(q) + 1;
    char *m = malloc(l + 5);
    m[0] = 'Q';
    srv_put_be32(m + 1, (uint32_t)(l + 4));
    memcpy(m + 5, q, l);
    put(x, fd, m, l + 5);
    free(m);
}

/* Reads to ReadyForQuery; fails on an ErrorResponse. Returns the last
 * CommandComplete tag in tag. */
static void pg_ready(const struct soak_srv *x, int fd, char *tag, size_t len)
{
    for (;;) {
        char h[5];
        get(x, fd, h, 5);
        uint32_t n = srv_be32(h + 1) - 4;
        char body[4096];
        if (n > sizeof body) fail(x, "a %u-byte message", n);
        get(x, fd, body, n);
        if (h[0] == 'E') fail(x, "ErrorResponse: %.*s", (int)n, body);
        if (h[0] == 'C' && tag) snprintf(tag, len, "%.*s", (int)(len - 1), body);
        if (h[0] == 'Z') return;
    }
}

/* ---- well-behaved clients ------------------------------------------------------- */

static void good_tbench(struct soak_srv *x, int fd, uint64_t *rng, int id, long i)
{
    (void)id;
    (void)i;
    uint32_t size = rnd(rng) % 65536;
    char req[12], hdr[4];
    srv_put_be32(req, 8);
    srv_put_be32(req + 4, size);
    srv_put_be32(req + 8, 0);
    put(x, fd, req, sizeof req);
    get(x, fd, hdr, 4);
    if (srv_be32(hdr) != size) fail(x, "reply of %u bytes to a request for %u", srv_be32(hdr), size);
    char *body = malloc(size + 1);
    get(x, fd, body, size);
    free(body);
}

static void good_redis(struct soak_srv *x, int fd, uint64_t *rng, int id, long i)
{
    (void)id;
    char cmd[256], want[128];
    unsigned v = rnd(rng);
    int n = snprintf(cmd, sizeof cmd, "SET soak:%d:%ld %u\r\nGET soak:%d:%ld\r\nINCR soak:%d:n\r\n", id, i % 64, v,
                     id, i % 64, id);
    put(x, fd, cmd, (size_t)n);
    char val[16];
    int vl = snprintf(val, sizeof val, "%u", v);
    int wl = snprintf(want, sizeof want, "+OK\r\n$%d\r\n%s\r\n:%ld\r\n", vl, val, i + 1);
    expect(x, fd, want, (size_t)wl);
}

static void good_pgbench(struct soak_srv *x, int fd, uint64_t *rng, int id, long i)
{
    (void)id;
    (void)i;
    int aid = 1 + (int)(rnd(rng) % 100000), tid = 1 + (int)(rnd(rng) % 10), delta = (int)(rnd(rng) % 10001) - 5000;
    char q[768], tag[64] = "";
    snprintf(q, sizeof q,
             "BEGIN; UPDATE pgbench_accounts SET abalance = abalance + %d WHERE aid = %d;"
             "SELECT abalance FROM pgbench_accounts WHERE aid = %d;"
             "UPDATE pgbench_tellers SET tbalance = tbalance + %d WHERE tid = %d;"
             "UPDATE pgbench_branches SET bbalance = bbalance + %d WHERE bid = 1;"
             "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (%d, 1, %d, %d, CURRENT_TIMESTAMP);"
             "END;",
             delta, aid, aid, delta, tid, delta, tid, aid, delta);
    pg_send_query(x, fd, q);
    pg_ready(x, fd, tag, sizeof tag);
    if (strcmp(tag, "COMMIT")) fail(x, "a transaction ended with '%s'", tag);
    atomic_fetch_add(&x->committed_delta, delta);
}

static const char http_reply[] = "HTTP/1.1 200 OK\r\nServer: usched\r\nContent-Type: text/plain\r\n"
                                 "Content-Length: 14\r\n\r\nHello, World!\n";

static void good_http(struct soak_srv *x, int fd, uint64_t *rng, int id, long i)
{
    (void)id;
    (void)rng, (void)i;
    static const char req[] = "GET / HTTP/1.1\r\nHost: soak\r\n\r\n";
    put(x, fd, req, sizeof req - 1);
    expect(x, fd, http_reply, sizeof http_reply - 1);
}

static void good_echo(struct soak_srv *x, int fd, uint64_t *rng, int id, long i)
{
    (void)id;
    (void)i;
    char buf[4096];
    size_t n = 1 + rnd(rng) % sizeof buf;
    for (size_t k = 0; k < n; k++) buf[k] = (char)rnd(rng);
    put(x, fd, buf, n);
    expect(x, fd, buf, n);
}

/* ---- per protocol ------------------------------------------------------------- */

struct soak_proto {
    const char *name;
    void (*good)(struct soak_srv *x, int fd, uint64_t *rng, int id, long i);
    bool pg;               /* a startup packet first */
    const char *pipe_req;  /* one request of a pipeline for large replies */
    size_t pipe_len;
    int pipe_count;        /* requests in one pipeline */
    size_t piece;          /* the largest reply piece */
    const char *partial;   /* half a request */
    size_t partial_len;
};

static const struct soak_proto protos[] = {
#define PARTIAL(s) s, sizeof s - 1
    {"tbench", good_tbench, false, "\0\0\0\x04\0\x01\x11\x6b", 8, 2000, 4 + 69995, PARTIAL("\0\0\0\x08\0\0")},
    {"redis", good_redis, false, "GET soak:big\r\n", 14, 64, BIG_VALUE + 16, PARTIAL("*3\r\n$3\r\nSET\r\n$1\r\nk")},
    {"pgbench", good_pgbench, true, NULL, 0, 0, 256,
     PARTIAL("BEGIN; UPDATE pgbench_accounts SET abalance = abalance + 5 WHERE aid = 1")},
    {"http", good_http, false, "GET / HTTP/1.1\r\n\r\n", 18, 20000, 256, PARTIAL("GET / HTTP/1.1\r\nHo")},
    {"echo", good_echo, false, NULL, 0, 0, 65536, PARTIAL("half")},
#undef PARTIAL
};

struct client {
    struct soak_srv *x;
    const struct soak_proto *p;
    int id;
    int kind; /* 0 well-behaved, 1 pipeline, 2 garbage, 3 abrupt, 4 slowloris */
    uint64_t rng;
    pthread_t t;
};

static void *good_main(void *arg)
{
    struct client *cl = arg;
    struct soak_srv *x = cl->x;
    int fd = dial(x);
    if (cl->p->pg) {
        pg_startup(x, fd);
        pg_ready(x, fd, NULL, 0);
    }
    for (long i = 0; i < x->per_client; i++) {
        cl->p->good(x, fd, &cl->rng, cl->id, i);
        atomic_fetch_add(&x->answered, 1);
    }
    close(fd);
    return NULL;
}

/* A pipeline for large replies, sent without reading, then a close. */
static void hostile_pipeline(struct client *cl)
{
    struct soak_srv *x = cl->x;
    const struct soak_proto *p = cl->p;
    int fd = dial(x);
    struct timeval tv = {1, 0}; /* the server stops reading: a send may then block; give up after 1 s */
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (p->pg) { /* one query string of many statements */
        pg_startup(x, fd);
        static const char stmt[] = "select count(*) from pgbench_branches;";
        enum { N = 20000 };
        char *q = malloc(N * (sizeof stmt - 1) + 1);
        for (int i = 0; i < N; i++) memcpy(q + i * (sizeof stmt - 1), stmt, sizeof stmt - 1);
        q[N * (sizeof stmt - 1)] = '\0';
        size_t l = strlen(q) + 1;
        char *m = malloc(l + 5);
        m[0] = 'Q';
        srv_put_be32(m + 1, (uint32_t)(l + 4));
        memcpy(m + 5, q, l);
        send(fd, m, l + 5, MSG_NOSIGNAL);
        free(m);
        free(q);
    } else if (!p->pipe_req) { /* echo: a stream not read */
        char buf[65536];
        memset(buf, 'p', sizeof buf);
        for (int i = 0; i < 64 && send(fd, buf, sizeof buf, MSG_NOSIGNAL) > 0; i++) {
        }
    } else {
        size_t n = p->pipe_len * (size_t)p->pipe_count;
        char *buf = malloc(n);
        for (int i = 0; i < p->pipe_count; i++) memcpy(buf + (size_t)i * p->pipe_len, p->pipe_req, p->pipe_len);
        send(fd, buf, n, MSG_NOSIGNAL);
        free(buf);
    }
    close(fd); /* unread replies: the kernel resets the connection */
}

static void hostile_garbage(struct client *cl)
{
    struct soak_srv *x = cl->x;
    int fd = dial(x);
    char buf[4096];
    size_t n = 1 + rnd(&cl->rng) % sizeof buf;
    for (size_t k = 0; k < n; k++) buf[k] = (char)rnd(&cl->rng);
    send(fd, buf, n, MSG_NOSIGNAL); /* the server may close at the first bad byte */
    shutdown(fd, SHUT_WR);
    drain_to_close(x, fd);
}

static void hostile_abrupt(struct client *cl)
{
    struct soak_srv *x = cl->x;
    int fd = dial(x);
    if (cl->p->pg) {
        pg_startup(x, fd);
        pg_send_query(x, fd, cl->p->partial); /* a transaction left open */
    } else {
        send(fd, cl->p->partial, cl->p->partial_len, MSG_NOSIGNAL);
    }
    close(fd);
}

static void hostile_slowloris(struct client *cl)
{
    struct soak_srv *x = cl->x;
    int fd = dial(x);
    const char *p = cl->p->pg ? "\0\0\0\x08\x04\xd2\x16" : cl->p->partial; /* pgbench: an SSL request */
    size_t n = cl->p->pg ? 7 : cl->p->partial_len;
    if (!strcmp(cl->p->name, "echo")) n = 0; /* every byte is a request: idle instead */
    for (size_t i = 0; i < n; i++) {
        if (send(fd, p + i, 1, MSG_NOSIGNAL) != 1) break;
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
        char c;
        ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno == ECONNRESET)) break;
        if (r > 0) fail(x, "a slowloris connection got a reply");
    }
    drain_to_close(x, fd);
}

static void *hostile_main(void *arg)
{
    struct client *cl = arg;
    for (long r = 0; r < cl->x->hostile_rounds; r++) {
        switch (cl->kind) {
        case 1: hostile_pipeline(cl); break;
        case 2: hostile_garbage(cl); break;
        case 3: hostile_abrupt(cl); break;
        }
        atomic_fetch_add(&cl->x->hostile_done, 1);
    }
    return NULL;
}

static void *slowloris_main(void *arg)
{
    hostile_slowloris(arg);
    return NULL;
}

static void soak_one(usched_t *s, const struct soak_proto *p, long requests, long hostile)
{
    struct soak_srv x = {.proto = srv_proto_find(p->name),
                         .per_client = requests / GOOD_CLIENTS,
                         .hostile_rounds = hostile};
    struct srv_opts o = {.port = 0, .scale = 1, .max_output = MAX_OUTPUT, .idle_timeout_ms = IDLE_MS};
    struct srv *v;
    char err[256];
    if (srv_start(s, x.proto, &o, &v, err, sizeof err) < 0) fail(&x, "start: %s", err);
    x.port = srv_port(v);
    if (!strcmp(p->name, "redis")) { /* the value the pipelines ask for */
        int fd = dial(&x);
        char head[64];
        int hl = snprintf(head, sizeof head, "*3\r\n$3\r\nSET\r\n$8\r\nsoak:big\r\n$%d\r\n", BIG_VALUE);
        put(&x, fd, head, (size_t)hl);
        char *val = malloc(BIG_VALUE);
        memset(val, 'b', BIG_VALUE);
        put(&x, fd, val, BIG_VALUE);
        free(val);
        put(&x, fd, "\r\n", 2);
        expect(&x, fd, "+OK\r\n", 5);
        close(fd);
    }
    uint64_t t0 = soak_now_ns();
    struct client cl[GOOD_CLIENTS + 3 + SLOWLORIS];
    int n = 0;
    for (int i = 0; i < GOOD_CLIENTS; i++, n++) {
        cl[n] = (struct client){.x = &x, .p = p, .id = n, .kind = 0, .rng = 0x9e3779b97f4a7c15u * (uint64_t)(n + 1)};
        if (pthread_create(&cl[n].t, NULL, good_main, &cl[n])) fail(&x, "pthread_create");
    }
    for (int k = 1; k <= 3; k++, n++) {
        cl[n] = (struct client){.x = &x, .p = p, .kind = k, .rng = 0x9e3779b97f4a7c15u * (uint64_t)(n + 1)};
        if (pthread_create(&cl[n].t, NULL, hostile_main, &cl[n])) fail(&x, "pthread_create");
    }
    for (int i = 0; i < SLOWLORIS; i++, n++) {
        cl[n] = (struct client){.x = &x, .p = p, .kind = 4};
        if (pthread_create(&cl[n].t, NULL, slowloris_main, &cl[n])) fail(&x, "pthread_create");
    }
    for (int i = 0; i < n; i++) pthread_join(cl[i].t, NULL);
    double secs = (double)(soak_now_ns() - t0) * 1e-9;
    long long sum_delta = 0;
    bool pg = p->pg;
    if (pg) { /* the history's sum is the clients' committed deltas, exactly */
        int fd = dial(&x);
        pg_startup(&x, fd);
        pg_ready(&x, fd, NULL, 0);
        pg_send_query(&x, fd, "select sum(delta) from pgbench_history");
        char h[5], body[256];
        for (;;) {
            get(&x, fd, h, 5);
            uint32_t len = srv_be32(h + 1) - 4;
            get(&x, fd, body, len);
            if (h[0] == 'D' && srv_be32(body + 2) < 32) {
                body[6 + srv_be32(body + 2)] = '\0';
                sum_delta = strtoll(body + 6, NULL, 10);
            }
            if (h[0] == 'Z') break;
        }
        close(fd);
    }
    if (srv_stop(v) < 0) fail(&x, "srv_stop failed");
    struct srv_stats st;
    srv_stats(v, &st);
    char msg[300];
    if (srv_check(v, msg, sizeof msg) < 0) fail(&x, "state check: %s", msg);
    srv_free(v);
    CHECK_EQ("well-behaved requests answered", atomic_load(&x.answered), x.per_client * GOOD_CLIENTS);
    CHECK_EQ("hostile connections ended", atomic_load(&x.hostile_done), 3 * hostile);
    if (pg) CHECK_EQ("sum(delta) against the committed deltas", (uint64_t)sum_delta,
                          (uint64_t)atomic_load(&x.committed_delta));
    if (st.out_hwm > MAX_OUTPUT + p->piece)
        fail(&x, "a connection held %zu bytes of unsent output (bound %d + %zu)", st.out_hwm, MAX_OUTPUT, p->piece);
    if (st.timed_out < SLOWLORIS)
        fail(&x, "%" PRIu64 " connections timed out, fewer than the %d slowloris", st.timed_out, SLOWLORIS);
    printf("  serve %-7s %8ld requests, %5ld hostile, %3" PRIu64 " timed out, output <= %7zu B  %7.2f s\n",
           p->name, x.per_client * GOOD_CLIENTS, 3 * hostile, st.timed_out, st.out_hwm, secs);
}

void soak_servers(usched_t *s, long requests, long hostile)
{
    for (size_t i = 0; i < sizeof protos / sizeof protos[0]; i++) soak_one(s, &protos[i], requests, hostile);
}
