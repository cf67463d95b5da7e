/*
 * Each server of servers/ on a running scheduler, driven by the real client
 * it was written for (dbench's tbench, pgbench and psql, redis-benchmark and
 * redis-cli, wrk) and by hand-made malformed input over real sockets.
 * Asserts correct replies and consistent state, never throughput. A client
 * that is not installed makes its part skip (scripts/deps.sh test installs
 * them all).
 *
 *   test_servers_clients tbench|pgbench|redis|http|echo|malformed|stop|
 *                        output|idle|maxconns|nofile|fault
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#include "base/fault.h"
#include "clients.h"
#include "servers.h"


static usched_t *sched;
static struct srv *server;
static char port[16];

static void start_with(const char *proto, struct srv_opts o)
{
    ASSERT_OK(usched_create(&sched));
    ASSERT_OK(usched_start(sched));
    char err[256];
    int r = srv_start(sched, srv_proto_find(proto), &o, &server, err, sizeof err);
    if (r < 0) TEST_FAIL_("srv_start %s: %s", proto, err);
    snprintf(port, sizeof port, "%d", srv_port(server));
}

static void start(const char *proto, int portno, int scale)
{
    start_with(proto, (struct srv_opts){.port = portno, .scale = scale});
}

/* Stops the server; its state check must pass. Returns the requests it
 * served. */
static uint64_t stop(void)
{
    char msg[300];
    ASSERT_OK(srv_stop(server));
    uint64_t requests = srv_requests(server);
    if (srv_check(server, msg, sizeof msg) < 0) TEST_FAIL_("state check after stop: %s", msg);
    if (msg[0]) printf("%s\n", msg);
    srv_free(server);
    ASSERT_OK(usched_destroy(sched));
    return requests;
}

/* A one-line output of a client, trimmed. */
static char *first_line(struct test_run r)
{
    char *nl = strchr(r.out, '\n');
    if (nl) *nl = '\0';
    return r.out;
}

static long scaled(long n)
{
    return test_scale(n);
}

/* ---- tbench --------------------------------------------------------------------------------- */

static void part_tbench(void)
{
    clients_need("/usr/bin/tbench", "dbench");
    start("tbench", 7003, 0); /* the client's port is fixed; CTest serializes on it */
    struct test_run r = clients_run((const char *[]){"/usr/bin/tbench", "-t", "2", "2", "127.0.0.1", NULL});
    clients_check_tbench(r);
    test_run_free(r);
    ASSERT_GT(stop(), 100);
}

/* ---- pgbench -------------------------------------------------------------------------------- */

static char *psql(const char *sql)
{
    struct test_run r = clients_run((const char *[]){"/usr/bin/psql", "-X", "-h", "127.0.0.1", "-p", port, "-U",
                                                     "tester", "-d", "bench", "-Atc", sql, NULL});
    ASSERT_EQ(r.status, 0);
    free(r.err);
    return first_line(r);
}

static void part_pgbench(void)
{
    clients_need("/usr/bin/pgbench", "postgresql-client-15");
    clients_need("/usr/bin/psql", "postgresql-client-15");
    start("pgbench", 0, 2);
    char *v = psql("select count(*) from pgbench_branches");
    ASSERT_STR_EQ(v, "2");
    free(v);
    /* select-only for a fixed count of transactions */
    char per[24];
    long t = scaled(200);
    snprintf(per, sizeof per, "%ld", t);
    struct test_run r = clients_run((const char *[]){"/usr/bin/pgbench", "-n", "-S", "-c", "4", "-j", "2", "-t", per,
                                                     "-h", "127.0.0.1", "-p", port, "-U", "tester", "bench", NULL});
    clients_check_pgbench(r, 4, t);
    test_run_free(r);
    /* tpcb-like: the balances must agree with the history */
    r = clients_run((const char *[]){"/usr/bin/pgbench", "-n", "-c", "4", "-j", "2", "-t", per, "-h", "127.0.0.1", "-p",
                                     port, "-U", "tester", "bench", NULL});
    clients_check_pgbench(r, 4, t);
    test_run_free(r);
    char count[32];
    snprintf(count, sizeof count, "%ld", 4 * t);
    v = psql("select count(*) from pgbench_history");
    ASSERT_STR_EQ(v, count);
    free(v);
    char *a = psql("select sum(abalance) from pgbench_accounts");
    static const char *const others[] = {"select sum(tbalance) from pgbench_tellers",
                                         "select sum(bbalance) from pgbench_branches",
                                         "select sum(delta) from pgbench_history"};
    for (int i = 0; i < 3; i++) {
        v = psql(others[i]);
        ASSERT_STR_EQ(v, a);
        free(v);
    }
    free(a);
    /* a statement it does not know: an error, and the session goes on */
    r = clients_run((const char *[]){"/usr/bin/psql", "-X", "-h", "127.0.0.1", "-p", port, "-U", "tester", "-d",
                                     "bench", "-c", "DROP TABLE pgbench_accounts", NULL});
    ASSERT_NE(r.status, 0);
    ASSERT_STR_CONTAINS(r.err, "not supported");
    test_run_free(r);
    stop();
}

/* ---- redis ------------------------------------------------------------------------------------ */

static char *redis_cli(const char *a, const char *b, const char *c, const char *d)
{
    struct test_run r = clients_run((const char *[]){"/usr/bin/redis-cli", "-p", port, a, b, c, d, NULL});
    ASSERT_EQ(r.status, 0);
    free(r.err);
    return r.out;
}

static void expect_cli(const char *want, const char *a, const char *b, const char *c, const char *d)
{
    char *out = redis_cli(a, b, c, d);
    ASSERT_STR_EQ(out, want);
    free(out);
}

static void part_redis(void)
{
    clients_need("/usr/bin/redis-benchmark", "redis-tools");
    clients_need("/usr/bin/redis-cli", "redis-tools");
    start("redis", 0, 0);
    char n[24];
    /* a multiple of clients x pipeline: redis-benchmark sends whole pipelines */
    long count = scaled(5000) / 160 * 160;
    if (count < 160) count = 160;
    snprintf(n, sizeof n, "%ld", count);
    static const char *const pipelines[] = {"1", "16"};
    for (int p = 0; p < 2; p++) {
        expect_cli("OK\n", "flushall", NULL, NULL, NULL);
        struct test_run r = clients_run((const char *[]){"/usr/bin/redis-benchmark", "-p", port, "-c", "10", "-n", n,
                                                         "-P", pipelines[p], "-t",
                                                         "ping,set,get,incr,lpush,lpop,mset", "-q", "--csv", NULL});
        static const char *const tests[] = {"PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "LPUSH", "LPOP", "MSET"};
        clients_check_redis(r, tests, sizeof tests / sizeof tests[0]);
        ASSERT(!strstr(r.err, "WARNING")); /* CONFIG GET was answered */
        test_run_free(r);
        /* every INCR of the one key counted, every LPUSH popped */
        char want[32];
        snprintf(want, sizeof want, "%ld\n", count);
        expect_cli(want, "get", "counter:__rand_int__", NULL, NULL);
        expect_cli("0\n", "llen", "mylist", NULL, NULL);
        char *v = redis_cli("get", "key:__rand_int__", NULL, NULL); /* 3 random bytes */
        ASSERT_EQ(strlen(v), 4);
        free(v);
    }
    expect_cli("PONG\n", "ping", NULL, NULL, NULL);
    expect_cli("hello world\n", "echo", "hello world", NULL, NULL);
    char *err = redis_cli("mset", "a", "1", "b");
    ASSERT_STR_CONTAINS(err, "ERR wrong number of arguments for 'mset' command");
    free(err);
    expect_cli("OK\n", "set", "a", "41", NULL);
    expect_cli("42\n", "incr", "a", NULL, NULL);
    expect_cli("42\n\n", "mget", "a", "nosuch", NULL);
    expect_cli("2\n", "lpush", "l", "x", "y");
    expect_cli("y\n", "lpop", "l", NULL, NULL);
    expect_cli("1\n", "exists", "a", NULL, NULL);
    expect_cli("2\n", "del", "a", "l", NULL);
    expect_cli("0\n", "exists", "a", NULL, NULL);
    char *out = redis_cli("nosuchcommand", NULL, NULL, NULL);
    ASSERT_STR_CONTAINS(out, "unknown command");
    free(out);
    stop();
}

/* ---- http ------------------------------------------------------------------------------------- */

static void part_http(void)
{
    clients_need("/usr/bin/wrk", "wrk");
    start("http", 0, 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%s/", port);
    struct test_run r = clients_run((const char *[]){"/usr/bin/wrk", "-t", "2", "-c", "8", "-d", "1s", url, NULL});
    ASSERT_GT(clients_check_wrk(r), 0);
    test_run_free(r);
    ASSERT_GT(stop(), 10);
}

/* ---- raw sockets ------------------------------------------------------------------------------- */

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    struct timeval tv = {10, 0}; /* a reply that never comes fails the test, not hangs it */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_OK(connect(fd, (struct sockaddr *)&a, sizeof a) < 0 ? -errno : 0);
    return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
    ASSERT_EQ(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Reads until the server closes; returns what came (NUL-terminated). */
static char *read_to_close(int fd, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        ssize_t r = recv(fd, buf + n, cap - n, 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET)) break;
        if (r < 0) TEST_FAIL_("recv: %s (the server did not close the connection)", strerror(errno));
        n += (size_t)r;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
    }
    buf[n] = '\0';
    if (len) *len = n;
    close(fd);
    return buf;
}

static void part_echo(void)
{
    start("echo", 0, 0);
    size_t n = (size_t)scaled(1 << 20);
    unsigned char *msg = malloc(n), *back = malloc(n);
    for (size_t i = 0; i < n; i++) msg[i] = (unsigned char)(i * 2654435761u >> 13);
    int fds[4];
    for (int k = 0; k < 4; k++) fds[k] = dial();
    for (int k = 0; k < 4; k++) {
        /* send and receive in slices so neither side's buffers fill up */
        size_t got = 0;
        for (size_t sent = 0; sent < n || got < n;) {
            if (sent < n) {
                size_t part = n - sent < 65536 ? n - sent : 65536;
                send_all(fds[k], msg + sent, part);
                sent += part;
            }
            while (got < sent) {
                ssize_t r = recv(fds[k], back + got, n - got, 0);
                ASSERT_GT(r, 0);
                got += (size_t)r;
            }
        }
        ASSERT(!memcmp(msg, back, n));
    }
    for (int k = 0; k < 4; k++) close(fds[k]);
    free(msg);
    free(back);
    stop();
}

/* Garbage over real sockets: each server answers with its protocol's error
 * or closes, and keeps serving well-behaved clients. */
static void part_malformed(void)
{
    static const struct {
        const char *proto;
        const char *bad;
        size_t len;
        const char *reply; /* expected in what comes back before the close */
        const char *good;
        size_t good_len;
        const char *good_reply;
    } cases[] = {
        {"redis", "*x\r\n", 4, "-ERR Protocol error", "PING\r\n", 6, "+PONG"},
        {"redis", "*1\r\n$999999999\r\n", 17, "-ERR Protocol error", "PING\r\n", 6, "+PONG"},
        {"http", "GARBAGE\r\n\r\n", 11, "400 Bad Request", "GET / HTTP/1.0\r\n\r\n", 18, "Hello, World!"},
        {"http", "GET / HTTP/1.1\r\nX: \x01\r\n\r\n", 24, "400", "GET / HTTP/1.0\r\n\r\n", 18, "200 OK"},
        {"tbench", "\0\0\0\x02zz", 6, "", "\0\0\0\x04\0\0\0\x04", 8, ""},
        {"pgbench", "\0\0\0\x03", 4, "", "\0\0\0\x08\x04\xd2\x16\x2f", 8, "N"},
        {"pgbench", "\0\0\0\x08\0\x02\0\0", 8, "unsupported frontend protocol", "\0\0\0\x08\x04\xd2\x16\x2f", 8, "N"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool tb = !strcmp(cases[i].proto, "tbench");
        start(cases[i].proto, 0, 0);
        /* the bad client, and one that leaves in the middle of a request */
        int fd = dial();
        send_all(fd, cases[i].bad, cases[i].len);
        size_t len;
        char *got = read_to_close(fd, &len);
        if (!memmem(got, len, cases[i].reply, strlen(cases[i].reply)))
            TEST_FAIL_("%s: reply to garbage #%zu lacks \"%s\"", cases[i].proto, i, cases[i].reply);
        free(got);
        fd = dial();
        send_all(fd, cases[i].good, cases[i].good_len - 1);
        close(fd);
        /* a good client is still served */
        fd = dial();
        send_all(fd, cases[i].good, cases[i].good_len);
        char buf[512] = "";
        ssize_t r = recv(fd, buf, sizeof buf - 1, 0);
        ASSERT_GT(r, 0);
        buf[r] = '\0';
        if (tb) ASSERT_EQ(srv_be32(buf), 4);
        ASSERT(memmem(buf, (size_t)r, cases[i].good_reply, strlen(cases[i].good_reply)));
        close(fd);
        printf("malformed %s #%zu: refused, then served a good client\n", cases[i].proto, i);
        stop();
    }
    /* oversize requests: an HTTP head past 8 KiB, a redis command past 8 MiB */
    start("http", 0, 0);
    int fd = dial();
    char *big = malloc(1 << 24);
    memset(big, 'a', 1 << 24);
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    send(fd, big, 9000, MSG_NOSIGNAL);
    char *got = read_to_close(fd, NULL);
    ASSERT_STR_CONTAINS(got, "431");
    free(got);
    stop();
    start("redis", 0, 0);
    fd = dial();
    memcpy(big, "*2\r\n$3\r\nGET\r\n$1048576\r\n", 22);
    ASSERT_GT(send(fd, big, 1 << 21, MSG_NOSIGNAL), 0);
    got = read_to_close(fd, NULL);
    ASSERT_STR_CONTAINS(got, "Protocol error");
    free(got);
    stop();
    free(big);
}

/* Stopping with clients connected and idle, mid-request, and mid-transaction. */
static void part_stop(void)
{
    start("pgbench", 0, 1);
    int idle = dial();
    int half = dial();
    send_all(half, "\0\0\0", 3);
    int txn = dial();
    char startup[] = "LLLL\0\x03\0\0user\0t\0database\0d\0\0";
    srv_put_be32(startup, sizeof startup - 1);
    send_all(txn, startup, sizeof startup - 1);
    const char *q[] = {"BEGIN", "UPDATE pgbench_accounts SET abalance = abalance + 7 WHERE aid = 3"};
    char buf[4096];
    for (int i = 0; i < 2; i++) {
        char m[256];
        size_t l = strlen(q[i]) + 1;
        m[0] = 'Q';
        srv_put_be32(m + 1, (uint32_t)(l + 4));
        memcpy(m + 5, q[i], l);
        send_all(txn, m, l + 5);
    }
    /* wait for the UPDATE's reply, so the row is locked when the server stops */
    size_t have = 0;
    while (!memmem(buf, have, "UPDATE 1", 8)) {
        ssize_t r = recv(txn, buf + have, sizeof buf - have, 0);
        ASSERT_GT(r, 0);
        have += (size_t)r;
    }
    stop(); /* ends every connection; the open transaction rolls back; the check passes */
    close(idle);
    close(half);
    close(txn);
}


/* ---- resource limits ---------------------------------------------------------------------------- */

/* Reads exactly n bytes (the server must not close first). */
static void recv_exact(int fd, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
        if (r <= 0) TEST_FAIL_("recv after %zu of %zu bytes: %s", got, n, r ? strerror(errno) : "end of file");
        got += (size_t)r;
    }
}

/* Reads n bytes, which must all be c. */
static void recv_filled(int fd, size_t n, char c)
{
    char buf[65536];
    while (n > 0) {
        size_t part = n < sizeof buf ? n : sizeof buf;
        recv_exact(fd, buf, part);
        for (size_t i = 0; i < part; i++)
            if (buf[i] != c) TEST_FAIL_("byte %zu of a reply is %d, not %d", i, buf[i], c);
        n -= part;
    }
}

static void recv_expect(int fd, const char *want)
{
    size_t n = strlen(want);
    char *buf = malloc(n + 1);
    recv_exact(fd, buf, n);
    buf[n] = '\0';
    ASSERT_STR_EQ(buf, want);
    free(buf);
}

/* Redis: SET k to n bytes of ch. */
static void redis_set_big(int fd, size_t n, char ch)
{
    char *val = malloc(n);
    memset(val, ch, n);
    char head[64];
    int hl = snprintf(head, sizeof head, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%zu\r\n", n);
    send_all(fd, head, (size_t)hl);
    send_all(fd, val, n);
    send_all(fd, "\r\n", 2);
    recv_expect(fd, "+OK\r\n");
    free(val);
}

/* Redis: a bulk reply of n bytes of ch. */
static void recv_bulk(int fd, size_t n, char ch)
{
    char head[32];
    snprintf(head, sizeof head, "$%zu\r\n", n);
    recv_expect(fd, head);
    recv_filled(fd, n, ch);
    recv_expect(fd, "\r\n");
}

static struct srv_stats stats(void)
{
    struct srv_stats st;
    srv_stats(server, &st);
    return st;
}

/* Stops the server and returns its statistics. */
static struct srv_stats stop_stats(void)
{
    ASSERT_OK(srv_stop(server));
    struct srv_stats st = stats();
    char msg[300];
    if (srv_check(server, msg, sizeof msg) < 0) TEST_FAIL_("state check after stop: %s", msg);
    srv_free(server);
    ASSERT_OK(usched_destroy(sched));
    printf("  %llu requests, most unsent output %zu bytes, most buffer memory %zu bytes\n",
           (unsigned long long)st.requests, st.out_hwm, st.buf_hwm);
    return st;
}

/* A PostgreSQL Query message. */
static void pg_query(int fd, const char *q)
{
    size_t l = strlen(q) + 1;
    char *m = malloc(l + 5);
    m[0] = 'Q';
    srv_put_be32(m + 1, (uint32_t)(l + 4));
    memcpy(m + 5, q, l);
    send_all(fd, m, l + 5);
    free(m);
}

/* Reads PostgreSQL messages until ReadyForQuery; returns them (NUL-terminated). */
static char *pg_until_ready(int fd, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        char hdr[5];
        recv_exact(fd, hdr, 5);
        size_t body = srv_be32(hdr + 1) - 4;
        if (n + 5 + body > cap) {
            cap = (n + 5 + body) * 2;
            buf = realloc(buf, cap + 1);
        }
        memcpy(buf + n, hdr, 5);
        recv_exact(fd, buf + n + 5, body);
        n += 5 + body;
        if (hdr[0] == 'Z') break;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

/* A PostgreSQL session as far as its first ReadyForQuery. */
static int pg_dial(void)
{
    int fd = dial();
    char startup[] = "LLLL\0\x03\0\0user\0t\0database\0d\0\0";
    srv_put_be32(startup, sizeof startup - 1);
    send_all(fd, startup, sizeof startup - 1);
    free(pg_until_ready(fd, NULL));
    return fd;
}

/* Sends n bytes from a thread of its own, for a client that must read
 * while it sends (the server stops reading once its output is held up). */
struct sender {
    int fd;
    const void *p;
    size_t n;
    pthread_t t;
};

static void *sender_main(void *arg)
{
    struct sender *x = arg;
    send_all(x->fd, x->p, x->n);
    return NULL;
}

static void sender_start(struct sender *x, int fd, const void *p, size_t n)
{
    *x = (struct sender){.fd = fd, .p = p, .n = n};
    ASSERT_OK(pthread_create(&x->t, NULL, sender_main, x));
}

static void sender_join(struct sender *x)
{
    ASSERT_OK(pthread_join(x->t, NULL));
}

#define TEST_MAX_OUTPUT (64 << 10)

/* A client that sends a long pipeline before it reads anything: the server
 * holds at most --max-output (plus one reply piece) of output for it, and
 * every reply still arrives, complete and in order. */
static void part_output(void)
{
    const struct srv_opts o = {.port = 0, .max_output = TEST_MAX_OUTPUT};
    /* tbench: 1,000 requests, each for a 65,536-byte reply (65 MB in all) */
    start_with("tbench", o);
    int fd = dial();
    enum { NREQ = 1000, BODY = 65536 };
    char *reqs = malloc(NREQ * 8);
    for (int i = 0; i < NREQ; i++) {
        srv_put_be32(reqs + 8 * i, 4);
        srv_put_be32(reqs + 8 * i + 4, BODY);
    }
    send_all(fd, reqs, NREQ * 8);
    free(reqs);
    for (int i = 0; i < NREQ; i++) {
        char hdr[4];
        recv_exact(fd, hdr, 4);
        ASSERT_EQ(srv_be32(hdr), BODY);
        recv_filled(fd, BODY, 0);
    }
    close(fd);
    struct srv_stats st = stop_stats();
    ASSERT_EQ_U(st.requests, NREQ);
    ASSERT_LE(st.out_hwm, TEST_MAX_OUTPUT + 4 + BODY);

    /* redis: GETs of a 1 MiB value, pipelined, then one MGET of 64 copies */
    start_with("redis", o);
    fd = dial();
    enum { VAL = 1 << 20, NGET = 64 };
    redis_set_big(fd, VAL, 'v');
    for (int i = 0; i < NGET; i++) send_all(fd, "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", 20);
    for (int i = 0; i < NGET; i++) recv_bulk(fd, VAL, 'v');
    send_all(fd, "*65\r\n$4\r\nMGET\r\n", 15);
    for (int i = 0; i < NGET; i++) send_all(fd, "$1\r\nk\r\n", 7);
    recv_expect(fd, "*64\r\n");
    for (int i = 0; i < NGET; i++) recv_bulk(fd, VAL, 'v');
    close(fd);
    st = stop_stats();
    ASSERT_EQ_U(st.requests, 2 + NGET);
    ASSERT_LE(st.out_hwm, TEST_MAX_OUTPUT + VAL + 64);

    /* pgbench: one query string of 20,000 statements */
    size_t rows;
    start_with("pgbench", o);
    fd = pg_dial();
    enum { NSTMT = 20000 };
    static const char stmt[] = "select count(*) from pgbench_branches;";
    char *q = malloc(NSTMT * (sizeof stmt - 1) + 1);
    for (int i = 0; i < NSTMT; i++) memcpy(q + i * (sizeof stmt - 1), stmt, sizeof stmt - 1);
    q[NSTMT * (sizeof stmt - 1)] = '\0';
    pg_query(fd, q);
    free(q);
    size_t len;
    char *got = pg_until_ready(fd, &len);
    rows = 0;
    for (char *p = got; (p = memmem(p, len - (size_t)(p - got), "SELECT 1", 8)); p += 8) rows++;
    ASSERT_EQ(rows, NSTMT);
    free(got);
    close(fd);
    st = stop_stats();
    ASSERT_LE(st.out_hwm, TEST_MAX_OUTPUT + 256);

    /* http: 20,000 pipelined requests */
    start_with("http", o);
    fd = dial();
    enum { NHTTP = 20000 };
    static const char get[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    char *reqs_http = malloc(NHTTP * (sizeof get - 1));
    for (int k = 0; k < NHTTP; k++) memcpy(reqs_http + k * (sizeof get - 1), get, sizeof get - 1);
    struct sender snd;
    sender_start(&snd, fd, reqs_http, NHTTP * (sizeof get - 1));
    /* the replies, up to the last (which ends "Hello, World!\n") */
    size_t cap = 4 << 20;
    len = 0;
    got = malloc(cap + 1);
    rows = 0;
    while (rows < NHTTP) {
        ssize_t r = recv(fd, got + len, cap - len, 0);
        if (r <= 0) TEST_FAIL_("recv: %s after %zu replies", r ? strerror(errno) : "end of file", rows);
        size_t from = len >= 13 ? len - 13 : 0;
        len += (size_t)r;
        for (char *p = got + from; (p = memmem(p, len - (size_t)(p - got), "Hello, World!\n", 14)); p += 14) rows++;
        ASSERT(len < cap);
    }
    sender_join(&snd);
    free(reqs_http);
    free(got);
    close(fd);
    st = stop_stats();
    ASSERT_EQ_U(st.requests, NHTTP);
    ASSERT_LE(st.out_hwm, TEST_MAX_OUTPUT + 256);

    /* echo: 4 MiB sent before reading */
    start_with("echo", o);
    fd = dial();
    char *blob = malloc(4 << 20);
    memset(blob, 'e', 4 << 20);
    struct sender es;
    sender_start(&es, fd, blob, 4 << 20);
    recv_filled(fd, 4 << 20, 'e');
    sender_join(&es);
    free(blob);
    close(fd);
    st = stop_stats();
    ASSERT_LE(st.out_hwm, TEST_MAX_OUTPUT + 65536);
}

/* Whether the server has closed fd: reads until end of file (or a reset),
 * failing on a reply or on SO_RCVTIMEO. */
static void expect_closed(int fd, const char *who)
{
    char buf[256];
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r > 0) TEST_FAIL_("%s: %zd bytes came where the server should have closed", who, r);
    if (r < 0 && errno != ECONNRESET) TEST_FAIL_("%s: not closed by the server: %s", who, strerror(errno));
    close(fd);
}

/* The idle timeout: an idle connection, a slowloris one (a byte at a time,
 * never a whole request) and one idle inside a pgbench transaction are
 * closed; the transaction rolls back, so its row is free again and its
 * update is gone; buffers grown for a large request shrink back. */
static void part_idle(void)
{
    start_with("pgbench", (struct srv_opts){.port = 0, .scale = 1, .idle_timeout_ms = 300});
    int idle = dial();
    int slow = dial();
    int txn = pg_dial();
    pg_query(txn, "BEGIN; UPDATE pgbench_accounts SET abalance = abalance + 7 WHERE aid = 3");
    free(pg_until_ready(txn, NULL));
    static const char startup[] = "\0\0\0\x08\x04\xd2\x16\x2f"; /* an SSL request, slowly */
    for (size_t i = 0; i < sizeof startup - 1; i++) {
        if (send(slow, startup + i, 1, MSG_NOSIGNAL) != 1) break; /* closed already: fine */
        usleep(100 * 1000);
    }
    expect_closed(idle, "idle connection");
    expect_closed(slow, "slowloris connection");
    expect_closed(txn, "connection idle in a transaction");
    /* the row is free: an update from another session goes through at once */
    int other = pg_dial();
    pg_query(other, "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 3");
    char *got = pg_until_ready(other, NULL);
    ASSERT(strstr(got + 5, "UPDATE 1"));
    free(got);
    pg_query(other, "SELECT abalance FROM pgbench_accounts WHERE aid = 3");
    size_t len;
    got = pg_until_ready(other, &len);
    ASSERT(memmem(got, len, "\0\0\0\x01" "1", 5)); /* 1, not 8: the +7 rolled back */
    free(got);
    pg_query(other, "UPDATE pgbench_accounts SET abalance = abalance + -1 WHERE aid = 3"); /* the sums agree again */
    free(pg_until_ready(other, NULL));
    close(other);
    struct srv_stats st = stop_stats();
    ASSERT_EQ_U(st.timed_out, 3);

    /* redis: a 1 MiB value grows the buffers; after it they shrink back */
    start_with("redis", (struct srv_opts){.port = 0});
    int fd = dial();
    enum { VAL = 1 << 20 };
    redis_set_big(fd, VAL, 'x');
    send_all(fd, "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", 20);
    recv_bulk(fd, VAL, 'x');
    /* PING's reply comes after the buffers of the GET were given back */
    send_all(fd, "PING\r\n", 6);
    recv_expect(fd, "+PONG\r\n");
    st = stats();
    printf("  buffer memory after a 1 MiB SET and GET: %zu bytes\n", st.buffers);
    ASSERT_LE(st.buffers, 64 << 10);
    close(fd);
    st = stop_stats();
    ASSERT_GE(st.buf_hwm, VAL);
}

/* Waits (on the server's own count, not a clock) until n connections are open. */
static void wait_open(uint64_t n)
{
    for (int i = 0; stats().open != n; i++) {
        if (i == 10000) TEST_FAIL_("%llu connections open, waiting for %llu", (unsigned long long)stats().open,
                                   (unsigned long long)n);
        usleep(1000);
    }
}

/* --max-conns: at the cap a connection is refused with the protocol's own
 * error (checked with the real clients where installed), the others keep
 * being served, and a freed place is taken by the next. */
static void part_maxconns(void)
{
    /* redis */
    start_with("redis", (struct srv_opts){.port = 0, .max_conns = 2});
    int a = dial(), b = dial();
    send_all(a, "PING\r\n", 6);
    recv_expect(a, "+PONG\r\n");
    send_all(b, "PING\r\n", 6);
    recv_expect(b, "+PONG\r\n");
    int c = dial();
    send_all(c, "PING\r\n", 6);
    char *got = read_to_close(c, NULL);
    ASSERT_STR_EQ(got, "-ERR max number of clients reached\r\n");
    free(got);
    if (access("/usr/bin/redis-cli", X_OK) == 0) {
        char *out = redis_cli("PING", NULL, NULL, NULL);
        ASSERT_STR_CONTAINS(out, "max number of clients reached");
        free(out);
    }
    send_all(a, "PING\r\n", 6);
    recv_expect(a, "+PONG\r\n");
    close(b);
    wait_open(1);
    c = dial();
    send_all(c, "PING\r\n", 6);
    recv_expect(c, "+PONG\r\n");
    close(a);
    close(c);
    struct srv_stats st = stop_stats();
    ASSERT_GE(st.refused, 1);

    /* PostgreSQL: 53300 after the SSL request and the startup packet */
    start_with("pgbench", (struct srv_opts){.port = 0, .max_conns = 1});
    a = pg_dial();
    c = dial();
    send_all(c, "\0\0\0\x08\x04\xd2\x16\x2f", 8);
    recv_expect(c, "N");
    char startup[] = "LLLL\0\x03\0\0user\0t\0database\0d\0\0";
    srv_put_be32(startup, sizeof startup - 1);
    send_all(c, startup, sizeof startup - 1);
    size_t len;
    got = read_to_close(c, &len);
    ASSERT_EQ(got[0], 'E');
    ASSERT(memmem(got, len, "C53300", 7));
    ASSERT(memmem(got, len, "too many clients", 16));
    free(got);
    if (access("/usr/bin/psql", X_OK) == 0) {
        struct test_run r = clients_run((const char *[]){"/usr/bin/psql", "-X", "-h", "127.0.0.1", "-p", port, "-U",
                                                         "tester", "-d", "bench", "-Atc", "select 1", NULL});
        ASSERT_NE(r.status, 0);
        ASSERT_STR_CONTAINS(r.err, "too many clients");
        test_run_free(r);
    }
    pg_query(a, "select count(*) from pgbench_branches");
    got = pg_until_ready(a, &len);
    ASSERT(memmem(got, len, "SELECT 1", 8));
    free(got);
    close(a);
    stop_stats();

    /* HTTP: 503 */
    start_with("http", (struct srv_opts){.port = 0, .max_conns = 1});
    a = dial();
    send_all(a, "GET / HTTP/1.1\r\n\r\n", 18);
    char buf[512];
    ASSERT_GT(recv(a, buf, sizeof buf, 0), 0);
    c = dial();
    send_all(c, "GET / HTTP/1.1\r\n\r\n", 18);
    got = read_to_close(c, NULL);
    ASSERT_STR_CONTAINS(got, "HTTP/1.1 503 Service Unavailable");
    free(got);
    close(a);
    stop_stats();

    /* tbench has no error message: the extra connection is closed */
    start_with("tbench", (struct srv_opts){.port = 0, .max_conns = 1});
    a = dial();
    send_all(a, "\0\0\0\x04\0\0\0\x04", 8);
    recv_exact(a, buf, 8);
    c = dial();
    expect_closed(c, "tbench connection over the cap");
    close(a);
    stop_stats();
}

/* Redis PING on fd: true when PONG came, false when the server closed it. */
static bool ping(int fd)
{
    char buf[16];
    if (send(fd, "PING\r\n", 6, MSG_NOSIGNAL) != 6) return false;
    size_t got = 0;
    while (got < 7) {
        ssize_t r = recv(fd, buf + got, 7 - got, 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET)) return false;
        if (r < 0) TEST_FAIL_("PING: %s (neither answered nor closed)", strerror(errno));
        got += (size_t)r;
    }
    ASSERT(!memcmp(buf, "+PONG\r\n", 7));
    return true;
}

/* RLIMIT_NOFILE lowered under a running server (in a child process): the
 * connections past the limit are refused (closed at once, not left in the
 * backlog), the ones it has keep being served, and one closed makes room. */
static void part_nofile(void)
{
    int up[2], down[2];
    ASSERT_OK(pipe(up));
    ASSERT_OK(pipe(down));
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) { /* the server */
        close(up[0]);
        close(down[1]);
        start_with("redis", (struct srv_opts){.port = 0});
        int p = srv_port(server);
        ASSERT_EQ(write(up[1], &p, sizeof p), (ssize_t)sizeof p);
        char cmd;
        ASSERT_EQ(read(down[0], &cmd, 1), 1); /* 'L': lower the limit */
        int highest = 0;
        for (int fd = 0; fd < 65536; fd++)
            if (fcntl(fd, F_GETFD) >= 0) highest = fd;
        int fill; /* every free number below the highest taken, so the limit is all that is left */
        while ((fill = open("/dev/null", O_RDONLY)) >= 0 && fill < highest) {
        }
        ASSERT(fill > highest);
        close(fill);
        struct rlimit rl;
        ASSERT_OK(getrlimit(RLIMIT_NOFILE, &rl));
        rl.rlim_cur = (rlim_t)highest + 3; /* room for two more connections */
        ASSERT_OK(setrlimit(RLIMIT_NOFILE, &rl) < 0 ? -errno : 0);
        printf("  server: descriptors 0-%d taken, limit lowered to %d\n", highest, highest + 3);
        ASSERT_EQ(write(up[1], &cmd, 1), 1);
        ASSERT_EQ(read(down[0], &cmd, 1), 1); /* 'S': stop */
        struct srv_stats st = stop_stats();
        printf("  server: %llu connections, %llu refused\n", (unsigned long long)st.connections,
               (unsigned long long)st.refused);
        ASSERT_GE(st.refused, 2);
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    int p;
    ASSERT_EQ(read(up[0], &p, sizeof p), (ssize_t)sizeof p);
    snprintf(port, sizeof port, "%d", p);
    int a = dial();
    ASSERT(ping(a)); /* the server's fibers have all waited once: no descriptor left to create */
    char cmd = 'L';
    ASSERT_EQ(write(down[1], &cmd, 1), 1);
    ASSERT_EQ(read(up[0], &cmd, 1), 1);
    int b = dial(), c = dial();
    ASSERT(ping(b));
    ASSERT(ping(c));
    for (int i = 0; i < 2; i++) {
        int x = dial();
        ASSERT(!ping(x)); /* refused: closed, not left waiting */
        close(x);
    }
    ASSERT(ping(a) && ping(b) && ping(c));
    close(b);
    bool served = false;
    for (int i = 0; i < 1000 && !served; i++) { /* until the server has closed b's end */
        int x = dial();
        served = ping(x);
        if (served) ASSERT(ping(x));
        close(x);
        if (!served) usleep(10000);
    }
    ASSERT(served);
    ASSERT(ping(a) && ping(c));
    close(a);
    close(c);
    cmd = 'S';
    ASSERT_EQ(write(down[1], &cmd, 1), 1);
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status)) TEST_FAIL_("the server process ended with status %#x", status);
}

/* ---- allocation failure ------------------------------------------------------------------------ */

/* One exchange of a session: a request, and the reply it must get. */
struct exchange {
    const char *req;
    size_t req_len;
    const char *reply;
    size_t reply_len;
};
#define EX(req, reply) {req, sizeof req - 1, reply, sizeof reply - 1}

/* Runs a session on a new connection. Every reply must be the expected
 * one, until the first that is the protocol's out-of-memory error (oom) or
 * the connection's end; the session stops there. Returns whether it ran
 * to its end. */
static bool exchanges(int fd, const struct exchange *ex, int n, const char *oom)
{
    bool whole = true;
    for (int i = 0; i < n && whole; i++) {
        if (send(fd, ex[i].req, ex[i].req_len, MSG_NOSIGNAL) != (ssize_t)ex[i].req_len) {
            whole = false;
            break;
        }
        char buf[4096];
        size_t got = 0;
        while (got < ex[i].reply_len) {
            ssize_t r = recv(fd, buf + got, ex[i].reply_len - got, 0);
            if (r == 0 || (r < 0 && errno == ECONNRESET)) break;
            if (r < 0) TEST_FAIL_("exchange %d: %s (neither answered nor closed)", i, strerror(errno));
            got += (size_t)r;
            if (oom && got >= strlen(oom) && !memcmp(buf, oom, strlen(oom))) break;
        }
        if (got == ex[i].reply_len && !memcmp(buf, ex[i].reply, got)) continue;
        whole = false;
        bool closed = got == 0 || (oom && got >= strlen(oom) && !memcmp(buf, oom, strlen(oom)));
        /* a reply cut short by the end of the connection is fine, a wrong one is not */
        if (!closed && memcmp(buf, ex[i].reply, got))
            TEST_FAIL_("exchange %d: a wrong reply (%zu bytes) under allocation failure", i, got);
    }
    return whole;
}

static bool session(const struct exchange *ex, int n, const char *oom)
{
    int fd = dial();
    bool whole = exchanges(fd, ex, n, oom);
    close(fd);
    return whole;
}

/* For every n, the n-th allocation after a session starts fails (in the
 * server or in the scheduler under it): that session gets its protocol's
 * error or its connection ends, while two connections opened before keep
 * being served; until a session makes fewer than n allocations. */
static void fault_protocol(const char *proto, const struct exchange *ex, int n, const char *oom,
                           const struct exchange *keep, const char *reset)
{
    /* no idle timeout: a timed wait may allocate (its timer), and the wait
     * of a kept connection after its reply would then race the session
     * for the failure */
    start_with(proto, (struct srv_opts){.port = 0, .scale = 1, .idle_timeout_ms = -1});
    int keepers[2];
    for (int k = 0; k < 2; k++) {
        keepers[k] = dial();
        send_all(keepers[k], keep[0].req, keep[0].req_len);
        recv_expect(keepers[k], keep[0].reply);
    }
    long injected = 0, rounds = 0;
    for (long nth = 1;; nth++) {
        long before = usched__fault_injected();
        usched__fault_arm(nth);
        bool whole = session(ex, n, oom);
        usched__fault_arm(0);
        bool hit = usched__fault_injected() != before;
        injected += hit;
        if (getenv("SERVERS_FAULT_VERBOSE")) printf("  %s: n = %ld: %s, %s\n", proto, nth, hit ? "failed" : "none", whole ? "whole" : "cut");
        rounds++;
        if (!hit && !whole) TEST_FAIL_("%s: a session failed with no allocation failing (n = %ld)", proto, nth);
        /* the others are still served; but a kept connection whose fiber
         * waited for the first time just then (its wait may allocate) can
         * be the one the failure hit: then the session was whole, and that
         * one connection alone has ended */
        int lost = 0;
        for (int k = 0; k < 2; k++) {
            if (exchanges(keepers[k], &keep[1], 1, NULL)) continue;
            if (++lost > 1 || !hit || !whole)
                TEST_FAIL_("%s: a kept connection was lost to a failure that was not its own (n = %ld)", proto, nth);
            close(keepers[k]);
            keepers[k] = dial();
            ASSERT(exchanges(keepers[k], &keep[0], 1, NULL));
        }
        if (!hit) break;
        if (reset) { /* what a cut session left behind goes, so the next starts afresh */
            int fd = dial();
            send_all(fd, reset, strlen(reset));
            char buf[64];
            ASSERT_GT(recv(fd, buf, sizeof buf, 0), 0);
            close(fd);
        }
    }
    ASSERT(session(ex, n, oom)); /* and with nothing failing, everything works */
    for (int k = 0; k < 2; k++) close(keepers[k]);
    struct srv_stats st = stop_stats();
    printf("%s: %ld sessions with an allocation failing, %llu connections ended by it\n", proto, injected,
           (unsigned long long)st.failed);
    ASSERT_GT(injected, 0);
}

static void part_fault(void)
{
    static const struct exchange redis[] = {
        EX("SET k v\r\n", "+OK\r\n"),
        EX("GET k\r\n", "$1\r\nv\r\n"),
        EX("RPUSH l a b c\r\n", ":3\r\n"),
        EX("LPOP l 2\r\n", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
        EX("RPOP l\r\n", "$1\r\nc\r\n"),
        EX("MGET k k\r\n", "*2\r\n$1\r\nv\r\n$1\r\nv\r\n"),
        EX("DEL k\r\n", ":1\r\n"),
    };
    static const struct exchange redis_keep[] = {EX("SET keep 1\r\n", "+OK\r\n"), EX("GET keep\r\n", "$1\r\n1\r\n")};
    fault_protocol("redis", redis, 7, "-OOM", redis_keep, "DEL k l\r\n");
    static const struct exchange http[] = {
        EX("GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 200 OK\r\nServer: usched\r\nContent-Type: text/plain\r\n"
                                     "Content-Length: 14\r\n\r\nHello, World!\n"),
    };
    fault_protocol("http", http, 1, NULL, (const struct exchange[]){http[0], http[0]}, NULL);
    static const struct exchange tbench[] = {EX("\0\0\0\x04\0\0\0\x04", "\0\0\0\x04\0\0\0\0")};
    fault_protocol("tbench", tbench, 1, NULL, (const struct exchange[]){tbench[0], tbench[0]}, NULL);
    static const struct exchange echo[] = {EX("hello", "hello")};
    fault_protocol("echo", echo, 1, NULL, (const struct exchange[]){echo[0], echo[0]}, NULL);
    /* pgbench: an SSL request, then (below) a whole tpcb-like transaction */
    static const struct exchange pg[] = {EX("\0\0\0\x08\x04\xd2\x16\x2f", "N")};
    fault_protocol("pgbench", pg, 1, NULL, (const struct exchange[]){pg[0], pg[0]}, NULL);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } parts[] = {
        {"tbench", part_tbench}, {"pgbench", part_pgbench},     {"redis", part_redis}, {"http", part_http},
        {"echo", part_echo},     {"malformed", part_malformed}, {"stop", part_stop},
        {"output", part_output}, {"idle", part_idle}, {"maxconns", part_maxconns},
        {"nofile", part_nofile}, {"fault", part_fault},
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t i = 0; argc == 2 && i < sizeof parts / sizeof parts[0]; i++)
        if (!strcmp(argv[1], parts[i].name)) {
            parts[i].fn();
            printf("servers_clients %s: ok\n", argv[1]);
            return 0;
        }
    fprintf(stderr, "usage: test_servers_clients tbench|pgbench|redis|http|echo|malformed|stop|output|idle|maxconns|nofile|fault\n");
    return 2;
}
