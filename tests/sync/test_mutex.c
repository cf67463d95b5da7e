/*
 * Mutex, condition variable, semaphore and waitgroup, every operation
 * counted, on the topology given as argv[1] (absent: this machine):
 *  - a plain counter under a mutex from 100,000 fibers (and outside threads);
 *  - FIFO hand-off: waiters acquire in arrival order, no barging;
 *  - condvar producer/consumer over a bounded buffer; timedwait times out
 *    holding the mutex; an outside thread waits on a condvar;
 *  - a semaphore bounds concurrency (the maximum observed equals the permits);
 *  - a waitgroup over 10,000 fibers, waited on by fibers and by this thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "sync_test.h"

static usched_t *sched;

/* ---- counter under a mutex ------------------------------------------------- */

static usched_mutex_t cm;
static long counter; /* plain: the mutex is the only protection */
static usched_wg_t cwg;

static void counter_fiber(void *arg)
{
    long i = (long)arg;
    ASSERT_OK(usched_mutex_lock(&cm));
    long v = counter;
    if (i % 16 == 0) usched_yield(); /* hold it across a switch: contention */
    counter = v + 1;
    ASSERT_OK(usched_mutex_unlock(&cm));
    ASSERT_OK(usched_wg_done(&cwg));
}

static long thread_iters;

static void *counter_thread(void *arg)
{
    (void)arg;
    for (long i = 0; i < thread_iters; i++) {
        ASSERT_OK(usched_mutex_lock(&cm));
        counter++;
        ASSERT_OK(usched_mutex_unlock(&cm));
    }
    return NULL;
}

static void test_counter(void)
{
    /* Every fiber may be started and blocked on the mutex at once (the
     * holder yields every 16th time): under TSan, capped (test.h). */
    long n = test_cap_alive(test_scale(100000));
    thread_iters = test_scale(20000);
    counter = 0;
    ASSERT_OK(usched_mutex_init(&cm));
    ASSERT_OK(usched_wg_init(&cwg));
    ASSERT_OK(usched_wg_add(&cwg, (int)n));
    pthread_t th[2];
    for (int i = 0; i < 2; i++) ASSERT_EQ(pthread_create(&th[i], NULL, counter_thread, NULL), 0);
    for (long i = 0; i < n; i++) ASSERT_OK(usched_spawn(sched, NULL, counter_fiber, (void *)i));
    ASSERT_OK(usched_wg_wait(&cwg)); /* outside thread: blocks */
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    ASSERT_EQ(counter, n + 2 * thread_iters);
    ASSERT_OK(usched_wg_destroy(&cwg));
    ASSERT_OK(usched_mutex_destroy(&cm));
    printf("  mutex counter: %ld fibers + 2 threads x %ld = %ld\n", n, thread_iters, counter);
}

/* ---- FIFO hand-off ---------------------------------------------------------- */

enum { FIFO_K = 32 };
static usched_mutex_t fm;
static int fifo_order[FIFO_K];
static int fifo_n;

static void fifo_waiter(void *arg)
{
    ASSERT_OK(usched_mutex_lock(&fm));
    fifo_order[fifo_n++] = (int)(long)arg;
    ASSERT_OK(usched_mutex_unlock(&fm));
}

static void fifo_holder(void *arg)
{
    (void)arg;
    ASSERT_OK(usched_mutex_lock(&fm));
    ASSERT_EQ(usched_mutex_lock(&fm), -EDEADLK);
    ASSERT_EQ(usched_mutex_trylock(&fm), -EBUSY);
    usched_task_t *t[FIFO_K];
    for (long i = 0; i < FIFO_K; i++) {
        ASSERT_OK(usched_spawn(sched, &t[i], fifo_waiter, (void *)i));
        WAIT_UNTIL(__atomic_load_n(&fm._wq.nwaiters, __ATOMIC_RELAXED) == (uint32_t)i + 1);
    }
    ASSERT_EQ(usched_mutex_destroy(&fm), -EBUSY);
    ASSERT_OK(usched_mutex_unlock(&fm));
    /* Handed to waiter 0: a newcomer cannot barge in. The trylock finds the
     * mutex free only if this fiber was descheduled long enough for the
     * whole chain of hand-offs to finish (a loaded machine, qemu): then
     * every waiter has already had it, in order (checked below). */
    int tr = usched_mutex_trylock(&fm);
    if (tr == 0) {
        ASSERT_EQ(fifo_n, FIFO_K);
        ASSERT_OK(usched_mutex_unlock(&fm));
    } else {
        ASSERT_EQ(tr, -EBUSY);
        ASSERT_EQ(usched_mutex_unlock(&fm), -EPERM); /* not ours any more */
    }
    for (int i = 0; i < FIFO_K; i++) ASSERT_OK(usched_join(t[i]));
    ASSERT_EQ(fifo_n, FIFO_K);
    for (int i = 0; i < FIFO_K; i++) ASSERT_EQ(fifo_order[i], i);
}

static void test_fifo(void)
{
    ASSERT_OK(usched_mutex_init(&fm));
    fifo_n = 0;
    usched_task_t *t;
    ASSERT_OK(usched_spawn(sched, &t, fifo_holder, NULL));
    ASSERT_OK(usched_join(t));
    ASSERT_OK(usched_mutex_destroy(&fm));
    printf("  mutex: %d waiters served in arrival order, no barging\n", FIFO_K);
}

/* ---- condvar producer/consumer ------------------------------------------------ */

enum { QCAP = 8, NPROD = 16, NCONS = 16 };
static usched_mutex_t qm;
static usched_cond_t not_empty, not_full;
static long q[QCAP];
static int qhead, qlen, producers_left;
static long q_per;
static _Atomic long q_count, q_sum;

static void cv_producer(void *arg)
{
    long id = (long)arg;
    for (long i = 0; i < q_per; i++) {
        ASSERT_OK(usched_mutex_lock(&qm));
        while (qlen == QCAP) ASSERT_OK(usched_cond_wait(&not_full, &qm));
        q[(qhead + qlen++) % QCAP] = id * q_per + i + 1;
        ASSERT_OK(usched_cond_signal(&not_empty));
        ASSERT_OK(usched_mutex_unlock(&qm));
    }
    ASSERT_OK(usched_mutex_lock(&qm));
    if (--producers_left == 0) ASSERT_OK(usched_cond_broadcast(&not_empty));
    ASSERT_OK(usched_mutex_unlock(&qm));
}

static void cv_consumer(void *arg)
{
    (void)arg;
    long n = 0, sum = 0;
    for (;;) {
        ASSERT_OK(usched_mutex_lock(&qm));
        while (qlen == 0 && producers_left > 0) ASSERT_OK(usched_cond_wait(&not_empty, &qm));
        if (qlen == 0) {
            ASSERT_OK(usched_mutex_unlock(&qm));
            break;
        }
        long v = q[qhead];
        qhead = (qhead + 1) % QCAP;
        qlen--;
        ASSERT_OK(usched_cond_signal(&not_full));
        ASSERT_OK(usched_mutex_unlock(&qm));
        n++;
        sum += v;
    }
    atomic_fetch_add(&q_count, n);
    atomic_fetch_add(&q_sum, sum);
}

static void cv_timed(void *arg)
{
    (void)arg;
    ASSERT_OK(usched_mutex_lock(&qm));
    ASSERT_EQ(usched_cond_timedwait(&not_empty, &qm, 1000000), -ETIMEDOUT);
    ASSERT_EQ(usched_cond_timedwait(&not_empty, &qm, 0), -ETIMEDOUT);
    ASSERT_OK(usched_mutex_unlock(&qm)); /* held again after the timeout */
}

static _Atomic int th_waiting;
static int th_flag;

static void *cv_thread_waiter(void *arg)
{
    (void)arg;
    ASSERT_OK(usched_mutex_lock(&qm));
    atomic_store(&th_waiting, 1);
    while (!th_flag) ASSERT_OK(usched_cond_wait(&not_empty, &qm));
    ASSERT_OK(usched_mutex_unlock(&qm));
    return NULL;
}

static void cv_thread_waker(void *arg)
{
    (void)arg;
    WAIT_UNTIL(atomic_load(&th_waiting));
    ASSERT_OK(usched_mutex_lock(&qm));
    th_flag = 1;
    ASSERT_OK(usched_cond_broadcast(&not_empty));
    ASSERT_OK(usched_mutex_unlock(&qm));
}

static void test_condvar(void)
{
    ASSERT_OK(usched_mutex_init(&qm));
    ASSERT_OK(usched_cond_init(&not_empty));
    ASSERT_OK(usched_cond_init(&not_full));
    q_per = test_scale(5000);
    qhead = qlen = 0;
    producers_left = NPROD;
    atomic_store(&q_count, 0);
    atomic_store(&q_sum, 0);
    usched_task_t *t[NPROD + NCONS];
    int k = 0;
    for (long i = 0; i < NCONS; i++) ASSERT_OK(usched_spawn(sched, &t[k++], cv_consumer, NULL));
    for (long i = 0; i < NPROD; i++) ASSERT_OK(usched_spawn(sched, &t[k++], cv_producer, (void *)i));
    for (int i = 0; i < k; i++) ASSERT_OK(usched_join(t[i]));
    long total = NPROD * q_per;
    ASSERT_EQ(atomic_load(&q_count), total);
    ASSERT_EQ(atomic_load(&q_sum), total * (total + 1) / 2);

    usched_task_t *tt;
    ASSERT_OK(usched_spawn(sched, &tt, cv_timed, NULL));
    ASSERT_OK(usched_join(tt));

    /* an outside thread waiting on a condvar, woken by a fiber */
    th_flag = 0;
    atomic_store(&th_waiting, 0);
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, cv_thread_waiter, NULL), 0);
    ASSERT_OK(usched_spawn(sched, &tt, cv_thread_waker, NULL));
    pthread_join(th, NULL);
    ASSERT_OK(usched_join(tt));

    /* this thread: timedwait times out and holds the mutex again */
    ASSERT_OK(usched_mutex_lock(&qm));
    ASSERT_EQ(usched_cond_timedwait(&not_empty, &qm, 2000000), -ETIMEDOUT);
    ASSERT_OK(usched_mutex_unlock(&qm));

    ASSERT_OK(usched_cond_destroy(&not_empty));
    ASSERT_OK(usched_cond_destroy(&not_full));
    ASSERT_OK(usched_mutex_destroy(&qm));
    printf("  condvar: %d producers / %d consumers, %ld items, sum checked; timedwait times out\n",
           NPROD, NCONS, total);
}

/* ---- semaphore bounds concurrency --------------------------------------------- */

enum { PERMITS = 3 };
static usched_sem_t sem;
static _Atomic int inside, max_inside;
static _Atomic long sem_done;
static long sem_n;

static void sem_fiber(void *arg)
{
    (void)arg;
    ASSERT_OK(usched_sem_wait(&sem));
    int now = atomic_fetch_add(&inside, 1) + 1;
    int m = atomic_load(&max_inside);
    while (now > m && !atomic_compare_exchange_weak(&max_inside, &m, now)) {
    }
    ASSERT_LE(now, PERMITS);
    /* Hold the permit until every permit is taken, so that the maximum is
     * reached whatever the interleaving, unless too few fibers are left to
     * take them all (then no fiber can be waiting for one). */
    WAIT_UNTIL(atomic_load(&inside) == PERMITS || sem_n - atomic_load(&sem_done) < PERMITS);
    atomic_fetch_sub(&inside, 1);
    ASSERT_OK(usched_sem_post(&sem));
    atomic_fetch_add(&sem_done, 1);
}

static void test_sem(void)
{
    long n = test_scale(10000);
    sem_n = n;
    ASSERT_OK(usched_sem_init(&sem, PERMITS));
    atomic_store(&inside, 0);
    atomic_store(&max_inside, 0);
    atomic_store(&sem_done, 0);
    for (long i = 0; i < n; i++) ASSERT_OK(usched_spawn(sched, NULL, sem_fiber, NULL));
    ASSERT_OK(usched_wait(sched));
    ASSERT_EQ(atomic_load(&sem_done), n);
    ASSERT_EQ(atomic_load(&max_inside), PERMITS);
    /* all permits are back: three waits succeed at once from this thread */
    for (int i = 0; i < PERMITS; i++) ASSERT_OK(usched_sem_wait(&sem));
    for (int i = 0; i < PERMITS; i++) ASSERT_OK(usched_sem_post(&sem));
    ASSERT_OK(usched_sem_destroy(&sem));
    printf("  semaphore: %ld fibers, %d permits, at most %d inside\n", n, PERMITS,
           atomic_load(&max_inside));
}

/* ---- waitgroup ------------------------------------------------------------------ */

static usched_wg_t wg;
static _Atomic long wg_work, wg_waiters_ok;

static void wg_worker(void *arg)
{
    (void)arg;
    if (atomic_fetch_add(&wg_work, 1) % 8 == 0) usched_yield();
    ASSERT_OK(usched_wg_done(&wg));
}

static void wg_waiter(void *arg)
{
    long n = (long)arg;
    ASSERT_OK(usched_wg_wait(&wg));
    ASSERT_EQ(atomic_load(&wg_work), n); /* every worker finished first */
    atomic_fetch_add(&wg_waiters_ok, 1);
}

static void test_wg(void)
{
    long n = test_scale(10000);
    ASSERT_OK(usched_wg_init(&wg));
    ASSERT_OK(usched_wg_wait(&wg)); /* count 0: returns at once */
    for (int round = 0; round < 2; round++) {
        atomic_store(&wg_work, 0);
        atomic_store(&wg_waiters_ok, 0);
        ASSERT_OK(usched_wg_add(&wg, (int)n));
        usched_task_t *w[4];
        for (int i = 0; i < 4; i++) ASSERT_OK(usched_spawn(sched, &w[i], wg_waiter, (void *)n));
        for (long i = 0; i < n; i++) ASSERT_OK(usched_spawn(sched, NULL, wg_worker, NULL));
        ASSERT_OK(usched_wg_wait(&wg));
        ASSERT_EQ(atomic_load(&wg_work), n);
        for (int i = 0; i < 4; i++) ASSERT_OK(usched_join(w[i]));
        ASSERT_EQ(atomic_load(&wg_waiters_ok), 4);
    }
    ASSERT_OK(usched_wait(sched));
    ASSERT_OK(usched_wg_destroy(&wg));
    printf("  waitgroup: 2 rounds x %ld fibers, 4 fiber waiters + this thread\n", n);
}

int main(int argc, char **argv)
{
    const char *topo = argc > 1 ? argv[1] : NULL;
    sched = sync_test_start(topo);
    printf("topology %s: %d CPUs\n", topo ? topo : "(this machine)", usched_ncpus(sched));
    test_fifo();
    test_counter();
    test_condvar();
    test_sem();
    test_wg();
    ASSERT_OK(usched_destroy(sched));
    printf("ok\n");
    return 0;
}
