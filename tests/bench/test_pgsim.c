/*
 * `usched bench pgsim` (tools/bench/bench_wl.c), run as a program at a tiny
 * size: argv[1] is the built CLI. Its result line (`pgsim <variant> run 1:
 * tps = N`, N > 0: the workload checked every reply and that transactions
 * completed), its calibration line on stderr, --clients, --json, and the
 * seed table of --emulate --compare 'smt=1;smt=0'. Numbers are never
 * compared, only their presence, shape and sign.
 */
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "test.h"

static const char *cli;

static struct test_run run(const char *const *args)
{
    const char *argv[32] = {cli, "bench", "pgsim"};
    int n = 3;
    for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
    return test_run_argv(argv, NULL);
}

static void expect_ok(struct test_run r, const char *what)
{
    if (r.status != 0) TEST_FAIL_("%s: exit %d\nstdout:\n%s\nstderr:\n%s", what, r.status, r.out, r.err);
}

/* The value of the result line that starts with `prefix`; fails if absent. */
static double result(const char *out, const char *prefix)
{
    const char *p = strstr(out, prefix);
    if (!p) TEST_FAIL_("no line '%s...' in:\n%s", prefix, out);
    p += strlen(prefix);
    char *end;
    double v = strtod(p, &end);
    if (end == p) TEST_FAIL_("'%s' is not followed by a number in:\n%s", prefix, out);
    return v;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <usched binary>\n", argv[0]);
        return 2;
    }
    cli = argv[1];

    /* the default: 2 connections, one result line */
    struct test_run r = run((const char *[]){"--policy", "usched", "--runs", "1", "--duration", "0.2", NULL});
    expect_ok(r, "pgsim");
    double tps = result(r.out, "pgsim policy=usched run 1: tps = ");
    printf("pgsim: tps = %.1f\n", tps);
    ASSERT(tps > 0);
    ASSERT_STR_CONTAINS(r.err, "us of CPU per transaction");
    test_run_free(r);

    /* --clients and --json reach the run */
    r = run((const char *[]){"--policy", "bsd4", "--runs", "1", "--duration", "0.2", "--clients", "3", "--json",
                             NULL});
    expect_ok(r, "pgsim --clients 3 --json");
    ASSERT_STR_CONTAINS(r.out, "\"workload\":\"pgsim\"");
    ASSERT_STR_CONTAINS(r.out, "\"unit\":\"tps\"");
    ASSERT(result(r.out, "\"value\":") > 0);
    test_run_free(r);

    /* the seed table under SMT emulation: two variants, runs, means, diff */
    r = run((const char *[]){"--policy", "bsd4", "--topology", "pack:1 core:2 pu:2", "--emulate", "--compare",
                             "smt=1;smt=0", "--runs", "1", "--duration", "0.2", NULL});
    expect_ok(r, "pgsim --emulate --compare");
    ASSERT(result(r.out, "pgsim smt=1 run 1: tps = ") > 0);
    ASSERT(result(r.out, "pgsim smt=0 run 1: tps = ") > 0);
    ASSERT_STR_CONTAINS(r.out, "seed table (pgsim, 4 CPUs, SMT emulated)");
    ASSERT_STR_CONTAINS(r.out, "(smt=1 over smt=0)");
    ASSERT_STR_CONTAINS(r.out, "place_shared"); /* bsd4's decisions, counted */
    test_run_free(r);

    /* pgsim has no size */
    r = run((const char *[]){"--n", "5", NULL});
    ASSERT_EQ(r.status, 2);
    ASSERT_STR_CONTAINS(r.err, "pgsim has no size");
    test_run_free(r);

    printf("bench pgsim: ok\n");
    return 0;
}
