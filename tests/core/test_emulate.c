/*
 * The "emulate" setting (SMT emulation, docs/emulation.md) through the public
 * API: on several virtual shapes, a fiber bound to each virtual CPU reads its
 * worker's affinity with sched_getaffinity, which must be exactly the one
 * real CPU the mapping gives (a core's PUs on one CPU, cores round-robin over
 * the process's CPUs in topology order), also with the process restricted to
 * one CPU and through USCHED_EMULATE; without emulation the workers keep
 * every CPU. Bad settings: a value other than 0 or 1, emulation without a
 * virtual topology, a change after start, a bad USCHED_EMULATE.
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "test.h"
#include "usched.h"

enum { MAXV = 64 };
static int seen_count[MAXV], seen_cpu[MAXV];

static void read_affinity(void *arg)
{
    int v = (int)(intptr_t)arg;
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    seen_count[v] = CPU_COUNT(&set);
    seen_cpu[v] = -1;
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set)) {
            seen_cpu[v] = i;
            break;
        }
}

/* The process's CPUs, ascending. */
static int allowed(int *real)
{
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    int n = 0;
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set)) real[n++] = i;
    return n;
}

/* Starts `shape` (cores of `width` PUs, numbered core by core) with emulate
 * set to `emulate` (NULL: left to USCHED_EMULATE) and checks every worker's
 * affinity. */
static void check_shape(const char *shape, int width, const char *emulate)
{
    int real[CPU_SETSIZE];
    int nreal = allowed(real);
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", shape));
    if (emulate) ASSERT_OK(usched_set(s, "emulate", emulate));
    ASSERT_OK(usched_start(s));
    int n = usched_ncpus(s);
    ASSERT_LE(n, MAXV);
    usched_task_t *t[MAXV];
    for (int v = 0; v < n; v++) ASSERT_OK(usched_spawn_on(s, &t[v], v, read_affinity, (void *)(intptr_t)v));
    for (int v = 0; v < n; v++) ASSERT_OK(usched_join(t[v]));
    ASSERT_OK(usched_destroy(s));
    printf("%-30s emulate=%s on %d real CPUs:", shape, emulate ? emulate : "(env)", nreal);
    for (int v = 0; v < n; v++) printf(" %d", seen_cpu[v]);
    printf("\n");
    bool on = emulate ? emulate[0] == '1' : true;
    for (int v = 0; v < n; v++) {
        if (!on) {
            ASSERT_EQ(seen_count[v], nreal); /* a virtual topology alone is not pinned */
            continue;
        }
        ASSERT_EQ(seen_count[v], 1);
        ASSERT_EQ(seen_cpu[v], real[(v / width) % nreal]);
    }
}

static void expect_err(int rc, int err, const char *needle)
{
    if (rc != -err) TEST_FAIL_("rc = %d (%s), expected %d", rc, usched_last_error(), -err);
    ASSERT_STR_CONTAINS(usched_last_error(), needle);
}

static void check_bad(void)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    expect_err(usched_set(s, "emulate", "2"), EINVAL, "emulate: '2' is not 0 or 1");
    expect_err(usched_set(s, "emulate", ""), EINVAL, "emulate");
    expect_err(usched_set(s, "emulate", NULL), EINVAL, "emulate");
    ASSERT_OK(usched_set(s, "emulate", "1"));
    /* this machine as the topology: nothing to emulate */
    expect_err(usched_start(s), EINVAL, "virtual topology");
    /* the failed start leaves the scheduler configurable */
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:2 pu:2"));
    ASSERT_OK(usched_start(s));
    expect_err(usched_set(s, "emulate", "0"), EBUSY, "emulate");
    ASSERT_OK(usched_destroy(s));

    ASSERT_EQ(setenv("USCHED_EMULATE", "yes", 1), 0);
    s = NULL;
    expect_err(usched_create(&s), EINVAL, "USCHED_EMULATE");
    ASSERT(s == NULL);
    ASSERT_EQ(unsetenv("USCHED_EMULATE"), 0);
}

int main(void)
{
    check_shape("pack:1 core:2 pu:2", 2, "1");
    check_shape("pack:1 core:2 pu:2", 2, "0");
    check_shape("pack:2 core:3 pu:2", 2, "1"); /* more cores than real CPUs */
    check_shape("pack:1 core:1 pu:4", 4, "1"); /* one core: every PU on the first CPU */
    check_shape("pack:1 core:3 pu:1", 1, "1");
    check_shape("pack:2 l3:1 l2:2 core:1 pu:2", 2, "1");
    /* the environment variable */
    ASSERT_EQ(setenv("USCHED_EMULATE", "1", 1), 0);
    check_shape("pack:1 l2:2 core:2 pu:2", 2, NULL);
    ASSERT_EQ(unsetenv("USCHED_EMULATE"), 0);
    /* the process restricted to its last CPU: every core shares it */
    cpu_set_t mine, one;
    ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
    int real[CPU_SETSIZE];
    int nreal = allowed(real);
    CPU_ZERO(&one);
    CPU_SET(real[nreal - 1], &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    check_shape("pack:1 core:2 pu:2", 2, "1");
    ASSERT_EQ(sched_setaffinity(0, sizeof mine, &mine), 0);
    check_bad();
    printf("ok\n");
    return 0;
}
