/* Bad input and lifecycle errors: each a negative errno with a detail, never a crash. */
#include <errno.h>
#include <stdlib.h>

#include "test.h"
#include "usched.h"

static void nop(void *arg)
{
    (void)arg;
}

static void expect_set(usched_t *s, const char *key, const char *val, int err, const char *needle)
{
    int rc = usched_set(s, key, val);
    if (rc != -err)
        TEST_FAIL_("usched_set(%s, %s) = %d (%s), expected %d", key, val ? val : "NULL", rc,
                   usched_last_error(), -err);
    if (needle) ASSERT_STR_CONTAINS(usched_last_error(), needle);
}

static void self_join(void *arg)
{
    usched_task_t **me = arg;
    while (!*(usched_task_t *volatile *)me) usched_yield();
    ASSERT_EQ(usched_join(*me), -EDEADLK);
}

int main(void)
{
    usched_t *s;
    ASSERT_EQ(usched_create(NULL), -EINVAL);
    ASSERT_OK(usched_create(&s));

    /* wrong lifecycle state: before start */
    ASSERT_EQ(usched_spawn(s, NULL, nop, NULL), -ESRCH);
    ASSERT_EQ(usched_ncpus(s), -ESRCH);
    ASSERT_EQ(usched_wait(s), -ESRCH);

    /* every key with bad values */
    expect_set(s, "policy", "nosuch", EINVAL, "nosuch");
    expect_set(s, "policy", NULL, EINVAL, "policy");
    expect_set(s, "knobs", "nosuch=1", EINVAL, "nosuch");
    expect_set(s, "knobs", "smt=2", EINVAL, "smt");
    expect_set(s, "knobs", "smt=x", EINVAL, "smt");
    expect_set(s, "knobs", "smt", EINVAL, "smt");
    expect_set(s, "knobs", "scope=galaxy", EINVAL, "scope");
    expect_set(s, "knobs", "spin_us=-1", EINVAL, "spin_us");
    expect_set(s, "knobs", NULL, EINVAL, "knobs");
    expect_set(s, "stack_size", "12", EINVAL, "stack_size");
    expect_set(s, "stack_size", "64q", EINVAL, "64q");
    expect_set(s, "stack_size", "-64k", EINVAL, "stack_size");
    expect_set(s, "stack_size", "", EINVAL, "stack_size");
    expect_set(s, "stack_size", "99999m", EINVAL, "stack_size");
    expect_set(s, "pin", "2", EINVAL, "pin");
    expect_set(s, "pin", NULL, EINVAL, "pin");
    expect_set(s, "cpus", "", EINVAL, "cpus");
    expect_set(s, "cpus", "1-", EINVAL, NULL);
    expect_set(s, "cpus", "a", EINVAL, NULL);
    expect_set(s, "nosuchkey", "1", ENOENT, "nosuchkey");
    ASSERT_EQ(usched_set(NULL, "policy", "usched"), -EINVAL);
    ASSERT_EQ(usched_set(s, NULL, "x"), -EINVAL);

    /* good values are accepted */
    ASSERT_OK(usched_set(s, "knobs", "smt=0,affine=1,scope=llc"));
    ASSERT_OK(usched_set(s, "stack_size", "128k"));
    ASSERT_OK(usched_set(s, "pin", "0"));

    /* a topology that cannot load fails start, and the scheduler stays usable */
    ASSERT_OK(usched_set(s, "topology", "/nonexistent/topology/path"));
    ASSERT_LT(usched_start(s), 0);
    ASSERT_STR_CONTAINS(usched_last_error(), "/nonexistent/topology/path");
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:4 pu:1"));
    ASSERT_OK(usched_set(s, "cpus", "0-9"));
    ASSERT_LT(usched_start(s), 0); /* cpus beyond the topology */
    ASSERT_OK(usched_set(s, "cpus", "1-2"));
    ASSERT_OK(usched_start(s));
    ASSERT_EQ(usched_ncpus(s), 2);

    /* after start */
    ASSERT_EQ(usched_start(s), -EBUSY);
    expect_set(s, "policy", "usched", EBUSY, NULL);
    expect_set(s, "topology", "", EBUSY, NULL);
    expect_set(s, "stack_size", "64k", EBUSY, NULL);
    ASSERT_OK(usched_set(s, "knobs", "smt=1")); /* runtime knob */

    ASSERT_EQ(usched_spawn(s, NULL, NULL, NULL), -EINVAL);
    ASSERT_EQ(usched_spawn(NULL, NULL, nop, NULL), -EINVAL);
    ASSERT_EQ(usched_spawn_on(s, NULL, 2, nop, NULL), -EINVAL);
    ASSERT_EQ(usched_spawn_on(s, NULL, -1, nop, NULL), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "-1");

    /* joining twice, joining NULL, joining a detached task's handle */
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s, &t, nop, NULL));
    ASSERT_OK(usched_join(t));
    ASSERT_EQ(usched_join(t), -EINVAL);
    ASSERT_EQ(usched_join(NULL), -EINVAL);

    /* a fiber joining itself */
    static usched_task_t *me;
    ASSERT_OK(usched_spawn(s, &me, self_join, &me));
    ASSERT_OK(usched_wait(s));
    ASSERT_OK(usched_join(me));

    uint64_t v;
    ASSERT_EQ(usched_stat(s, "nosuch", &v), -ENOENT);
    ASSERT_EQ(usched_stat(s, "spawns", NULL), -EINVAL);
    ASSERT_OK(usched_stat(s, "spawns_outside", &v));
    ASSERT_EQ_U(v, 2); /* t and me: the refused spawns above count nothing */
    ASSERT_OK(usched_destroy(s));
    ASSERT_EQ(usched_destroy(NULL), -EINVAL);

    /* bad environment defaults make create fail with the variable named */
    setenv("USCHED_KNOBS", "smt=7", 1);
    ASSERT_EQ(usched_create(&s), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "USCHED_KNOBS");
    unsetenv("USCHED_KNOBS");
    setenv("USCHED_POLICY", "bogus", 1);
    ASSERT_EQ(usched_create(&s), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "bogus");
    unsetenv("USCHED_POLICY");

    ASSERT_STR_EQ(usched_strerror(-EPIPE), "channel closed");
    /* a code of its own has usched's text; any other is the C library's */
    /* copies: glibc builds the text of an unknown code in a buffer that the
     * next strerror call frees */
    char want[64], neg[64];
    snprintf(want, sizeof want, "%s", strerror(9999));
    snprintf(neg, sizeof neg, "%s", usched_strerror(-9999));
    ASSERT_STR_EQ(neg, want);
    ASSERT_STR_CONTAINS(neg, "9999");
    ASSERT_STR_EQ(usched_strerror(9999), neg);
    ASSERT_STR_EQ(usched_strerror(0), "success");
    printf("ok\n");
    return 0;
}
