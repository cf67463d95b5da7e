/*
 * `usched serve PROTOCOL` as a process, driven by the protocol's real
 * client (dbench's tbench, pgbench, redis-benchmark and redis-cli, wrk; for
 * echo, which has no packaged client, plain sockets), then stopped with
 * SIGINT: it must exit 0 and print its statistics, which must account for
 * what the client did (at least its requests, on at least its
 * connections; pgbench: the balances agree). argv[1] is the built CLI,
 * argv[2] the protocol. A missing client skips the test (scripts/deps.sh
 * test installs them all). Numbers are never asserted against timings.
 *
 *   test_serve_clients USCHED_CLI tbench|pgbench|redis|http|echo
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "clients.h"

static const char *cli;
static char port[16];

/* Starts `usched serve proto --port portno [extra]` and reads its first
 * line for the port it listens on. */
static struct test_proc serve(const char *proto, const char *portno, const char *extra, const char *value)
{
    const char *argv[] = {cli, "serve", proto, "--port", portno, extra, value, NULL};
    struct test_proc p = test_start_argv(argv);
    char line[256], want[64];
    if (!fgets(line, sizeof line, p.out)) TEST_FAIL_("usched serve %s: no line on stdout", proto);
    printf("%s", line);
    snprintf(want, sizeof want, "usched serve %s: listening on 127.0.0.1:", proto);
    ASSERT_STR_CONTAINS(line, want);
    int n = atoi(line + strlen(want));
    ASSERT_GT(n, 0);
    snprintf(port, sizeof port, "%d", n);
    return p;
}

struct served {
    uint64_t requests, connections;
    char *out; /* everything it printed after the first line */
};

/* SIGINT, then its exit status (0) and the statistics it printed. */
static struct served stop(struct test_proc p, const char *proto)
{
    ASSERT_OK(kill(p.pid, SIGINT));
    struct served s = {0};
    int status = test_proc_wait(p, &s.out);
    printf("%s", s.out);
    ASSERT_EQ(status, 0);
    char want[64];
    snprintf(want, sizeof want, "usched serve %s: ", proto);
    const char *line = strstr(s.out, want);
    ASSERT(line);
    if (sscanf(line + strlen(want), "%" SCNu64 " requests on %" SCNu64 " connections", &s.requests,
               &s.connections) != 2) {
        /* pgbench's check line comes first */
        line = strstr(line + 1, want);
        ASSERT(line);
        ASSERT_EQ(sscanf(line + strlen(want), "%" SCNu64 " requests on %" SCNu64 " connections", &s.requests,
                         &s.connections),
                  2);
    }
    ASSERT_STR_CONTAINS(s.out, "switches"); /* the decision counters follow */
    return s;
}

static void part_tbench(void)
{
    clients_need("/usr/bin/tbench", "dbench");
    struct test_proc p = serve("tbench", "7003", NULL, NULL); /* tbench's fixed port; CTest serializes on it */
    struct test_run r = clients_run((const char *[]){"/usr/bin/tbench", "-t", "2", "2", "127.0.0.1", NULL});
    clients_check_tbench(r);
    test_run_free(r);
    struct served s = stop(p, "tbench");
    ASSERT_GE(s.connections, 2); /* one per tbench client */
    ASSERT_GT(s.requests, 0);
    free(s.out);
}

static void part_pgbench(void)
{
    clients_need("/usr/bin/pgbench", "postgresql-client-15");
    struct test_proc p = serve("pgbench", "0", "--scale", "2");
    long t = test_scale(200);
    char per[24];
    snprintf(per, sizeof per, "%ld", t);
    /* tpcb-like: five statements a transaction, balances checked on stop */
    struct test_run r = clients_run((const char *[]){"/usr/bin/pgbench", "-n", "-c", "4", "-j", "2", "-t", per, "-h",
                                                     "127.0.0.1", "-p", port, "-U", "tester", "bench", NULL});
    clients_check_pgbench(r, 4, t);
    test_run_free(r);
    struct served s = stop(p, "pgbench");
    ASSERT_STR_CONTAINS(s.out, "usched serve pgbench: balances agree");
    ASSERT_GE(s.connections, 4);
    ASSERT_GE(s.requests, (uint64_t)(4 * t * 5));
    free(s.out);
}

static void part_redis(void)
{
    clients_need("/usr/bin/redis-benchmark", "redis-tools");
    clients_need("/usr/bin/redis-cli", "redis-tools");
    struct test_proc p = serve("redis", "0", NULL, NULL);
    long count = test_scale(5000) / 10 * 10;
    if (count < 10) count = 10;
    char n[24];
    snprintf(n, sizeof n, "%ld", count);
    struct test_run r = clients_run((const char *[]){"/usr/bin/redis-benchmark", "-p", port, "-c", "10", "-n", n, "-t",
                                                     "set,get,incr", "-q", "--csv", NULL});
    static const char *const tests[] = {"\"SET\"", "\"GET\"", "\"INCR\""};
    clients_check_redis(r, tests, 3);
    test_run_free(r);
    /* every INCR of the one key counted */
    r = clients_run((const char *[]){"/usr/bin/redis-cli", "-p", port, "get", "counter:__rand_int__", NULL});
    ASSERT_EQ(r.status, 0);
    char want[32];
    snprintf(want, sizeof want, "%ld\n", count);
    ASSERT_STR_EQ(r.out, want);
    test_run_free(r);
    struct served s = stop(p, "redis");
    ASSERT_GE(s.connections, 10 + 1);
    ASSERT_GE(s.requests, (uint64_t)(3 * count + 1));
    free(s.out);
}

static void part_http(void)
{
    clients_need("/usr/bin/wrk", "wrk");
    struct test_proc p = serve("http", "0", NULL, NULL);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%s/", port);
    struct test_run r = clients_run((const char *[]){"/usr/bin/wrk", "-t", "2", "-c", "8", "-d", "1s", url, NULL});
    uint64_t done = clients_check_wrk(r);
    ASSERT_GT(done, 0);
    test_run_free(r);
    struct served s = stop(p, "http");
    ASSERT_GE(s.connections, 8);
    ASSERT_GE(s.requests, done); /* every response wrk counted was a request served */
    free(s.out);
}

static void part_echo(void)
{
    struct test_proc p = serve("echo", "0", NULL, NULL);
    enum { CONNS = 4 };
    long msgs = test_scale(1000);
    int fd[CONNS];
    for (int k = 0; k < CONNS; k++) {
        fd[k] = socket(AF_INET, SOCK_STREAM, 0);
        ASSERT(fd[k] >= 0);
        struct timeval tv = {10, 0}; /* a reply that never comes fails the test, not hangs it */
        setsockopt(fd[k], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_OK(connect(fd[k], (struct sockaddr *)&a, sizeof a));
    }
    /* round trips, one message at a time on each connection in turn */
    for (long i = 0; i < msgs; i++)
        for (int k = 0; k < CONNS; k++) {
            char msg[32], back[32];
            int len = snprintf(msg, sizeof msg, "message %ld on %d", i, k);
            ASSERT_EQ(send(fd[k], msg, (size_t)len, MSG_NOSIGNAL), len);
            for (int got = 0; got < len;) {
                ssize_t r = recv(fd[k], back + got, (size_t)(len - got), 0);
                ASSERT_GT(r, 0);
                got += (int)r;
            }
            ASSERT(!memcmp(msg, back, (size_t)len));
        }
    /* SIGINT with the clients still connected: the server ends them */
    struct served s = stop(p, "echo");
    for (int k = 0; k < CONNS; k++) {
        char b;
        ASSERT_EQ(recv(fd[k], &b, 1, 0), 0);
        close(fd[k]);
    }
    ASSERT_EQ_U(s.connections, CONNS);
    ASSERT_GE(s.requests, (uint64_t)(CONNS * msgs)); /* a message read in pieces counts each piece */
    free(s.out);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_serve_clients USCHED_CLI tbench|pgbench|redis|http|echo\n");
        return 2;
    }
    cli = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const struct {
        const char *name;
        void (*fn)(void);
    } parts[] = {{"tbench", part_tbench}, {"pgbench", part_pgbench}, {"redis", part_redis},
                 {"http", part_http},     {"echo", part_echo}};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        if (!strcmp(argv[2], parts[i].name)) {
            parts[i].fn();
            printf("serve_clients %s: ok\n", argv[2]);
            return 0;
        }
    return 2;
}
