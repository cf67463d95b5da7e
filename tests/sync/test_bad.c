/*
 * Bad input to the blocking primitives: each gets a clear error naming the
 * call and the problem, never a crash or a hang.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

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

    /* cond_wait and cond_timedwait without holding the mutex */
    usched_cond_t c;
    ASSERT_OK(usched_cond_init(&c));
    ASSERT_OK(usched_mutex_init(&shared));
    EXPECT_ERR(usched_cond_wait(&c, &shared), EPERM, "cond_wait: the caller does not hold");
    EXPECT_ERR(usched_cond_wait(&c, NULL), EINVAL, "cond_wait: mutex is NULL");
    EXPECT_ERR(usched_cond_timedwait(&c, &shared, 1000000), EPERM, "cond_timedwait: the caller does not hold");
    EXPECT_ERR(usched_cond_timedwait(&c, NULL, 1000000), EINVAL, "cond_timedwait: mutex is NULL");
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

static void test_closed_channel(void)
{
    usched_chan_t *c;
    ASSERT_OK(usched_chan_create(&c, 2));
    ASSERT_OK(usched_chan_try_send(c, (void *)1));
    ASSERT_OK(usched_chan_close(c));
    EXPECT_ERR(usched_chan_try_send(c, (void *)2), EPIPE, "chan_try_send");
    EXPECT_ERR(usched_chan_send(c, (void *)2), EPIPE, "chan_send");
    void *m = NULL;
    ASSERT_OK(usched_chan_try_recv(c, &m)); /* what was sent before the close still arrives */
    ASSERT_PTR_EQ(m, (void *)1);
    ASSERT_EQ(usched_chan_try_recv(c, &m), -EPIPE);
    ASSERT_OK(usched_chan_destroy(c));
}

/* ---- destroy while waited on: -EBUSY, and the waiter is unharmed ------------- */

static usched_mutex_t dw_mutex;
static usched_cond_t dw_cond;
static usched_sem_t dw_sem;
static usched_wg_t dw_wg;
static _Atomic int dw_cond_go;

static void cond_waiter(void *arg)
{
    (void)arg;
    ASSERT_OK(usched_mutex_lock(&dw_mutex));
    while (!atomic_load(&dw_cond_go)) ASSERT_OK(usched_cond_wait(&dw_cond, &dw_mutex));
    ASSERT_OK(usched_mutex_unlock(&dw_mutex));
}

static void sem_waiter(void *arg)
{
    (void)arg;
    ASSERT_OK(usched_sem_wait(&dw_sem));
}

static void wg_waiter(void *arg)
{
    (void)arg;
    ASSERT_OK(usched_wg_wait(&dw_wg));
}

/* Waits until q holds one waiter (its count is the waiters linked). */
static void wait_linked(const struct usched__waitq *q)
{
    WAIT_UNTIL(__atomic_load_n(&q->nwaiters, __ATOMIC_ACQUIRE) == 1);
}

static int cond_destroy(void) { return usched_cond_destroy(&dw_cond); }
static int sem_destroy(void) { return usched_sem_destroy(&dw_sem); }
static int wg_destroy(void) { return usched_wg_destroy(&dw_wg); }

static void cond_release(void)
{
    ASSERT_OK(usched_mutex_lock(&dw_mutex));
    atomic_store(&dw_cond_go, 1);
    ASSERT_OK(usched_cond_signal(&dw_cond));
    ASSERT_OK(usched_mutex_unlock(&dw_mutex));
}
static void sem_release(void) { ASSERT_OK(usched_sem_post(&dw_sem)); }
static void wg_release(void) { ASSERT_OK(usched_wg_done(&dw_wg)); }

static void test_destroy_while_waited_on(void)
{
    ASSERT_OK(usched_mutex_init(&dw_mutex));
    ASSERT_OK(usched_cond_init(&dw_cond));
    ASSERT_OK(usched_sem_init(&dw_sem, 0));
    ASSERT_OK(usched_wg_init(&dw_wg));
    ASSERT_OK(usched_wg_add(&dw_wg, 1));
    const struct {
        void (*waiter)(void *);
        const struct usched__waitq *q;
        int (*destroy)(void);
        void (*release)(void);
        const char *msg;
    } cases[] = {
        {cond_waiter, &dw_cond._wq, cond_destroy, cond_release, "cond_destroy: 1 fiber or thread waiting"},
        {sem_waiter, &dw_sem._wq, sem_destroy, sem_release, "sem_destroy: 1 fiber or thread waiting"},
        {wg_waiter, &dw_wg._wq, wg_destroy, wg_release, "wg_destroy: 1 fiber or thread waiting"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        usched_task_t *t;
        ASSERT_OK(usched_spawn(sched, &t, cases[i].waiter, NULL));
        wait_linked(cases[i].q);
        EXPECT_ERR(cases[i].destroy(), EBUSY, cases[i].msg);
        cases[i].release(); /* the waiter is unharmed: it returns normally */
        ASSERT_OK(usched_join(t));
        ASSERT_OK(cases[i].destroy());
    }
    ASSERT_OK(usched_mutex_destroy(&dw_mutex));
}

int main(void)
{
    sched = sync_test_start(NULL);
    test_null();
    test_uninitialised_and_destroyed();
    test_mutex_misuse();
    test_counts();
    test_closed_channel();
    test_destroy_while_waited_on();
    ASSERT_OK(usched_destroy(sched));
    printf("ok\n");
    return 0;
}
