/*
 * Shutdown: destroy waits for running fibers; fibers blocked forever are
 * detected (-EDEADLK, never a hang) and outside joiners of them get
 * -ECANCELED.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "core/sched.h"
#include "test.h"
#include "usched.h"

static _Atomic int finished;

static void slow(void *arg)
{
    (void)arg;
    usleep(200 * 1000);
    atomic_store(&finished, 1);
}

static void blocked_forever(void *arg)
{
    (void)arg;
    usched__block(NULL, NULL);
    TEST_FAIL_("a fiber blocked forever was resumed");
}

static _Atomic int join_rc = 1;
static void *joiner(void *arg)
{
    atomic_store(&join_rc, usched_join(arg));
    return NULL;
}

int main(void)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_start(s));
    ASSERT_OK(usched_spawn(s, NULL, slow, NULL));
    ASSERT_OK(usched_destroy(s)); /* waits for the running fiber */
    ASSERT_EQ(atomic_load(&finished), 1);

    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:3 pu:1"));
    ASSERT_OK(usched_start(s));
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s, &t, blocked_forever, NULL));
    pthread_t th;
    pthread_create(&th, NULL, joiner, t);
    usleep(100 * 1000);
    ASSERT_EQ(usched_destroy(s), -EDEADLK);
    pthread_join(th, NULL);
    ASSERT_EQ(atomic_load(&join_rc), -ECANCELED);
    printf("ok\n");
    return 0;
}
