/*
 * Tracing (docs/trace.md). argv[1] the built CLI, argv[2] python3, argv[3]
 * check_trace.py, argv[4] the part:
 *   machine   a known workload traced on this machine: the file checked by
 *             check_trace.py (spawn events = the spawns counters, runs after
 *             their wake-ups, fields, per-CPU time order, topology groups,
 *             what blocked runs waited for: a sleep at least once a parent);
 *             `usched trace` summarises it and draws an SVG with a lane per
 *             CPU; the wake-up latency statistic counted the wake-ups
 *   virtual   the same on the virtual 2x6x2 topology (24 CPUs): the file
 *             carries 2 packages, 2 LLCs, 12 cores
 *   errors    a bad trace path fails usched_start naming the path; bad
 *             schedtrace values, usched_set_name and usched_wakelat misuse;
 *             `usched trace` on a missing, non-JSON or foreign file
 *   schedtrace  USCHED_SCHEDTRACE prints per-CPU lines on stderr
 *   cli       --trace on usched bench (one file per run when there are
 *             several) and usched serve; a bad --trace path is an error
 *             naming it; the wake-up latency in bench --json
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"
#include "test.h"
#include "usched.h"

#define VIRTUAL "pack:2 l3:1 l2:6 core:1 pu:2"

static const char *cli, *python, *checker;
static char dir[] = "/tmp/usched-trace-XXXXXX";

/* ---- the known workload --------------------------------------------------------- */

#define PARENTS 8 /* each blocks once on a sleep */
#define STR_(x) #x
#define STR(x) STR_(x)
#define CHILDREN 4
#define MESSAGES 50

struct parent {
    int i;
    usched_chan_t *ch;
};

static void child(void *arg)
{
    struct parent *p = arg;
    for (int m = 0; m < MESSAGES / CHILDREN; m++) {
        usched_chan_send(p->ch, (void *)(uintptr_t)(m + 1));
        if (m % 4 == 0) usched_yield();
    }
}

static void parent(void *arg)
{
    struct parent *p = arg;
    char name[32];
    snprintf(name, sizeof name, "parent-%d", p->i);
    ASSERT_OK(usched_set_name(name));
    usched_task_t *kids[CHILDREN];
    for (int k = 0; k < CHILDREN; k++) ASSERT_OK(usched_spawn(usched_self(), &kids[k], child, p));
    void *msg;
    for (int m = 0; m < (MESSAGES / CHILDREN) * CHILDREN; m++) ASSERT_OK(usched_chan_recv(p->ch, &msg));
    usched_sleep_ns(100 * 1000);
    for (int k = 0; k < CHILDREN; k++) ASSERT_OK(usched_join(kids[k]));
}

/* Runs the workload with a trace into path; returns the spawns counted. */
static uint64_t traced_run(const char *topology, const char *path, int *ncpus)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    if (topology) ASSERT_OK(usched_set(s, "topology", topology));
    ASSERT_OK(usched_set(s, "trace", path));
    ASSERT_OK(usched_start(s));
    ASSERT_EQ(usched_set(s, "trace", "/tmp/other.json"), -EBUSY);
    *ncpus = usched_ncpus(s);
    struct parent ps[PARENTS];
    for (int i = 0; i < PARENTS; i++) {
        ps[i].i = i;
        ASSERT_OK(usched_chan_create(&ps[i].ch, 0));
        ASSERT_OK(usched_spawn(s, NULL, parent, &ps[i]));
    }
    ASSERT_OK(usched_wait(s));
    uint64_t in = 0, out = 0;
    ASSERT_OK(usched_stat(s, "spawns", &in));
    ASSERT_OK(usched_stat(s, "spawns_outside", &out));
    ASSERT_EQ_U(in + out, PARENTS * (CHILDREN + 1));
    /* Every message over a rendezvous channel woke someone. */
    struct usched_wakelat l;
    ASSERT_OK(usched_wakelat(s, -1, &l));
    ASSERT_GT(l.count, 0);
    ASSERT(l.p50_ns <= l.p90_ns && l.p90_ns <= l.p99_ns && l.p99_ns <= l.max_ns);
    uint64_t per_cpu = 0;
    for (int c = 0; c < *ncpus; c++) {
        struct usched_wakelat lc;
        ASSERT_OK(usched_wakelat(s, c, &lc));
        per_cpu += lc.count;
    }
    ASSERT_EQ_U(per_cpu, l.count);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ASSERT_OK(usched_stats_print(s, m));
    fclose(m);
    ASSERT_STR_CONTAINS(buf, "wake_latency ");
    ASSERT_STR_CONTAINS(buf, "wake_latency cpu 0 ");
    free(buf);
    ASSERT_OK(usched_destroy(s)); /* writes the trace */
    for (int i = 0; i < PARENTS; i++) ASSERT_OK(usched_chan_destroy(ps[i].ch));
    return in + out;
}

static void expect_ok(struct test_run r, const char *what)
{
    if (r.status != 0) TEST_FAIL_("%s: exit %d\nstdout:\n%s\nstderr:\n%s", what, r.status, r.out, r.err);
    fputs(r.out, stdout);
}

static void expect_all(const char *out, const char *const *needles)
{
    for (; *needles; needles++) ASSERT_STR_CONTAINS(out, *needles);
}

static void test_traced(const char *topology, const char *groups)
{
    char path[256], svg[256], nc[16], sp[32];
    snprintf(path, sizeof path, "%s/run.json", dir);
    snprintf(svg, sizeof svg, "%s/run.svg", dir);
    int ncpus = 0;
    uint64_t spawns = traced_run(topology, path, &ncpus);
    snprintf(nc, sizeof nc, "%d", ncpus);
    snprintf(sp, sizeof sp, "%llu", (unsigned long long)spawns);

    const char *json[] = {python, checker, "json", path, "--spawns", sp, "--ncpus", nc,
                          "--name", "parent-0", "--min-on", "sleep=" STR(PARENTS),
                          groups ? "--groups" : NULL, groups, NULL};
    struct test_run r = test_run_host_argv(json, NULL);
    expect_ok(r, "check_trace.py json");
    test_run_free(r);

    const char *sum[] = {cli, "trace", path, "--svg", svg, "--top", "1000", NULL};
    r = test_run_argv(sum, NULL);
    expect_ok(r, "usched trace --svg");
    expect_all(r.out, (const char *const[]){"busy", "wake-up latency", "migrations", "longest runs:",
                                            "fibers that waited longest", "(parent-", NULL});
    /* every parent blocked once in a sleep */
    const char *bl = strstr(r.out, "blocked on ");
    ASSERT(bl);
    const char *sl = strstr(bl, " sleep ");
    ASSERT(sl && sl < strchr(bl, '\n'));
    ASSERT_GE(atol(sl + 7), PARENTS);
    test_run_free(r);

    const char *xml[] = {python, checker, "svg", svg, "--ncpus", nc, NULL};
    r = test_run_host_argv(xml, NULL);
    expect_ok(r, "check_trace.py svg");
    test_run_free(r);
    unlink(path);
    unlink(svg);
}

/* ---- errors ---------------------------------------------------------------------- */

static void expect_cli_error(const char *file, const char *msg)
{
    const char *argv[] = {cli, "trace", file, NULL};
    struct test_run r = test_run_argv(argv, NULL);
    if (r.status != 1) TEST_FAIL_("usched trace %s: exit %d, expected 1\n%s", file, r.status, r.err);
    ASSERT_STR_CONTAINS(r.err, file);
    ASSERT_STR_CONTAINS(r.err, msg);
    ASSERT_STR_EQ(r.out, "");
    test_run_free(r);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fputs(text, f);
    fclose(f);
}

static void test_errors(void)
{
    usched_t *s;
    /* A directory that does not exist: start fails, naming the path. */
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:2 pu:1"));
    ASSERT_OK(usched_set(s, "trace", "/nonexistent-dir/x/trace.json"));
    ASSERT_EQ(usched_start(s), -ENOENT);
    ASSERT_STR_CONTAINS(usched_last_error(), "/nonexistent-dir/x/trace.json");
    /* A directory itself. */
    ASSERT_OK(usched_set(s, "trace", dir));
    ASSERT_EQ(usched_start(s), -EISDIR);
    ASSERT_STR_CONTAINS(usched_last_error(), dir);
    /* Trace off again: the same scheduler starts. */
    ASSERT_OK(usched_set(s, "trace", ""));
    ASSERT_EQ(usched_set(s, "schedtrace", "-5"), -EINVAL);
    ASSERT_EQ(usched_set(s, "schedtrace", "10ms"), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "10ms");
    ASSERT_EQ(usched_set(s, "schedtrace", NULL), -EINVAL);
    ASSERT_OK(usched_set(s, "schedtrace", "0"));
    ASSERT_EQ(usched_wakelat(s, -1, &(struct usched_wakelat){0}), -ESRCH);
    ASSERT_OK(usched_start(s));
    ASSERT_EQ(usched_set(s, "schedtrace", "10"), -EBUSY);
    struct usched_wakelat l;
    ASSERT_EQ(usched_wakelat(s, 2, &l), -EINVAL);
    ASSERT_EQ(usched_wakelat(s, -2, &l), -EINVAL);
    ASSERT_EQ(usched_wakelat(s, 0, NULL), -EINVAL);
    ASSERT_OK(usched_wakelat(s, 1, &l));
    ASSERT_OK(usched_destroy(s));

    /* usched_set_name: outside a fiber, and bad names. */
    ASSERT_EQ(usched_set_name("main"), -EPERM);
    ASSERT_EQ(usched_set_name(NULL), -EINVAL);
    ASSERT_EQ(usched_set_name(""), -EINVAL);
    ASSERT_EQ(usched_set_name("a\"b"), -EINVAL);
    char longname[USCHED_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    ASSERT_EQ(usched_set_name(longname), -EINVAL);

    /* The environment: a bad USCHED_SCHEDTRACE fails usched_create. */
    setenv("USCHED_SCHEDTRACE", "often", 1);
    ASSERT_EQ(usched_create(&s), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "USCHED_SCHEDTRACE");
    unsetenv("USCHED_SCHEDTRACE");

    /* usched trace on bad input. */
    char path[256];
    snprintf(path, sizeof path, "%s/missing.json", dir);
    expect_cli_error(path, "");
    snprintf(path, sizeof path, "%s/notjson.json", dir);
    write_file(path, "this is not JSON\n");
    expect_cli_error(path, "line 1");
    unlink(path);
    snprintf(path, sizeof path, "%s/foreign.json", dir);
    write_file(path, "{\"traceEvents\":[]}\n");
    expect_cli_error(path, "not a usched trace");
    write_file(path, "{\"usched\":{\"cpus\":[{\"cpu\":0,\"package\":0,\"llc\":0,\"core\":0}]},"
                     "\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"run\",\"ts\":1,\"tid\":5,\"dur\":1,\"args\":{\"fiber\":1}}]}\n");
    expect_cli_error(path, "CPU");
    unlink(path);
    const char *usage[] = {cli, "trace", NULL};
    struct test_run r = test_run_argv(usage, NULL);
    ASSERT_EQ(r.status, 2);
    test_run_free(r);
}

/* ---- the periodic summary ----------------------------------------------------------- */

static void test_schedtrace(void)
{
    /* select runs for its duration (0.3 s): several 20 ms periods. */
    const char *argv[] = {cli, "bench", "select", "-p", "usched", "-r", "1", "-d", "0.3", NULL};
    char *env[] = {"USCHED_SCHEDTRACE=20", NULL};
    struct test_run r = test_run_argv(argv, env);
    if (r.status != 0) TEST_FAIL_("bench with USCHED_SCHEDTRACE: exit %d\n%s", r.status, r.err);
    expect_all(r.err, (const char *const[]){"usched: schedtrace ", " | cpu0 ", " sw=", " q=", NULL});
    ASSERT_STR_CONTAINS(r.out, "wake p50");
    test_run_free(r);
}

/* ---- --trace on the CLI ------------------------------------------------------------- */

static void expect_trace_file(const char *path)
{
    const char *argv[] = {cli, "trace", path, NULL};
    struct test_run r = test_run_argv(argv, NULL);
    expect_ok(r, path);
    ASSERT_STR_CONTAINS(r.out, "wake-up latency");
    test_run_free(r);
    ASSERT_OK(unlink(path));
}

static void test_cli(void)
{
    char path[256], p11[256], p12[256];
    snprintf(path, sizeof path, "%s/b.json", dir);
    snprintf(p11, sizeof p11, "%s/b-1-1.json", dir);
    snprintf(p12, sizeof p12, "%s/b-1-2.json", dir);
    const char *one[] = {cli, "bench", "pingpong", "-p", "usched", "-r", "1", "-n", "500", "--trace", path, NULL};
    struct test_run r = test_run_argv(one, NULL);
    expect_ok(r, "bench --trace, one run");
    test_run_free(r);
    expect_trace_file(path);
    const char *two[] = {cli, "bench", "pingpong", "-p", "usched", "-r", "2", "-n", "500", "--trace", path, NULL};
    r = test_run_argv(two, NULL);
    expect_ok(r, "bench --trace, two runs");
    test_run_free(r);
    ASSERT(access(path, F_OK) != 0);
    expect_trace_file(p11);
    expect_trace_file(p12);

    /* Wake-up latency in --json, per run. */
    const char *json[] = {cli, "bench", "pingpong", "-p", "usched", "-r", "1", "-n", "500", "--json", NULL};
    r = test_run_argv(json, NULL);
    expect_ok(r, "bench --json");
    expect_all(r.out, (const char *const[]){"\"wake_latency\":{\"count\":", "\"p50_ns\":", "\"p99_ns\":",
                                            "\"max_ns\":", NULL});
    test_run_free(r);

    const char *serve[] = {cli, "serve", "echo", "--port", "0", "--duration", "0.2", "--quiet", "--trace", path, NULL};
    r = test_run_argv(serve, NULL);
    expect_ok(r, "serve --trace");
    test_run_free(r);
    expect_trace_file(path);

    const char *bad = "/nonexistent-dir/t.json";
    const char *bbench[] = {cli, "bench", "pingpong", "-p", "usched", "-r", "1", "-n", "500", "--trace", bad, NULL};
    const char *bserve[] = {cli, "serve", "echo", "--port", "0", "--duration", "0.2", "--trace", bad, NULL};
    const char *const *bads[] = {bbench, bserve};
    for (int i = 0; i < 2; i++) {
        r = test_run_argv(bads[i], NULL);
        if (r.status != 1) TEST_FAIL_("%s with a bad --trace: exit %d\n%s", bads[i][1], r.status, r.err);
        ASSERT_STR_CONTAINS(r.err, bad);
        test_run_free(r);
    }
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s CLI PYTHON3 CHECKER machine|virtual|errors|schedtrace|cli\n", argv[0]);
        return 2;
    }
    cli = argv[1];
    python = argv[2];
    checker = argv[3];
    const char *part = argv[4];
    if ((!strcmp(part, "machine") || !strcmp(part, "virtual")) && access(python, X_OK) != 0) {
        printf("SKIP: python3 not found (%s); sh scripts/deps.sh test installs it\n", python);
        return 77;
    }
    ASSERT(mkdtemp(dir));
    if (!strcmp(part, "machine")) test_traced(NULL, NULL);
    else if (!strcmp(part, "virtual")) test_traced(VIRTUAL, "2,2,12");
    else if (!strcmp(part, "errors")) test_errors();
    else if (!strcmp(part, "schedtrace")) test_schedtrace();
    else if (!strcmp(part, "cli")) test_cli();
    else {
        fprintf(stderr, "unknown part '%s'\n", part);
        return 2;
    }
    rmdir(dir);
    printf("trace %s: ok\n", part);
    return 0;
}
