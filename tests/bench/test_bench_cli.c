/*
 * `usched bench`, run as a program: argv[1] is the built CLI, argv[2] the
 * part to test:
 *   workloads  every workload at a tiny size: exit 0, `tps = ` lines, the summary
 *   compare    --compare runs interleaved, the diff column, counters, --json fields
 *   peers      --peers against fake peer programs: a result, a skip, a failure,
 *              a missing one; --peers-dir and USCHED_PEERS_DIR
 *   args       bad arguments: exit 2, one line on stderr, nothing on stdout
 * Numbers are never asserted, only their presence and shape.
 */
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"
#include "test.h"
#include "usched.h"

static const char *cli;

/* Runs the CLI with the NULL-terminated arguments after "bench" and env
 * (NULL: inherit) and collects its output. */
static struct test_run run_env(char **env, const char *a0, ...)
{
    const char *argv[32] = {cli, "bench"};
    va_list ap;
    va_start(ap, a0);
    int n = 2;
    for (const char *a = a0; a && n < 31; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    return test_run_argv(argv, env);
}

#define run(...) run_env(NULL, __VA_ARGS__)

#define done test_run_free

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static int lines(const char *s)
{
    return count(s, "\n");
}

static void expect_ok(struct test_run r, const char *what)
{
    if (r.status != 0) TEST_FAIL_("%s: exit %d\nstdout:\n%s\nstderr:\n%s", what, r.status, r.out, r.err);
}

/* ---- workloads ----------------------------------------------------------------- */

static void test_workloads(void)
{
    static const struct {
        const char *name, *n;
    } ws[] = {
        {"pairs", NULL}, {"select", NULL}, {"build", "200"},   {"fib", "20"},
        {"skynet", "1000"}, {"pingpong", "2000"}, {"yield", "2000"}, {"spawn", "3000"},
    };
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        struct test_run r = ws[i].n ? run(ws[i].name, "--policy", "usched", "--runs", "1", "--n", ws[i].n, NULL)
                               : run(ws[i].name, "--policy", "usched", "--runs", "1", "--duration", "0.2", NULL);
        expect_ok(r, ws[i].name);
        ASSERT_EQ(count(r.out, "tps = "), 1);
        ASSERT_STR_CONTAINS(r.out, "(reference)");
        ASSERT_STR_CONTAINS(r.out, "decision counters");
        /* stderr is not a terminal: one progress line per finished run */
        ASSERT_STR_CONTAINS(r.err, "[1/1]");
        ASSERT_EQ(lines(r.err), 1);
        done(r);
    }
    /* --clients and a CPU list reach the run */
    struct test_run r = run("select", "--policy", "usched", "--runs", "1", "--duration", "0.2", "--clients", "3",
                       "--cpus", "0", NULL);
    expect_ok(r, "select --clients 3 --cpus 0");
    ASSERT_STR_CONTAINS(r.out, "1 CPU,");
    done(r);
}

/* ---- compare and json ------------------------------------------------------------- */

static void test_compare(void)
{
    struct test_run r = run("fib", "--n", "18", "--runs", "2", "--compare", "smt=1;smt=0", NULL);
    expect_ok(r, "--compare 'smt=1;smt=0'");
    /* interleaved: A B A B */
    const char *a1 = strstr(r.out, "fib smt=1 run 1: tps = ");
    const char *b1 = strstr(r.out, "fib smt=0 run 1: tps = ");
    const char *a2 = strstr(r.out, "fib smt=1 run 2: tps = ");
    const char *b2 = strstr(r.out, "fib smt=0 run 2: tps = ");
    if (!a1 || !b1 || !a2 || !b2 || !(a1 < b1 && b1 < a2 && a2 < b2))
        TEST_FAIL_("runs not interleaved A B A B:\n%s", r.out);
    ASSERT_STR_CONTAINS(r.out, "mean");
    ASSERT_STR_CONTAINS(r.out, "stddev");
    ASSERT_STR_CONTAINS(r.out, "(reference)");
    ASSERT_STR_CONTAINS(r.out, "%");
    ASSERT_STR_CONTAINS(r.out, "counter ");
    done(r);

    /* one key with several values: every policy of the library */
    char spec[256] = "policy=";
    int np = usched_policy_count();
    ASSERT_GT(np, 0);
    for (int i = 0; i < np; i++) {
        strcat(spec, usched_policy_name(i));
        if (i + 1 < np) strcat(spec, ",");
    }
    r = run("spawn", "--n", "2000", "--runs", "1", "--compare", spec, NULL);
    expect_ok(r, spec);
    ASSERT_EQ(count(r.out, "tps = "), np);
    for (int i = 0; i < np; i++) {
        char line[96];
        snprintf(line, sizeof line, "spawn policy=%s run 1: tps = ", usched_policy_name(i));
        ASSERT_STR_CONTAINS(r.out, line);
    }
    done(r);

    /* no --policy: every policy, usched first */
    r = run("yield", "--n", "1000", "--runs", "1", NULL);
    expect_ok(r, "yield over all policies");
    ASSERT_EQ(count(r.out, "tps = "), np);
    ASSERT(strstr(r.out, "yield policy=usched run 1") == r.out);
    done(r);

    /* --json: one object per run, with the documented fields */
    r = run("fib", "--n", "18", "--runs", "2", "--compare", "smt=1;smt=0", "--json", NULL);
    expect_ok(r, "--json");
    ASSERT_EQ(lines(r.out), 4);
    static const char *const fields[] = {"{\"workload\":\"fib\"", "\"system\":\"usched\"", "\"policy\":",
                                         "\"knobs\":\"smt=1\"", "\"knobs\":\"smt=0\"", "\"value\":",
                                         "\"unit\":\"ms\"", "\"higher_is_better\":false",
                                         "\"counters\":{\"switches\":"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) ASSERT_STR_CONTAINS(r.out, fields[i]);
    ASSERT_EQ(count(r.out, "\"counters\":{"), 4);
    ASSERT(!strstr(r.out, "tps = "));
    done(r);
}

/* ---- peers -------------------------------------------------------------------------- */

static void write_peer(const char *dir, const char *name, const char *body)
{
    char path[512];
    snprintf(path, sizeof path, "%s/peer-%s", dir, name);
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fprintf(f, "#!/bin/sh\n%s\n", body);
    fclose(f);
    ASSERT_EQ(chmod(path, 0755), 0);
}

static void test_peers(void)
{
    char dir[] = "/tmp/usched-bench-peers-XXXXXX";
    ASSERT(mkdtemp(dir));
    /* pthreads: twice usched's time per op; go: unsupported; tbb: wrong answer;
     * omp: checks it got the same size and seed; the rest are missing */
    write_peer(dir, "pthreads",
               "echo 'spawn: chatter on stderr' >&2\n"
               "echo 'RESULT workload=spawn system=pthreads value=123456 unit=ns/op higher_is_better=0 "
               "check=ok threads=2'");
    write_peer(dir, "go", "echo 'unsupported workload spawn'; exit 3");
    write_peer(dir, "tbb",
               "echo 'RESULT workload=spawn system=tbb value=5.00 unit=ns/op higher_is_better=0 "
               "check=FAIL threads=2'; exit 1");
    write_peer(dir, "omp",
               "case \"$*\" in *'spawn --threads '*' --n 2000 '*'--seed 1'*) ;; *) echo \"args $*\" >&2; exit 9;; esac\n"
               "echo 'RESULT workload=spawn system=omp value=7.50 unit=ns/op higher_is_better=0 check=ok threads=2'");
    struct test_run r = run("spawn", "--policy", "usched", "--n", "2000", "--runs", "2", "--peers", "--peers-dir", dir,
                       NULL);
    expect_ok(r, "--peers");
    ASSERT_STR_CONTAINS(r.out, "spawn pthreads run 1: tps = ");
    ASSERT_STR_CONTAINS(r.out, "spawn pthreads run 2: tps = ");
    ASSERT_STR_CONTAINS(r.out, "spawn omp run 2: tps = ");
    ASSERT_STR_CONTAINS(r.out, "peers: median of 2 runs");
    ASSERT_STR_CONTAINS(r.out, "unsupported workload spawn");
    ASSERT_STR_CONTAINS(r.out, "check=FAIL");
    ASSERT_STR_CONTAINS(r.out, "not built");
    ASSERT_STR_CONTAINS(r.out, "peer-boostfiber");
    ASSERT_STR_CONTAINS(r.out, "peer-tokio");
    ASSERT_STR_CONTAINS(r.out, "(usched loses)"); /* omp's 7.5 ns/op */
    ASSERT_STR_CONTAINS(r.out, "x\n");
    done(r);

    /* the same through the environment, as JSON */
    char envdir[600];
    snprintf(envdir, sizeof envdir, "USCHED_PEERS_DIR=%s", dir);
    char *env[] = {envdir, NULL};
    r = run_env(env, "spawn", "--policy", "usched", "--n", "2000", "--runs", "1", "--peers", "--json", NULL);
    expect_ok(r, "--peers --json with USCHED_PEERS_DIR");
    ASSERT_STR_CONTAINS(r.out, "\"system\":\"pthreads\"");
    ASSERT_STR_CONTAINS(r.out, "\"value\":123456");
    ASSERT_STR_CONTAINS(r.out, "\"system\":\"go\"");
    ASSERT_STR_CONTAINS(r.out, "\"skipped\":\"unsupported workload spawn\"");
    ASSERT_STR_CONTAINS(r.out, "\"failed\":");
    ASSERT_EQ(lines(r.out), 7); /* usched + 6 peers, one run each */
    done(r);

    static const char *const names[] = {"pthreads", "go", "tbb", "omp"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/peer-%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* ---- bad arguments ---------------------------------------------------------------------- */

static void bad(const char *needle, const char *a0, ...)
{
    const char *argv[16] = {a0};
    va_list ap;
    va_start(ap, a0);
    int n = 1;
    for (const char *a = va_arg(ap, const char *); a && n < 15; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    struct test_run r = run(argv[0], argv[1], argv[2], argv[3], argv[4], argv[5], argv[6], argv[7], NULL);
    if (r.status != 2) TEST_FAIL_("bench %s %s ...: exit %d, expected 2\n%s%s", argv[0], argv[1] ? argv[1] : "",
                                  r.status, r.out, r.err);
    ASSERT_STR_EQ(r.out, "");
    ASSERT_EQ(lines(r.err), 1);
    ASSERT_STR_CONTAINS(r.err, "usched bench: ");
    ASSERT_STR_CONTAINS(r.err, needle);
    done(r);
}

static void test_args(void)
{
    bad("workload 'nosuch': unknown", "nosuch", NULL);
    bad("unexpected argument 'fib'", "spawn", "fib", NULL);
    bad("unknown option '--bogus'", "fib", "--bogus", NULL);
    bad("option '--runs' needs a value", "fib", "--runs", NULL);
    bad("--runs '0'", "fib", "--runs", "0", NULL);
    bad("--runs 'x'", "fib", "--runs", "x", NULL);
    bad("--duration '-1'", "select", "--duration", "-1", NULL);
    bad("--duration 'abc'", "select", "--duration", "abc", NULL);
    bad("--n: select has no size", "select", "--n", "5", NULL);
    bad("skynet leaves must be a power of 10", "skynet", "--n", "15", NULL);
    bad("fib(N) needs N <= 90", "fib", "--n", "91", NULL);
    bad("--n '0'", "fib", "--n", "0", NULL);
    bad("--clients: only select", "fib", "--clients", "3", NULL);
    bad("--clients '0'", "select", "--clients", "0", NULL);
    bad("policy 'nosuch'", "fib", "--policy", "nosuch", NULL);
    bad("knobs", "fib", "--knobs", "nosuch=1", NULL);
    bad("smt=7", "fib", "--compare", "smt=7;smt=0", NULL);
    bad("is not key=value", "fib", "--compare", "bogus", NULL);
    bad("policy 'nosuch'", "fib", "--compare", "policy=usched,nosuch", NULL);
    bad("cpus", "fib", "--cpus", "0-999", NULL);
    bad("--peers-dir needs --peers", "fib", "--peers-dir", "/tmp", NULL);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s <usched binary> workloads|compare|peers|args\n", argv[0]);
        return 2;
    }
    cli = argv[1];
    if (!strcmp(argv[2], "workloads"))
        test_workloads();
    else if (!strcmp(argv[2], "compare"))
        test_compare();
    else if (!strcmp(argv[2], "peers"))
        test_peers();
    else if (!strcmp(argv[2], "args"))
        test_args();
    else
        TEST_FAIL_("unknown part '%s'", argv[2]);
    printf("bench cli %s: ok\n", argv[2]);
    return 0;
}
