/*
 * Shutdown: destroy waits for running fibers; fibers blocked forever are
 * detected (-EDEADLK, never a hang) and outside joiners of them get
 * -ECANCELED. Destroy waits for a fiber parked on an offloaded call (the
 * pool thread will wake it) and for one blocked on a descriptor (the peer
 * writes long after the deadlock check would have fired), and a wake-up that an outside thread sends
 * after destroy gave a fiber up for blocked forever touches no freed memory
 * (under ASan the old code showed both as a use-after-free).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "io/io_impl.h"
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

/* Waits until the outside joiner is on s->out.owaiters, the list destroy
 * cancels. Before that point destroy would free the task under a thread
 * that is still about to look at it, so no fixed sleep will do on a loaded
 * machine. Gives up (failing, with a message) if the join returned early or
 * never registered. */
static void wait_joiner_registered(usched_t *s)
{
    double deadline = test_now() + 30.0;
    for (;;) {
        pthread_mutex_lock(&s->out.lock);
        int registered = s->out.owaiters != NULL;
        pthread_mutex_unlock(&s->out.lock);
        if (registered) return;
        int rc = atomic_load(&join_rc);
        if (rc != 1) TEST_FAIL_("usched_join returned %d before destroy", rc);
        if (test_now() > deadline)
            TEST_FAIL_("the outside joiner did not register within 30 s");
        usleep(1000);
    }
}

/* Offloaded: a call that outlasts the deadlock check's quiet rounds
 * (3 x 50 ms) many times over. The scheduler is quiescent meanwhile - every
 * worker parked, nothing queued - but the pool thread will wake the fiber. */
static _Atomic int offload_returned;

static void long_call(void *arg)
{
    (void)arg;
    usleep(600 * 1000);
}

static void offloader(void *arg)
{
    (void)arg;
    ASSERT_OK(usched_offload(long_call, NULL));
    atomic_store(&offload_returned, 1);
}

/* Waits (bounded, failing with a message) until the fiber has parked, and
 * every worker of s with it, in state `parked` or `last` (the I/O poller). */
static void wait_quiescent(usched_t *s, uint32_t last)
{
    double deadline = test_now() + 30.0;
    for (;;) {
        bool parked = true;
        for (int c = 0; c < s->ncpus && parked; c++) {
            uint32_t st = atomic_load(&s->wk[c]->state);
            parked = st == WK_PARKED || st == last;
        }
        if (parked) return;
        if (test_now() > deadline) TEST_FAIL_("the fiber and the workers did not park within 30 s");
        usleep(1000);
    }
}

/* A fiber blocked on a descriptor; a thread writes to its peer once
 * destroy has been waiting several times as long as the deadlock check's
 * quiet rounds (a delay that makes the check meaningful, not a result). */
static int sv[2];
static _Atomic int read_got;

static void fd_reader(void *arg)
{
    (void)arg;
    char c = 0;
    ASSERT_EQ(usched_read(sv[0], &c, 1, USCHED_FOREVER), 1);
    atomic_store(&read_got, c);
}

static void *late_writer(void *arg)
{
    usched_t *s = arg;
    while (!atomic_load(&s->life.nwaiting)) usleep(1000); /* destroy is waiting */
    usleep(600 * 1000);
    ASSERT_EQ(write(sv[1], "x", 1), 1);
    return NULL;
}

/* An outside waker: a fiber waits on a channel that a plain thread sends on
 * only after destroy has given the fiber up. */
static void receiver(void *arg)
{
    void *msg = NULL;
    usched_chan_recv(arg, &msg);
    TEST_FAIL_("a fiber that destroy gave up for blocked forever ran again");
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

    /* Destroy waits for the offloaded call and the fiber's return. */
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:2 pu:1"));
    ASSERT_OK(usched_start(s));
    ASSERT_OK(usched_spawn(s, NULL, offloader, NULL));
    while (usched__offload_threads() == 0) usleep(1000); /* the offload has begun */
    wait_quiescent(s, WK_PARKED);
    ASSERT_OK(usched_destroy(s));
    int offload_done = atomic_load(&offload_returned);
    ASSERT_EQ(offload_done, 1);

    /* Destroy waits for a fiber blocked on a descriptor. */
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:2 pu:1"));
    ASSERT_OK(usched_start(s));
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    ASSERT_OK(usched_spawn(s, NULL, fd_reader, NULL));
    wait_quiescent(s, WK_PARKED_POLL);
    pthread_t wt;
    pthread_create(&wt, NULL, late_writer, s);
    ASSERT_OK(usched_destroy(s));
    pthread_join(wt, NULL);
    int got = atomic_load(&read_got);
    ASSERT_EQ(got, 'x');
    ASSERT_OK(usched_close(sv[0]));
    ASSERT_OK(close(sv[1]));

    /* A late outside wake-up of a fiber given up for blocked forever. */
    usched_chan_t *c;
    ASSERT_OK(usched_chan_create(&c, 0));
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:2 pu:1"));
    ASSERT_OK(usched_start(s));
    ASSERT_OK(usched_spawn(s, NULL, receiver, c));
    ASSERT_EQ(usched_destroy(s), -EDEADLK);
    ASSERT_OK(usched_chan_send(c, c)); /* the receiver waits: its waiter takes it */
    ASSERT_OK(usched_chan_destroy(c));
    printf("ok\n");
    return 0;
}
