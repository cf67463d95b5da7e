/*
 * A broken policy loses no fiber: a test-only policy registered with
 * usched_policy_register answers CPUs out of range most of the time. The
 * core replaces each such answer by its fallback, counts it (pol_fallback)
 * and warns once on stderr. Also: registration refuses bad policies.
 */
#include <errno.h>
#include <fcntl.h>

#include "capture.h"
#include "ptest.h"

static _Atomic unsigned calls;

static void broken_select(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                          struct usched_select_result *out)
{
    unsigned n = atomic_fetch_add(&calls, 1);
    int ncpus = usched_pol_ncpus(ctx);
    switch (n % 4) {
    case 0: out->cpu = -7; break;
    case 1: out->cpu = ncpus + 3; break;
    case 2: out->cpu = a->waker_cpu >= 0 ? a->waker_cpu : 0; out->reason = 999; break;
    default: out->cpu = (int)(n % (unsigned)ncpus); out->reason = USCHED_REASON_STACKED; break;
    }
}

static const struct usched_ops broken = {
    .name = "broken",
    .brief = "test only: answers CPUs out of range",
    .select_cpu = broken_select,
};

static _Atomic long count;

static void leaf(void *arg)
{
    (void)arg;
    atomic_fetch_add(&count, 1);
}

struct pair {
    struct pt_mbox mb[2];
    long rounds;
};

static void side(void *arg)
{
    struct pair *p = *(struct pair **)arg;
    int me = ((long *)arg)[1] != 0;
    for (long i = 0; i < p->rounds; i++) {
        if (me == 1 || i > 0) pt_mb_wait(&p->mb[me]);
        atomic_fetch_add(&count, 1);
        if (!(me == 1 && i == p->rounds - 1)) pt_mb_post(&p->mb[1 - me], USCHED_SEL_SYNC);
    }
}

static void spawner(void *arg)
{
    long n = (long)arg;
    usched_task_t *t[64];
    for (long i = 0; i < n; i += 64) {
        int k = 0;
        for (; k < 64 && i + k < n; k++) ASSERT_OK(usched_spawn(usched_self(), &t[k], leaf, NULL));
        for (int j = 0; j < k; j++) ASSERT_OK(usched_join(t[j]));
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* registration errors */
    ASSERT_EQ(usched_policy_register(NULL), -EINVAL);
    struct usched_ops bad = broken;
    bad.name = "has space";
    ASSERT_EQ(usched_policy_register(&bad), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "has space");
    bad.name = "usched";
    ASSERT_EQ(usched_policy_register(&bad), -EEXIST);
    bad.name = "fat";
    bad.task_state_size = USCHED_TASK_STATE_MAX + 1;
    ASSERT_EQ(usched_policy_register(&bad), -EINVAL);
    ASSERT_OK(usched_policy_register(&broken));
    ASSERT_EQ(usched_policy_register(&broken), -EEXIST);
    bool listed = false;
    for (int i = 0; i < usched_policy_count(); i++) listed |= !strcmp(usched_policy_name(i), "broken");
    ASSERT(listed);

    /* capture stderr to count the warnings */
    struct capture cap;
    capture_begin(&cap);

    usched_t *s = pt_start("broken", "pack:2 l3:1 l2:6 core:1 pu:2", "spin_us=0");
    long n = test_scale(5000);
    for (long i = 0; i < n; i++) ASSERT_OK(usched_spawn(s, NULL, leaf, NULL));
    usched_task_t *sp;
    ASSERT_OK(usched_spawn(s, &sp, spawner, (void *)n));
    struct pair p = {.rounds = test_scale(2000)};
    long a0[2] = {(long)&p, 0}, a1[2] = {(long)&p, 1};
    usched_task_t *t0, *t1;
    ASSERT_OK(usched_spawn(s, &t1, side, a1));
    ASSERT_OK(usched_spawn(s, &t0, side, a0));
    ASSERT_OK(usched_join(sp));
    ASSERT_OK(usched_join(t0));
    ASSERT_OK(usched_join(t1));
    ASSERT_OK(usched_wait(s));
    uint64_t fb = pt_stat(s, "pol_fallback"), unknown = pt_stat(s, "place_fallback");
    ASSERT_OK(usched_destroy(s));

    char buf[4096];
    capture_end(&cap, buf, sizeof buf);
    int warnings = capture_count(buf, "fallback (warned once)");
    printf("fibers=%ld pol_fallback=%llu place_fallback=%llu warnings=%d\nstderr: %s", atomic_load(&count),
           (unsigned long long)fb, (unsigned long long)unknown, warnings, buf);
    ASSERT_EQ(atomic_load(&count), 2 * n + 2 * p.rounds);
    ASSERT_GT(fb, 0);
    ASSERT_GE(unknown, fb);
    ASSERT_EQ(warnings, 1);
    ASSERT_STR_CONTAINS(buf, "broken");
    printf("ok\n");
    return 0;
}
