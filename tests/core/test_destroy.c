/*
 * Shutdown: destroy waits for running fibers; fibers blocked forever are
 * detected (-EDEADLK, never a hang) and outside joiners of them get
 * -ECANCELED.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "core/core.h"
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

/* Waits until the outside joiner is on s->owaiters, the list destroy
 * cancels. Before that point destroy would free the task under a thread
 * that is still about to look at it, so no fixed sleep will do on a loaded
 * machine. Gives up (failing, with a message) if the join returned early or
 * never registered. */
static void wait_joiner_registered(usched_t *s)
{
    double deadline = test_now() + 30.0;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        int registered = s->owaiters != NULL;
        pthread_mutex_unlock(&s->lock);
        if (registered) return;
        int rc = atomic_load(&join_rc);
        if (rc != 1) TEST_FAIL_("usched_join returned %d before destroy", rc);
        if (test_now() > deadline)
            TEST_FAIL_("the outside joiner did not register within 30 s");
        usleep(1000);
    }
}

int main(void)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_start(s));
    ASSERT_OK(usched_spawn(s, NULL, slow, NULL));
    ASSERT_OK(usched_destroy(s)); /* waits for the running fiber */
    int slow_finished = atomic_load(&finished);
    ASSERT_EQ(slow_finished, 1);

    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:3 pu:1"));
    ASSERT_OK(usched_start(s));
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s, &t, blocked_forever, NULL));
    pthread_t th;
    pthread_create(&th, NULL, joiner, t);
    wait_joiner_registered(s);
    ASSERT_EQ(usched_destroy(s), -EDEADLK);
    pthread_join(th, NULL);
    int join_result = atomic_load(&join_rc);
    ASSERT_EQ(join_result, -ECANCELED);
    printf("ok\n");
    return 0;
}
