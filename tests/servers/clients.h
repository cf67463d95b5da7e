/*
 * The real clients of the servers' tests, shared by the in-process tests
 * (test_servers_clients.c) and the `usched serve` process tests
 * (test_serve_clients.c): finding a client, running it under a time limit,
 * and reading what its output says about the run. Checks that look at a
 * client's output live here so both kinds of test ask the same of it.
 */
#ifndef USCHED_TESTS_CLIENTS_H
#define USCHED_TESTS_CLIENTS_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"
#include "test.h"

/* Skips the test (exit 77) when a client is not installed. */
static inline void clients_need(const char *prog, const char *pkg)
{
    if (access(prog, X_OK) == 0) return;
    printf("skipped: %s is not installed (Debian package %s; scripts/deps.sh test installs it)\n", prog, pkg);
    exit(77);
}

/* Runs a client (a host program, also in cross builds) under a 120 s
 * limit; its command line and output are printed for the log. */
static inline struct test_run clients_run(const char *const *argv)
{
    const char *full[40] = {"/usr/bin/timeout", "120"};
    int n = 2;
    for (int i = 0; argv[i] && n < 39; i++) full[n++] = argv[i];
    full[n] = NULL;
    struct test_run r = test_run_host_argv(full, NULL);
    printf("$");
    for (int i = 0; argv[i]; i++) printf(" %s", argv[i]);
    printf("\n%s%s", r.out, r.err);
    if (r.status == 124) TEST_FAIL_("%s ran past 120 s", argv[0]);
    return r;
}

/* tbench ran to its end: a throughput line, no lost sync, no error. */
static inline void clients_check_tbench(struct test_run r)
{
    ASSERT_EQ(r.status, 0);
    ASSERT_STR_CONTAINS(r.out, "Throughput");
    ASSERT(!strstr(r.out, "lost sync") && !strstr(r.err, "lost sync"));
    ASSERT(!strstr(r.out, "ERROR") && !strstr(r.err, "ERROR"));
}

/* pgbench ran all its transactions (clients x per) and none failed. */
static inline void clients_check_pgbench(struct test_run r, long clients, long per)
{
    ASSERT_EQ(r.status, 0);
    char want[128];
    snprintf(want, sizeof want, "number of transactions actually processed: %ld/%ld", clients * per, clients * per);
    ASSERT_STR_CONTAINS(r.out, want);
    ASSERT_STR_CONTAINS(r.out, "number of failed transactions: 0");
}

/* redis-benchmark --csv ran without an error and reported each test. */
static inline void clients_check_redis(struct test_run r, const char *const *tests, size_t ntests)
{
    ASSERT_EQ(r.status, 0);
    ASSERT(!strstr(r.out, "Error") && !strstr(r.err, "Error"));
    for (size_t i = 0; i < ntests; i++) ASSERT_STR_CONTAINS(r.out, tests[i]);
}

/* wrk got only 2xx answers and no socket error; returns the requests it
 * counted. */
static inline uint64_t clients_check_wrk(struct test_run r)
{
    ASSERT_EQ(r.status, 0);
    ASSERT(!strstr(r.out, "Non-2xx"));
    ASSERT(!strstr(r.out, "Socket errors"));
    const char *in = strstr(r.out, " requests in ");
    ASSERT(in);
    while (in > r.out && in[-1] != ' ' && in[-1] != '\n') in--;
    return strtoull(in, NULL, 10);
}

#endif
