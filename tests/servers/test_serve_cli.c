/*
 * `usched serve` and `usched bench tbench|pgbench|redis|http`, run as
 * programs: argv[1] is the built CLI, argv[2] the part:
 *   serve  bad usage (exit 2), a busy port (exit 1), --duration, and a
 *          SIGTERM stop after serving a client
 *   bench  one tiny run of the redis and pgbench (tpcb-like, balances
 *          checked) workloads with --json and --peers; skipped (as a whole)
 *          without redis-benchmark or pgbench
 *   args   bad options of the network workloads: exit 2, one line on stderr
 * Numbers are never asserted, only their presence.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "run.h"
#include "test.h"

static const char *cli;

static struct test_run run(const char *a0, ...)
{
    const char *argv[40] = {cli};
    va_list ap;
    va_start(ap, a0);
    int n = 1;
    for (const char *a = a0; a && n < 39; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    return test_run_argv(argv, NULL);
}

static void expect_usage(struct test_run r, const char *needle)
{
    if (r.status != 2 || !strstr(r.err, needle) || r.out[0])
        TEST_FAIL_("expected exit 2 and \"%s\" on stderr, got %d\nstdout: %s\nstderr: %s", needle, r.status, r.out,
                   r.err);
    ASSERT_EQ(strchr(r.err, '\n') - r.err + 1, (long)strlen(r.err)); /* one line */
    test_run_free(r);
}

/* ---- serve ---------------------------------------------------------------------------- */

static void part_serve(void)
{
    expect_usage(run("serve", NULL), "no protocol given");
    expect_usage(run("serve", "gopher", NULL), "protocol 'gopher': unknown");
    expect_usage(run("serve", "redis", "--port", "70000", NULL), "--port '70000'");
    expect_usage(run("serve", "redis", "--port", "x", NULL), "not an integer");
    expect_usage(run("serve", "redis", "--scale", "2", NULL), "only pgbench");
    expect_usage(run("serve", "http", "--duration", "0", NULL), "--duration");
    expect_usage(run("serve", "http", "extra", NULL), "unexpected argument 'extra'");
    expect_usage(run("serve", "http", "--policy", "nosuch", NULL), "nosuch");
    expect_usage(run("serve", "http", "--bogus", NULL), "unknown option");
    expect_usage(run("serve", "http", "--host", "1.2.3.999", "--port", "0", NULL), "not a numeric IPv4 or IPv6");

    /* a port somebody else holds */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    ASSERT_OK(bind(fd, (struct sockaddr *)&a, sizeof a));
    ASSERT_OK(listen(fd, 1));
    ASSERT_OK(getsockname(fd, (struct sockaddr *)&a, &l));
    char port[16];
    snprintf(port, sizeof port, "%d", ntohs(a.sin_port));
    struct test_run r = run("serve", "redis", "--port", port, NULL);
    ASSERT_EQ(r.status, 1);
    ASSERT_STR_CONTAINS(r.err, "Address already in use");
    test_run_free(r);
    close(fd);

    /* --duration, the help */
    r = run("serve", "pgbench", "--port", "0", "--duration", "0.3", "--scale", "2", NULL);
    ASSERT_EQ(r.status, 0);
    ASSERT_STR_CONTAINS(r.out, "usched serve pgbench: listening on 127.0.0.1:");
    ASSERT_STR_CONTAINS(r.out, "balances agree");
    ASSERT_STR_CONTAINS(r.out, "0 requests on 0 connections");
    test_run_free(r);
    /* --emulate: on a virtual topology it serves; without one the start fails */
    r = run("serve", "echo", "--port", "0", "--duration", "0.3", "--topology", "pack:1 core:2 pu:2", "--emulate",
            NULL);
    ASSERT_EQ(r.status, 0);
    ASSERT_STR_CONTAINS(r.out, "usched serve echo: listening on 127.0.0.1:");
    test_run_free(r);
    r = run("serve", "echo", "--port", "0", "--emulate", NULL);
    ASSERT_EQ(r.status, 1);
    ASSERT_STR_CONTAINS(r.err, "emulate: needs a virtual topology");
    test_run_free(r);
    r = run("serve", "--help", NULL);
    ASSERT_EQ(r.status, 0);
    static const char *const protos[] = {"tbench", "pgbench", "redis", "http", "echo"};
    for (int i = 0; i < 5; i++) ASSERT_STR_CONTAINS(r.out, protos[i]);
    test_run_free(r);

    /* until SIGTERM, serving a client meanwhile (under a cross build's
     * emulator too: qemu-user runs the program in its own process, so the
     * signal reaches it) */
    const char *argv[] = {cli, "serve", "echo", "--port", "0", NULL};
    struct test_proc p = test_start_argv(argv);
    FILE *f = p.out;
    char line[256];
    ASSERT(fgets(line, sizeof line, f));
    ASSERT_STR_CONTAINS(line, "usched serve echo: listening on 127.0.0.1:");
    int portno = atoi(strrchr(line, ':') + 1);
    ASSERT_GT(portno, 0);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    a.sin_port = htons((uint16_t)portno);
    ASSERT_OK(connect(fd, (struct sockaddr *)&a, sizeof a));
    ASSERT_EQ(write(fd, "ping", 4), 4);
    char buf[8];
    ASSERT_EQ(read(fd, buf, sizeof buf), 4);
    ASSERT(!memcmp(buf, "ping", 4));
    ASSERT_OK(kill(p.pid, SIGTERM)); /* with the client still connected */
    char *rest;
    ASSERT_EQ(test_proc_wait(p, &rest), 0);
    ASSERT_STR_CONTAINS(rest, "1 requests on 1 connections");
    free(rest);
    ASSERT_EQ(read(fd, buf, sizeof buf), 0); /* the server closed it */
    close(fd);
}

/* ---- bench ----------------------------------------------------------------------------- */

/* Both clients or no run at all: a missing one skips the whole part (which
 * fails CI), never half of it. */
static void need(const char *path)
{
    if (access(path, X_OK) == 0) return;
    printf("skipped: %s is not installed (scripts/deps.sh test installs it)\n", path);
    exit(77);
}

static void part_bench(void)
{
    need("/usr/bin/redis-benchmark");
    need("/usr/bin/pgbench");
    {
        char dir[] = "/tmp/usched-nopeers-XXXXXX";
        ASSERT(mkdtemp(dir));
        struct test_run r = run("bench", "redis", "--runs", "1", "--duration", "1", "--clients", "2", "--pipeline", "4",
                                "--layout", "unpinned", "--json", "--peers", "--peers-dir", dir, NULL);
        rmdir(dir);
        if (r.status != 0) TEST_FAIL_("bench redis: exit %d\n%s\n%s", r.status, r.out, r.err);
        ASSERT_STR_CONTAINS(r.out, "\"workload\":\"redis\",\"system\":\"usched\"");
        ASSERT_STR_CONTAINS(r.out, "\"clients\":2,\"layout\":\"unpinned\",\"pipeline\":4");
        const char *value = strstr(strstr(r.out, "\"system\":\"usched\""), "\"value\":");
        ASSERT(value && strncmp(value + 8, "null", 4)); /* the client's figure was read */
        const char *go = strstr(r.out, "\"system\":\"go\"");
        ASSERT(go);
        ASSERT_STR_CONTAINS(go, "\"skipped\":\"not built");
        ASSERT_STR_CONTAINS(r.out, "\"system\":\"redis-server\"");
        test_run_free(r);
    }
    {
        /* two points: the sweep runs the report once per point */
        struct test_run r = run("bench", "pgbench", "--runs", "1", "--duration", "1", "--clients", "1,2", "--script",
                                "tpcb-like", "--layout", "unpinned", NULL);
        if (r.status != 0) TEST_FAIL_("bench pgbench: exit %d\n%s\n%s", r.status, r.out, r.err);
        ASSERT_STR_CONTAINS(r.out, "== pgbench: 1 client, tpcb-like, layout unpinned ==");
        ASSERT_STR_CONTAINS(r.out, "== pgbench: 2 clients, tpcb-like, layout unpinned ==");
        ASSERT_STR_CONTAINS(r.out, "pgbench policy=");
        ASSERT_STR_CONTAINS(r.out, "tps = ");
        test_run_free(r);
    }
}

/* ---- args ------------------------------------------------------------------------------- */

static void part_args(void)
{
    expect_usage(run("bench", "tbench", "--pipeline", "2", NULL), "--pipeline: only redis");
    expect_usage(run("bench", "http", "--layout", "sideways", NULL), "--layout 'sideways'");
    expect_usage(run("bench", "pgbench", "--script", "nosuch", NULL), "--script 'nosuch'");
    expect_usage(run("bench", "redis", "--script", "tpcb-like", NULL), "only pgbench");
    expect_usage(run("bench", "redis", "--clients", "0", NULL), "--clients '0'");
    expect_usage(run("bench", "redis", "--clients", "2,x", NULL), "--clients '2,x'");
    expect_usage(run("bench", "redis", "--scale", "3", NULL), "only pgbench");
    expect_usage(run("bench", "http", "--cpus", "0", NULL), "--layout");
    expect_usage(run("bench", "http", "--clients", NULL), "needs a value");
    struct test_run r = run("bench", "tbench", "--help", NULL);
    ASSERT_EQ(r.status, 0);
    ASSERT_STR_CONTAINS(r.out, "--layout");
    test_run_free(r);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_serve_cli USCHED_CLI serve|bench|args\n");
        return 2;
    }
    cli = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(argv[2], "serve"))
        part_serve();
    else if (!strcmp(argv[2], "bench"))
        part_bench();
    else if (!strcmp(argv[2], "args"))
        part_args();
    else
        return 2;
    printf("serve_cli %s: ok\n", argv[2]);
    return 0;
}
