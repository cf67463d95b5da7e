/*
 * SMT emulation's mapping (src/topo/emulate.c): for several shapes and sets
 * of real CPUs, every PU of a core lands on one real CPU, cores take the real
 * CPUs round-robin in topology order, the return value is the largest number
 * of cores sharing a real CPU; and the errors (a live topology, an empty set).
 */
#include <sched.h>

#include "topo_test.h"

struct emu_case {
    const char *shape;
    int real[4], nreal;
    int share;        /* expected return: cores per real CPU at most */
    int expect[16];   /* expected real CPU of each virtual CPU */
};

static const struct emu_case cases[] = {
    /* the seeds' shape on 2 CPUs: PUs 0-1 on the first, 2-3 on the second */
    {"pack:1 core:2 pu:2", {0, 1}, 2, 1, {0, 0, 1, 1}},
    /* the same on a sparse set: the real CPUs' own numbers */
    {"pack:1 core:2 pu:2", {3, 9}, 2, 1, {3, 3, 9, 9}},
    /* one real CPU: every core shares it */
    {"pack:1 core:2 pu:2", {5}, 1, 2, {5, 5, 5, 5}},
    /* more cores than real CPUs: round-robin wraps */
    {"pack:2 core:3 pu:2", {0, 1}, 2, 3, {0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1}},
    /* fewer cores than real CPUs: the first ones only */
    {"pack:1 core:2 pu:4", {0, 1, 2, 3}, 4, 1, {0, 0, 0, 0, 1, 1, 1, 1}},
    /* no SMT: one PU per core, each on its own CPU while they last */
    {"pack:1 core:3 pu:1", {0, 1}, 2, 2, {0, 1, 0}},
    /* SMT4 under an L2 per 2 cores, 3 real CPUs */
    {"pack:1 l2:2 core:2 pu:4", {2, 4, 6}, 3, 2,
     {2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6, 2, 2, 2, 2}},
    /* two packages with caches */
    {"pack:2 l3:1 l2:2 core:1 pu:2", {0, 1, 2, 3}, 4, 1, {0, 0, 1, 1, 2, 2, 3, 3}},
};

static void check_case(const struct emu_case *c)
{
    usched__topo_t *t = topo_load_ok(c->shape, NULL);
    int n = usched__topo_ncpus(t);
    ASSERT_LE(n, 16);
    int map[16];
    char err[200] = "";
    int r = usched__topo_emulate_map(t, c->real, c->nreal, map, err, sizeof err);
    printf("%-30s on %d real CPUs: share %d, map", c->shape, c->nreal, r);
    for (int i = 0; i < n; i++) printf(" %d", map[i]);
    printf("\n");
    ASSERT_EQ(r, c->share);
    for (int i = 0; i < n; i++) ASSERT_EQ(map[i], c->expect[i]);
    /* the invariant behind the table: siblings share a real CPU */
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            if (usched__topo_group(t, a, TOPO_SMT) == usched__topo_group(t, b, TOPO_SMT))
                ASSERT_EQ(map[a], map[b]);
    usched__topo_free(t);
}

static void check_errors(void)
{
    int real[1] = {0}, map[4096];
    char err[200] = "";
    usched__topo_t *t = topo_load_ok("pack:1 core:2 pu:2", NULL);
    ASSERT_EQ(usched__topo_emulate_map(t, real, 0, map, err, sizeof err), -EINVAL);
    ASSERT_STR_CONTAINS(err, "empty");
    usched__topo_free(t);
    t = topo_load_ok(NULL, NULL); /* this machine: nothing to emulate */
    err[0] = '\0';
    ASSERT_EQ(usched__topo_emulate_map(t, real, 1, map, err, sizeof err), -EINVAL);
    ASSERT_STR_CONTAINS(err, "virtual topology");
    usched__topo_free(t);
}

static void check_allowed(void)
{
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    int real[CPU_SETSIZE];
    int n = usched__topo_allowed_cpus(real, CPU_SETSIZE);
    ASSERT_EQ(n, CPU_COUNT(&set));
    for (int i = 0; i < n; i++) {
        ASSERT(CPU_ISSET(real[i], &set));
        if (i) ASSERT_LT(real[i - 1], real[i]);
    }
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
    check_errors();
    check_allowed();
    printf("ok\n");
    return 0;
}
