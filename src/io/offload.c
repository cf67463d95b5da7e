/*
 * The offload pool: threads that run blocking calls (regular files,
 * getaddrinfo, fsync, libraries that block) for fibers, so that no worker
 * thread ever blocks in them. One pool per process, shared by schedulers.
 *
 * The calling fiber parks first and submits its job from the `after`
 * function of usched__block (so a pool thread can never wake a fiber still
 * running on its stack); the pool thread runs fn(arg) and wakes the fiber
 * through the policy (an I/O wake-up). The pool grows while the jobs
 * announced outnumber the idle threads, up to the offload_max knob of the
 * caller's scheduler, and a thread idle for offload_idle_ms exits (Tokio's
 * blocking pool keeps idle threads 10 s; Seastar keeps one syscall thread
 * per shard).
 *
 * The protocol (all counts under `lock`):
 *   O1. announce: the fiber adds its job to nwant and, if the announced jobs
 *       now outnumber the idle threads, creates a thread (up to the bound),
 *       while it can still return an error: when no thread exists and none
 *       can be created it withdraws the job (nwant--) and fails. It counts
 *       itself in its scheduler's outside_wakers (core.h): from here until
 *       O5 its wake-up comes from a pool thread, and usched_destroy must
 *       not take it for blocked forever.
 *   O2. queue: once the fiber is switched out (usched__block's after
 *       step, maybe much later: the worker may be preempted, a policy's
 *       stopping callback runs first), the job is linked at the tail and
 *       one idle thread signalled.
 *   O3. take: a thread takes the head job and subtracts it from nwant.
 *   O4. shrink: a thread whose idle wait timed out exits only when no job
 *       is queued and none is announced (nwant == 0); otherwise it waits
 *       again. An announced job is one O2 will queue, and this thread may
 *       be the only one left to take it: before O4 looked at nwant, a
 *       thread that timed out between O1 and O2 exited and left the job to
 *       wait for some later offload to grow the pool. So from O1 to O3 at
 *       least one thread exists (O1 made sure of one; none leaves while
 *       nwant > 0), and a job is never left without a thread.
 *   O5. wake: the thread runs fn(arg), wakes the fiber, and only then
 *       subtracts it from its scheduler's outside_wakers; `waking` covers
 *       that whole step, so a destroy that saw the fiber finish waits for
 *       the thread to be done with the scheduler (usched__offload_quiesce).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "base/fault.h"
#include "base/error.h"
#include "base/export.h"
#include "io/io_impl.h"

struct job {
    void (*fn)(void *);
    void *arg;
    usched_task_t *task;
    struct job *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static struct job *head, *tail; /* under lock */
static int nthreads, nidle;     /* under lock */
static int nwant;               /* under lock: jobs announced, not yet taken by a thread */
static int64_t idle_ms = 10000; /* under lock: of the last submitter's scheduler */
/* Pool threads inside O5. The woken fiber may finish and its scheduler be
 * destroyed while the waker still touches the scheduler (its counters, the
 * woken CPU's state word, outside_wakers): usched_destroy waits for this to
 * be 0 (the I/O backend's fini, io_fini in poller.c) before it frees
 * anything. Set before the wake (seq_cst), while the fiber is still blocked
 * and so still alive. */
static _Atomic int waking;

static void *pool_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!head) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (time_t)(idle_ms / 1000);
            ts.tv_nsec += (long)(idle_ms % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
            nidle++;
            int rc = pthread_cond_timedwait(&cond, &lock, &ts);
            nidle--;
            if (rc == ETIMEDOUT && !head && nwant == 0) { /* O4 */
                nthreads--; /* idle for offload_idle_ms: shrink */
                pthread_mutex_unlock(&lock);
                return NULL;
            }
        }
        struct job *j = head; /* O3 */
        head = j->next;
        if (!head) tail = NULL;
        nwant--;
        pthread_mutex_unlock(&lock);
        usched_task_t *t = j->task; /* j lives on the fiber's stack until the wake */
        usched_t *s = t->s;
        j->fn(j->arg);
        atomic_fetch_add(&waking, 1); /* O5 */
        usched__wake(t, USCHED__WAKE_IO);
        atomic_fetch_sub_explicit(&s->life.outside_wakers, 1, memory_order_release);
        atomic_fetch_sub_explicit(&waking, 1, memory_order_release);
        pthread_mutex_lock(&lock);
    }
}

/* Under lock: one more thread. usched_destroy waits for the pool's wake-ups
 * in the I/O park backend's fini (io_fini, poller.c): the backend must be
 * registered before the first pool thread runs (it is, at load, once this
 * call links poller.c in; a static link would leave it out otherwise). */
static int grow(void)
{
    usched__io_register();
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    int rc = usched__thread_create(&th, &a, pool_main, NULL);
    pthread_attr_destroy(&a);
    if (rc == 0) nthreads++;
    return -rc;
}

/* O2: runs after the fiber's registers are saved (usched__block). */
static void submit(void *arg)
{
    struct job *j = arg;
    pthread_mutex_lock(&lock);
    j->next = NULL;
    if (tail)
        tail->next = j;
    else
        head = j;
    tail = j;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
}

int usched__offload_run(void (*fn)(void *), void *arg)
{
    usched_task_t *self = usched__current();
    if (!self) {
        fn(arg);
        return 0;
    }
    usched_t *s = usched_self();
    int64_t max = usched__knob_get(&s->knobs, USCHED_KNOB_offload_max);
    pthread_mutex_lock(&lock);
    idle_ms = usched__knob_get(&s->knobs, USCHED_KNOB_offload_idle_ms);
    /* O1: grow now, while the fiber can still report a failure. A failure
     * with threads left is not one: they take the job in turn (O4). */
    if (++nwant > nidle && nthreads < max) {
        int rc = grow();
        if (rc < 0 && nthreads == 0) {
            nwant--;
            pthread_mutex_unlock(&lock);
            return usched__error(-rc, "offload: cannot create a pool thread");
        }
    }
    atomic_fetch_add_explicit(&s->life.outside_wakers, 1, memory_order_relaxed);
    pthread_mutex_unlock(&lock);
    struct usched__wk *w = usched__self_wk();
    usched__stat_add(&w->stats, USCHED_STAT_offloads, 1);
    struct job j = {.fn = fn, .arg = arg, .task = self};
    usched__block_on(USCHED__TBLK_offload, submit, &j);
    return 0;
}

void usched__offload_quiesce(void)
{
    while (atomic_load_explicit(&waking, memory_order_acquire)) sched_yield();
}

int usched__offload_threads(void)
{
    pthread_mutex_lock(&lock);
    int n = nthreads;
    pthread_mutex_unlock(&lock);
    return n;
}

USCHED_EXPORT int usched_offload(void (*fn)(void *), void *arg)
{
    if (!fn) return usched__error(EINVAL, "offload: function is NULL");
    return usched__offload_run(fn, arg);
}
