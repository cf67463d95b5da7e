/*
 * Documented behaviour of the public API that the other tests do not reach:
 *  - usched_self_id: 0 outside fibers, distinct and non-zero inside;
 *  - usched_stat_desc: a description for every counter, NULL out of range;
 *  - usched_wait and usched_destroy from a fiber of the same scheduler:
 *    -EDEADLK with a detail;
 *  - bad USCHED_CPUS: usched_create fails with -EINVAL naming the variable;
 *    bad USCHED_TOPOLOGY (or CPUs the topology lacks): usched_start, which
 *    loads the topology, fails naming the input;
 *  - usched_knob_get with NULL arguments or an unknown knob: -EINVAL;
 *  - usched_topo_print: 0, -ENOENT, -EINVAL, and nothing printed on failure;
 *  - the "stack_size" setting: fibers get stacks of that size (two live
 *    fibers' frames lie at least that far apart, and a fiber may use most
 *    of it);
 *  - the "pin" setting: pinned workers run on one CPU each, unpinned ones
 *    keep the process's CPUs;
 *  - FP modes: every new fiber starts with the rounding mode of the thread
 *    that called usched_start, whatever its spawner or the fiber that ran
 *    before it on that CPU set; a fiber keeps the mode it sets across
 *    switches, and no other fiber or thread sees it.
 */
#include <errno.h>
#include <fenv.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"
#include "usched.h"

static void expect_err(int rc, int err, const char *needle, const char *what)
{
    if (rc != -err) TEST_FAIL_("%s = %d (%s), expected %d", what, rc, usched_last_error(), -err);
    if (needle) ASSERT_STR_CONTAINS(usched_last_error(), needle);
}

static usched_t *started(const char *key, const char *value)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    if (key) ASSERT_OK(usched_set(s, key, value));
    ASSERT_OK(usched_start(s));
    return s;
}

/* ---- usched_self_id ---------------------------------------------------------- */

enum { NIDS = 64 };
static uint64_t ids[NIDS];

static void record_id(void *arg)
{
    uint64_t id = usched_self_id();
    usched_yield(); /* the id is the fiber's, wherever it resumes */
    ASSERT_EQ_U(usched_self_id(), id);
    ids[(intptr_t)arg] = id;
}

static void test_self_id(void)
{
    ASSERT_EQ_U(usched_self_id(), 0);
    usched_t *s = started(NULL, NULL);
    usched_task_t *t[NIDS];
    for (intptr_t i = 0; i < NIDS; i++) ASSERT_OK(usched_spawn(s, &t[i], record_id, (void *)i));
    for (int i = 0; i < NIDS; i++) ASSERT_OK(usched_join(t[i]));
    for (int i = 0; i < NIDS; i++) {
        if (!ids[i]) TEST_FAIL_("fiber %d: usched_self_id() = 0 inside a fiber", i);
        for (int j = 0; j < i; j++)
            if (ids[i] == ids[j]) TEST_FAIL_("fibers %d and %d share id %llu", j, i, (unsigned long long)ids[i]);
    }
    ASSERT_OK(usched_destroy(s));
}

/* ---- usched_stat_desc --------------------------------------------------------- */

static void test_stat_desc(void)
{
    int n = usched_stat_count();
    ASSERT_GT(n, 0);
    for (int i = 0; i < n; i++) {
        const char *name = usched_stat_name(i), *desc = usched_stat_desc(i);
        if (!name || !*name) TEST_FAIL_("counter %d has no name", i);
        if (!desc || !*desc) TEST_FAIL_("counter %s has no description", name);
        ASSERT(strcmp(desc, name) != 0);
        for (int j = 0; j < i; j++)
            if (!strcmp(usched_stat_name(j), name)) TEST_FAIL_("counters %d and %d are both %s", j, i, name);
    }
    ASSERT(usched_stat_desc(-1) == NULL);
    ASSERT(usched_stat_desc(n) == NULL);
    ASSERT(usched_stat_name(n) == NULL);
}

/* ---- wait and destroy from a fiber -------------------------------------------- */

static void wait_and_destroy_self(void *arg)
{
    usched_t *s = arg;
    expect_err(usched_wait(s), EDEADLK, "wait: called from a fiber of the same scheduler", "usched_wait");
    expect_err(usched_destroy(s), EDEADLK, "destroy: called from a fiber of the same scheduler",
               "usched_destroy");
}

static void test_from_fiber(void)
{
    usched_t *s = started(NULL, NULL);
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s, &t, wait_and_destroy_self, s));
    ASSERT_OK(usched_join(t));
    ASSERT_OK(usched_destroy(s)); /* the failed calls left it whole */
}

/* ---- the environment ------------------------------------------------------------ */

/* A topology input and CPU list that must fail with err; `extra` is the
 * text the detail must contain (environment) or the format (topo_print). */
struct bad_topo {
    const char *topology, *cpus, *extra;
    int err;
};

static void test_env(void)
{
    static const char *const bad_cpus[] = {"0-", "x", ""};
    for (size_t i = 0; i < sizeof bad_cpus / sizeof bad_cpus[0]; i++) {
        ASSERT_EQ(setenv("USCHED_CPUS", bad_cpus[i], 1), 0);
        usched_t *s = (usched_t *)1;
        int rc = usched_create(&s);
        if (rc != -EINVAL) TEST_FAIL_("USCHED_CPUS='%s': usched_create = %d, expected -EINVAL", bad_cpus[i], rc);
        ASSERT(s == NULL);
        ASSERT_STR_CONTAINS(usched_last_error(), "USCHED_CPUS: ");
    }
    ASSERT_EQ(unsetenv("USCHED_CPUS"), 0);

    static const struct bad_topo bad[] = {
        {"pack:0 pu:zero", NULL, "pack:0 pu:zero", EINVAL},
        {"/nonexistent/usched-topology", NULL, "/nonexistent/usched-topology", ENOENT},
        {"pack:1 core:2 pu:1", "0-5", "cpus", EINVAL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_EQ(setenv("USCHED_TOPOLOGY", bad[i].topology, 1), 0);
        if (bad[i].cpus) ASSERT_EQ(setenv("USCHED_CPUS", bad[i].cpus, 1), 0);
        usched_t *s;
        ASSERT_OK(usched_create(&s));
        expect_err(usched_start(s), bad[i].err, bad[i].extra, "usched_start with a bad USCHED_TOPOLOGY");
        ASSERT_OK(usched_destroy(s));
        ASSERT_EQ(unsetenv("USCHED_TOPOLOGY"), 0);
        ASSERT_EQ(unsetenv("USCHED_CPUS"), 0);
    }

    /* good values are applied */
    ASSERT_EQ(setenv("USCHED_TOPOLOGY", "pack:1 core:3 pu:2", 1), 0);
    ASSERT_EQ(setenv("USCHED_CPUS", "0-3", 1), 0);
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_start(s));
    ASSERT_EQ(usched_ncpus(s), 4);
    ASSERT_OK(usched_destroy(s));
    ASSERT_EQ(unsetenv("USCHED_TOPOLOGY"), 0);
    ASSERT_EQ(unsetenv("USCHED_CPUS"), 0);
}

/* ---- knob_get ------------------------------------------------------------------- */

static void test_knob_get(void)
{
    usched_t *s;
    int64_t v = -1;
    ASSERT_OK(usched_create(&s));
    expect_err(usched_knob_get(NULL, "smt", &v), EINVAL, "knob_get: NULL argument", "knob_get(NULL s)");
    expect_err(usched_knob_get(s, NULL, &v), EINVAL, "knob_get: NULL argument", "knob_get(NULL name)");
    expect_err(usched_knob_get(s, "smt", NULL), EINVAL, "knob_get: NULL argument", "knob_get(NULL value)");
    expect_err(usched_knob_get(s, "nosuch", &v), EINVAL, "unknown knob 'nosuch'", "knob_get(nosuch)");
    ASSERT_EQ(v, -1);
    ASSERT_OK(usched_knob_get(s, "smt", &v));
    ASSERT(v == 0 || v == 1);
    ASSERT_OK(usched_destroy(s));
}

/* ---- usched_topo_print ------------------------------------------------------------ */

/* Runs usched_topo_print into a memory stream: its return code, and what it
 * printed in *out (caller frees). */
static int topo_print(const char *input, const char *cpus, const char *format, char **out)
{
    size_t len = 0;
    *out = NULL;
    FILE *f = open_memstream(out, &len);
    ASSERT(f);
    int rc = usched_topo_print(f, input, cpus, format);
    ASSERT_EQ(fclose(f), 0);
    return rc;
}

static void test_topo_print(void)
{
    static const char *const formats[] = {"tree", "dfly", "json"};
    char *out;
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        ASSERT_OK(topo_print("pack:2 core:2 pu:2", NULL, formats[i], &out));
        ASSERT_GT((long)strlen(out), 0);
        free(out);
    }
    ASSERT_OK(topo_print("pack:2 core:2 pu:2", "0-3", "json", &out));
    free(out);
    static const struct bad_topo bad[] = {
        {"/nonexistent/usched-topology", NULL, "tree", ENOENT},
        {"pack:0 pu:zero", NULL, "tree", EINVAL},
        {"pack:2 core:2 pu:2", "0-99", "tree", EINVAL},
        {"pack:2 core:2 pu:2", "3-1", "tree", EINVAL},
        {"pack:2 core:2 pu:2", NULL, "yaml", EINVAL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = topo_print(bad[i].topology, bad[i].cpus, bad[i].extra, &out);
        if (rc != -bad[i].err)
            TEST_FAIL_("topo_print(%s, %s, %s) = %d (%s), expected %d", bad[i].topology,
                       bad[i].cpus ? bad[i].cpus : "NULL", bad[i].extra, rc, usched_last_error(), -bad[i].err);
        ASSERT_GT((long)strlen(usched_last_error()), 0);
        ASSERT_STR_EQ(out, ""); /* nothing printed on failure */
        free(out);
    }
}

/* ---- stack_size ------------------------------------------------------------------- */

enum { NSTACK = 4 };
static uintptr_t frame[NSTACK];
static _Atomic int stack_arrived;
static size_t stack_use;

/* Records a frame address, uses stack_use bytes of stack, and stays alive
 * until every fiber of the set has recorded its frame. */
static __attribute__((noinline)) void stack_fiber(void *arg)
{
    volatile char local = 0;
    frame[(intptr_t)arg] = (uintptr_t)&local;
    char *big = __builtin_alloca(stack_use);
    memset(big, 1, stack_use);
    __asm__ volatile("" : : "r"(big) : "memory");
    atomic_fetch_add(&stack_arrived, 1);
    while (atomic_load(&stack_arrived) < NSTACK) usched_yield();
}

static void test_stack_size(void)
{
    static const struct {
        const char *value;
        size_t bytes;
    } sizes[] = {{"256k", 256 * 1024}, {"1m", 1024 * 1024}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        usched_t *s;
        ASSERT_OK(usched_create(&s));
        ASSERT_OK(usched_set(s, "stack_size", sizes[k].value));
        ASSERT_OK(usched_set(s, "topology", "pack:1 core:1 pu:1")); /* one worker: all alive at once */
        ASSERT_OK(usched_start(s));
        stack_use = sizes[k].bytes / 2; /* more than the default 64 KiB stack holds */
        atomic_store(&stack_arrived, 0);
        usched_task_t *t[NSTACK];
        for (intptr_t i = 0; i < NSTACK; i++) ASSERT_OK(usched_spawn(s, &t[i], stack_fiber, (void *)i));
        for (int i = 0; i < NSTACK; i++) ASSERT_OK(usched_join(t[i]));
        /* the same frame in live fibers' stacks: at least a stack apart */
        for (int i = 0; i < NSTACK; i++)
            for (int j = 0; j < i; j++) {
                uintptr_t d = frame[i] > frame[j] ? frame[i] - frame[j] : frame[j] - frame[i];
                if (d < sizes[k].bytes)
                    TEST_FAIL_("stack_size %s: fibers %d and %d have frames %zu bytes apart", sizes[k].value, j,
                               i, (size_t)d);
            }
        ASSERT_OK(usched_destroy(s));
    }
}

/* ---- pin ---------------------------------------------------------------------------- */

static _Atomic int affinity_count, affinity_has_cpu;

static void affinity_fiber(void *arg)
{
    (void)arg;
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    atomic_store(&affinity_count, CPU_COUNT(&set));
    int cpu = sched_getcpu();
    atomic_store(&affinity_has_cpu, cpu >= 0 && CPU_ISSET(cpu, &set));
}

static int worker_affinity(const char *pin)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "pin", pin));
    /* The monitor widens a contended pinned worker's affinity within its LLC
     * for the episode (contend_pin, monitor.c C4): on a loaded machine, or
     * under qemu, the fiber could then see both CPUs. This case is about
     * the pin itself. */
    ASSERT_OK(usched_set(s, "knobs", "contend_pin=0"));
    ASSERT_OK(usched_start(s));
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s, &t, affinity_fiber, NULL));
    ASSERT_OK(usched_join(t));
    ASSERT_OK(usched_destroy(s));
    ASSERT_EQ(atomic_load(&affinity_has_cpu), 1);
    return atomic_load(&affinity_count);
}

static void test_pin(void)
{
    cpu_set_t mine;
    ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
    ASSERT_EQ(worker_affinity("1"), 1);
    ASSERT_EQ(worker_affinity("0"), CPU_COUNT(&mine));
}

/* ---- FP modes ------------------------------------------------------------------ */

struct fp_probe {
    int spawner_mode; /* what the spawner sets before spawning */
    int child_seen, spawner_seen;
};

static void fp_child(void *arg)
{
    struct fp_probe *p = arg;
    p->child_seen = fegetround();
}

/* Sets its own mode, spawns a child on this CPU (one worker: the child's
 * context is made while the spawner is switched out, in the spawner's
 * leave), joins it, and checks that its own mode survived. */
static void fp_spawner(void *arg)
{
    struct fp_probe *p = arg;
    ASSERT_EQ(fesetround(p->spawner_mode), 0);
    usched_task_t *t;
    ASSERT_OK(usched_spawn(usched_self(), &t, fp_child, p));
    usched_yield();
    ASSERT_OK(usched_join(t));
    p->spawner_seen = fegetround();
}

static void fp_case(int start_mode, int spawner_mode)
{
    ASSERT_EQ(fesetround(start_mode), 0);
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:1 pu:1"));
    ASSERT_OK(usched_start(s));
    ASSERT_EQ(fesetround(FE_TONEAREST), 0); /* after start: changes nothing for fibers */
    struct fp_probe p = {.spawner_mode = spawner_mode, .child_seen = -1, .spawner_seen = -1};
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s, &t, fp_spawner, &p));
    ASSERT_OK(usched_join(t));
    ASSERT_OK(usched_destroy(s));
    ASSERT_EQ(fegetround(), FE_TONEAREST); /* this thread's own mode */
    ASSERT_EQ(p.child_seen, start_mode);   /* not the spawner's */
    ASSERT_EQ(p.spawner_seen, spawner_mode);
}

static void test_fp_modes(void)
{
    fp_case(FE_TONEAREST, FE_DOWNWARD);
    fp_case(FE_UPWARD, FE_TOWARDZERO);
    ASSERT_EQ(fesetround(FE_TONEAREST), 0);
}

int main(void)
{
    /* the per-policy reruns set USCHED_POLICY; the rest of the environment
     * is the test's own */
    unsetenv("USCHED_TOPOLOGY");
    unsetenv("USCHED_CPUS");
    unsetenv("USCHED_KNOBS");
    test_self_id();
    test_stat_desc();
    test_from_fiber();
    test_env();
    test_knob_get();
    test_topo_print();
    test_stack_size();
    test_pin();
    test_fp_modes();
    printf("ok\n");
    return 0;
}
