/*
 * Bad input to the blocking primitives: each gets a clear error naming the
 * call and the problem, never a crash or a hang.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>

#include "sync_test.h"

static usched_t *sched;

#define EXPECT_ERR(call, err, text)                                             \
    do {                                                                        \
        ASSERT_EQ((call), -(err));                                              \
        ASSERT_STR_CONTAINS(usched_last_error(), text);                         \
    } while (0)

static void test_null(void)
{
    void *m;
    EXPECT_ERR(usched_chan_create(NULL, 0), EINVAL, "chan_create: out is NULL");
    EXPECT_ERR(usched_chan_send(NULL, NULL), EINVAL, "chan_send: chan is NULL");
    EXPECT_ERR(usched_chan_recv(NULL, &m), EINVAL, "chan_recv: chan is NULL");
    EXPECT_ERR(usched_chan_try_send(NULL, NULL), EINVAL, "chan_try_send: chan is NULL");
    EXPECT_ERR(usched_chan_try_recv(NULL, &m), EINVAL, "chan_try_recv: chan is NULL");
    EXPECT_ERR(usched_chan_recv_timeout(NULL, &m, 1), EINVAL, "chan_recv_timeout: chan is NULL");
    EXPECT_ERR(usched_chan_close(NULL), EINVAL, "chan_close: chan is NULL");
    EXPECT_ERR(usched_chan_destroy(NULL), EINVAL, "chan_destroy: chan is NULL");
    EXPECT_ERR(usched_mutex_init(NULL), EINVAL, "mutex_init: mutex is NULL");
    EXPECT_ERR(usched_mutex_lock(NULL), EINVAL, "mutex_lock: mutex is NULL");
    EXPECT_ERR(usched_mutex_trylock(NULL), EINVAL, "mutex_trylock: mutex is NULL");
    EXPECT_ERR(usched_mutex_unlock(NULL), EINVAL, "mutex_unlock: mutex is NULL");
    EXPECT_ERR(usched_mutex_destroy(NULL), EINVAL, "mutex_destroy: mutex is NULL");
    EXPECT_ERR(usched_cond_init(NULL), EINVAL, "cond_init: cond is NULL");
    EXPECT_ERR(usched_cond_wait(NULL, NULL), EINVAL, "cond_wait: cond is NULL");
    EXPECT_ERR(usched_cond_timedwait(NULL, NULL, 1), EINVAL, "cond_timedwait: cond is NULL");
    EXPECT_ERR(usched_cond_signal(NULL), EINVAL, "cond_signal: cond is NULL");
    EXPECT_ERR(usched_cond_broadcast(NULL), EINVAL, "cond_broadcast: cond is NULL");
    EXPECT_ERR(usched_cond_destroy(NULL), EINVAL, "cond_destroy: cond is NULL");
    EXPECT_ERR(usched_sem_init(NULL, 1), EINVAL, "sem_init: sem is NULL");
    EXPECT_ERR(usched_sem_wait(NULL), EINVAL, "sem_wait: sem is NULL");
    EXPECT_ERR(usched_sem_post(NULL), EINVAL, "sem_post: sem is NULL");
    EXPECT_ERR(usched_sem_destroy(NULL), EINVAL, "sem_destroy: sem is NULL");
    EXPECT_ERR(usched_wg_init(NULL), EINVAL, "wg_init: wg is NULL");
    EXPECT_ERR(usched_wg_add(NULL, 1), EINVAL, "wg_add: wg is NULL");
    EXPECT_ERR(usched_wg_done(NULL), EINVAL, "wg_done: wg is NULL");
    EXPECT_ERR(usched_wg_wait(NULL), EINVAL, "wg_wait: wg is NULL");
    EXPECT_ERR(usched_wg_destroy(NULL), EINVAL, "wg_destroy: wg is NULL");

    usched_chan_t *c;
    ASSERT_OK(usched_chan_create(&c, 1));
    EXPECT_ERR(usched_chan_recv(c, NULL), EINVAL, "chan_recv: msg is NULL");
    EXPECT_ERR(usched_chan_try_recv(c, NULL), EINVAL, "chan_try_recv: msg is NULL");
    EXPECT_ERR(usched_chan_recv_timeout(c, NULL, 1), EINVAL, "chan_recv_timeout: msg is NULL");
    ASSERT_OK(usched_chan_destroy(c));
    EXPECT_ERR(usched_chan_create(&c, (size_t)1 << 50), EINVAL, "capacity");
    ASSERT(c == NULL);
}

static void test_uninitialised_and_destroyed(void)
{
    usched_mutex_t m = {0};
    usched_cond_t c = {0};
    usched_sem_t s = {0};
    usched_wg_t w = {0};
    EXPECT_ERR(usched_mutex_lock(&m), EINVAL, "mutex_lock: the mutex is not initialised");
    EXPECT_ERR(usched_cond_signal(&c), EINVAL, "cond_signal: the cond is not initialised");
    EXPECT_ERR(usched_sem_post(&s), EINVAL, "sem_post: the sem is not initialised");
    EXPECT_ERR(usched_wg_add(&w, 1), EINVAL, "wg_add: the wg is not initialised");

    ASSERT_OK(usched_mutex_init(&m));
    ASSERT_OK(usched_mutex_destroy(&m));
    EXPECT_ERR(usched_mutex_lock(&m), EINVAL, "mutex_lock: the mutex was destroyed");
    EXPECT_ERR(usched_mutex_destroy(&m), EINVAL, "was destroyed");
    ASSERT_OK(usched_cond_init(&c));
    ASSERT_OK(usched_cond_destroy(&c));
    EXPECT_ERR(usched_cond_broadcast(&c), EINVAL, "cond_broadcast: the cond was destroyed");
    ASSERT_OK(usched_sem_init(&s, 0));
    ASSERT_OK(usched_sem_destroy(&s));
    EXPECT_ERR(usched_sem_wait(&s), EINVAL, "sem_wait: the sem was destroyed");
    ASSERT_OK(usched_wg_init(&w));
    ASSERT_OK(usched_wg_destroy(&w));
    EXPECT_ERR(usched_wg_wait(&w), EINVAL, "wg_wait: the wg was destroyed");
}

static usched_mutex_t shared;

static void *other_thread_unlock(void *arg)
{
    (void)arg;
    EXPECT_ERR(usched_mutex_unlock(&shared), EPERM, "another fiber or thread does");
    return NULL;
}

static void fiber_unlock(void *arg)
{
    (void)arg;
    EXPECT_ERR(usched_mutex_unlock(&shared), EPERM, "mutex_unlock: the caller does not hold");
    EXPECT_ERR(usched_mutex_trylock(&shared), EBUSY, "");
}

static void test_mutex_misuse(void)
{
    ASSERT_OK(usched_mutex_init(&shared));
    EXPECT_ERR(usched_mutex_unlock(&shared), EPERM, "it is unlocked");
    ASSERT_OK(usched_mutex_lock(&shared));
    EXPECT_ERR(usched_mutex_lock(&shared), EDEADLK, "holds the mutex already");
    EXPECT_ERR(usched_mutex_destroy(&shared), EBUSY, "mutex_destroy: the mutex is locked");
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, other_thread_unlock, NULL), 0);
    pthread_join(th, NULL);
    usched_task_t *t;
    ASSERT_OK(usched_spawn(sched, &t, fiber_unlock, NULL));
    ASSERT_OK(usched_join(t));
    ASSERT_OK(usched_mutex_unlock(&shared));
    ASSERT_OK(usched_mutex_destroy(&shared));

    /* cond_wait without holding the mutex */
    usched_cond_t c;
    ASSERT_OK(usched_cond_init(&c));
    ASSERT_OK(usched_mutex_init(&shared));
    EXPECT_ERR(usched_cond_wait(&c, &shared), EPERM, "cond_wait: the caller does not hold");
    EXPECT_ERR(usched_cond_wait(&c, NULL), EINVAL, "cond_wait: mutex is NULL");
    ASSERT_OK(usched_cond_destroy(&c));
    ASSERT_OK(usched_mutex_destroy(&shared));
}

static void test_counts(void)
{
    usched_wg_t w;
    ASSERT_OK(usched_wg_init(&w));
    EXPECT_ERR(usched_wg_done(&w), EINVAL, "wg_done: the count would become negative (0-1)");
    ASSERT_OK(usched_wg_add(&w, 2));
    EXPECT_ERR(usched_wg_add(&w, -3), EINVAL, "wg_add: the count would become negative (2-3)");
    ASSERT_OK(usched_wg_done(&w)); /* unchanged by the failed add: 2 -> 1 */
    ASSERT_OK(usched_wg_done(&w));
    ASSERT_OK(usched_wg_wait(&w));
    ASSERT_OK(usched_wg_destroy(&w));

    usched_sem_t s;
    ASSERT_OK(usched_sem_init(&s, UINT_MAX));
    EXPECT_ERR(usched_sem_post(&s), EOVERFLOW, "sem_post: the value would exceed");
    ASSERT_OK(usched_sem_wait(&s));
    ASSERT_OK(usched_sem_post(&s));
    ASSERT_OK(usched_sem_destroy(&s));
}

int main(void)
{
    sched = sync_test_start(NULL);
    test_null();
    test_uninitialised_and_destroyed();
    test_mutex_misuse();
    test_counts();
    ASSERT_OK(usched_destroy(sched));
    printf("ok\n");
    return 0;
}
