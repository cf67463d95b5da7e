/*
 * Each server of servers/ on a running scheduler, driven by the real client
 * it was written for (dbench's tbench, pgbench and psql, redis-benchmark and
 * redis-cli, wrk) and by hand-made malformed input over real sockets.
 * Asserts correct replies and consistent state, never throughput. A client
 * that is not installed makes its part skip (scripts/deps.sh test installs
 * them all).
 *
 *   test_servers_clients tbench|pgbench|redis|http|echo|malformed|stop
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "run.h"
#include "servers.h"
#include "test.h"

#define SKIP 77

static usched_t *sched;
static struct srv *server;
static char port[16];

static void start(const char *proto, int portno, int scale)
{
    ASSERT_OK(usched_create(&sched));
    ASSERT_OK(usched_start(sched));
    struct srv_opts o = {.port = portno, .scale = scale};
    char err[256];
    int r = srv_start(sched, srv_proto_find(proto), &o, &server, err, sizeof err);
    if (r < 0) TEST_FAIL_("srv_start %s: %s", proto, err);
    snprintf(port, sizeof port, "%d", srv_port(server));
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

static void need(const char *prog, const char *pkg)
{
    if (access(prog, X_OK) == 0) return;
    printf("skipped: %s is not installed (Debian package %s; scripts/deps.sh test installs it)\n", prog, pkg);
    exit(SKIP);
}

/* Runs a client under a 120 s limit; its output is printed for the log. */
static struct test_run client(const char *const *argv)
{
    const char *full[40] = {"/usr/bin/timeout", "120"};
    int n = 2;
    for (int i = 0; argv[i]; i++) full[n++] = argv[i];
    full[n] = NULL;
    struct test_run r = test_run_host_argv(full, NULL); /* a host program, also in cross builds */
    printf("$");
    for (int i = 0; argv[i]; i++) printf(" %s", argv[i]);
    printf("\n%s%s", r.out, r.err);
    if (r.status == 124) TEST_FAIL_("%s ran past 120 s", argv[0]);
    return r;
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
    need("/usr/bin/tbench", "dbench");
    start("tbench", 7003, 0); /* the client's port is fixed; CTest serializes on it */
    struct test_run r = client((const char *[]){"/usr/bin/tbench", "-t", "2", "2", "127.0.0.1", NULL});
    ASSERT_EQ(r.status, 0);
    ASSERT_STR_CONTAINS(r.out, "Throughput");
    ASSERT(!strstr(r.out, "lost sync") && !strstr(r.err, "lost sync"));
    ASSERT(!strstr(r.out, "ERROR") && !strstr(r.err, "ERROR"));
    test_run_free(r);
    ASSERT_GT(stop(), 100);
}

/* ---- pgbench -------------------------------------------------------------------------------- */

static char *psql(const char *sql)
{
    struct test_run r = client((const char *[]){"/usr/bin/psql", "-X", "-h", "127.0.0.1", "-p", port, "-U",
                                                "tester", "-d", "bench", "-Atc", sql, NULL});
    ASSERT_EQ(r.status, 0);
    free(r.err);
    return first_line(r);
}

static void part_pgbench(void)
{
    need("/usr/bin/pgbench", "postgresql-client-15");
    need("/usr/bin/psql", "postgresql-client-15");
    start("pgbench", 0, 2);
    char *v = psql("select count(*) from pgbench_branches");
    ASSERT_STR_EQ(v, "2");
    free(v);
    /* select-only for a fixed count of transactions */
    char per[24];
    long t = scaled(200);
    snprintf(per, sizeof per, "%ld", t);
    struct test_run r = client((const char *[]){"/usr/bin/pgbench", "-n", "-S", "-c", "4", "-j", "2", "-t", per,
                                                "-h", "127.0.0.1", "-p", port, "-U", "tester", "bench", NULL});
    ASSERT_EQ(r.status, 0);
    char want[128];
    snprintf(want, sizeof want, "number of transactions actually processed: %ld/%ld", 4 * t, 4 * t);
    ASSERT_STR_CONTAINS(r.out, want);
    ASSERT_STR_CONTAINS(r.out, "number of failed transactions: 0");
    test_run_free(r);
    /* tpcb-like: the balances must agree with the history */
    r = client((const char *[]){"/usr/bin/pgbench", "-n", "-c", "4", "-j", "2", "-t", per, "-h", "127.0.0.1", "-p",
                                port, "-U", "tester", "bench", NULL});
    ASSERT_EQ(r.status, 0);
    ASSERT_STR_CONTAINS(r.out, want);
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
    r = client((const char *[]){"/usr/bin/psql", "-X", "-h", "127.0.0.1", "-p", port, "-U", "tester", "-d", "bench",
                                "-c", "DROP TABLE pgbench_accounts", NULL});
    ASSERT_NE(r.status, 0);
    ASSERT_STR_CONTAINS(r.err, "not supported");
    test_run_free(r);
    stop();
}

/* ---- redis ------------------------------------------------------------------------------------ */

static char *redis_cli(const char *a, const char *b, const char *c, const char *d)
{
    struct test_run r = client((const char *[]){"/usr/bin/redis-cli", "-p", port, a, b, c, d, NULL});
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
    need("/usr/bin/redis-benchmark", "redis-tools");
    need("/usr/bin/redis-cli", "redis-tools");
    start("redis", 0, 0);
    char n[24];
    /* a multiple of clients x pipeline: redis-benchmark sends whole pipelines */
    long count = scaled(5000) / 160 * 160;
    if (count < 160) count = 160;
    snprintf(n, sizeof n, "%ld", count);
    static const char *const pipelines[] = {"1", "16"};
    for (int p = 0; p < 2; p++) {
        expect_cli("OK\n", "flushall", NULL, NULL, NULL);
        struct test_run r = client((const char *[]){"/usr/bin/redis-benchmark", "-p", port, "-c", "10", "-n", n, "-P",
                                                    pipelines[p], "-t", "ping,set,get,incr,lpush,lpop,mset", "-q",
                                                    "--csv", NULL});
        ASSERT_EQ(r.status, 0);
        ASSERT(!strstr(r.out, "Error") && !strstr(r.err, "Error"));
        ASSERT(!strstr(r.err, "WARNING")); /* CONFIG GET was answered */
        static const char *const tests[] = {"PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "LPUSH", "LPOP", "MSET"};
        for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) ASSERT_STR_CONTAINS(r.out, tests[i]);
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
    need("/usr/bin/wrk", "wrk");
    start("http", 0, 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%s/", port);
    struct test_run r = client((const char *[]){"/usr/bin/wrk", "-t", "2", "-c", "8", "-d", "1s", url, NULL});
    ASSERT_EQ(r.status, 0);
    ASSERT_STR_CONTAINS(r.out, "requests in");
    ASSERT(!strstr(r.out, "Non-2xx"));
    ASSERT(!strstr(r.out, "Socket errors"));
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

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } parts[] = {
        {"tbench", part_tbench}, {"pgbench", part_pgbench},     {"redis", part_redis}, {"http", part_http},
        {"echo", part_echo},     {"malformed", part_malformed}, {"stop", part_stop},
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t i = 0; argc == 2 && i < sizeof parts / sizeof parts[0]; i++)
        if (!strcmp(argv[1], parts[i].name)) {
            parts[i].fn();
            printf("servers_clients %s: ok\n", argv[1]);
            return 0;
        }
    fprintf(stderr, "usage: test_servers_clients tbench|pgbench|redis|http|echo|malformed|stop\n");
    return 2;
}
