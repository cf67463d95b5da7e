/*
 * Allocation failure (src/base/fault.h): for every public call that
 * allocates - create, start (live and virtual), spawn (outside and from a
 * fiber), chan_create, offload, and a timed sleep (the timer heap) - the n-th
 * allocation or mapping fails, for every n until the call needs fewer. Each
 * time the call returns -ENOMEM (or succeeds, where it can do without), its
 * out-pointer is untouched or NULL, nothing leaks (the ASan build checks),
 * fibers already running are not lost (a set of them waits on a channel
 * through it all and finishes at the end with its checksum), and the
 * scheduler keeps working afterwards.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/fault.h"
#include "test.h"
#include "usched.h"

#define MAX_N 100000 /* no call makes this many allocations */
#define NKEEP 8

static usched_t *sched;
static usched_chan_t *keep_ch;
static _Atomic long keep_sum, keep_done;

/* Runs `attempt` with the n-th allocation failing, for n = 1, 2, ... until
 * the call needs fewer than n: then it must succeed. A failure must be
 * -ENOMEM; on_fail checks and cleans up after one, on_ok after a success. */
#define FOR_EACH_N(n, what, attempt, on_fail, on_ok)                               \
    do {                                                                         \
        long n;                                                                  \
        for (n = 1; n < MAX_N; n++) {                                            \
            usched__fault_arm(n);                                                \
            int rc_ = (attempt);                                                 \
            long pending_ = usched__fault_pending();                             \
            usched__fault_arm(0);                                                \
            if (rc_ < 0 && rc_ != -ENOMEM)                                       \
                TEST_FAIL_("%s, allocation %ld failing: %d (%s), not -ENOMEM", what, n, rc_, \
                           usched_strerror(rc_));                                \
            if (rc_ < 0) {                                                       \
                on_fail;                                                         \
            } else {                                                             \
                on_ok;                                                           \
            }                                                                    \
            if (pending_ > 0) {                                                  \
                ASSERT_OK(rc_); /* the failure was not reached: it must work */ \
                break;                                                           \
            }                                                                    \
        }                                                                        \
        ASSERT_LT(n, MAX_N);                                                     \
        printf("%-24s %ld allocation(s), each failure handled\n", what, n - 1);  \
    } while (0)

static void keeper(void *arg)
{
    void *msg;
    ASSERT_OK(usched_chan_recv(keep_ch, &msg));
    (void)arg;
    atomic_fetch_add(&keep_sum, (long)(intptr_t)msg);
    atomic_fetch_add(&keep_done, 1);
}

static _Atomic long ran;
static void work(void *arg)
{
    atomic_fetch_add(&ran, (long)(intptr_t)arg);
}

static void case_create(void)
{
    setenv("USCHED_KNOBS", "spin_us=40", 1); /* create copies and parses it */
    usched_t *s = (usched_t *)&s;
    FOR_EACH_N(n, "create", usched_create(&s), ASSERT(s == NULL), usched_destroy(s));
    unsetenv("USCHED_KNOBS");
}

/* Creates and configures a scheduler unarmed, then starts it with the n-th
 * allocation failing. */
static int start_attempt(long n, const char *topology, usched_t **s)
{
    usched__fault_arm(0);
    ASSERT_OK(usched_create(s));
    if (topology) ASSERT_OK(usched_set(*s, "topology", topology));
    usched__fault_arm(n);
    return usched_start(*s);
}

static void case_start(const char *topology)
{
    usched_t *s;
    char what[96];
    snprintf(what, sizeof what, "start %s", topology ? topology : "(live)");
    FOR_EACH_N(n, what, start_attempt(n, topology, &s), ASSERT_OK(usched_destroy(s)), ({
                   atomic_store(&ran, 0);
                   for (int i = 1; i <= 10; i++) ASSERT_OK(usched_spawn(s, NULL, work, (void *)(intptr_t)i));
                   ASSERT_OK(usched_wait(s));
                   ASSERT_EQ(atomic_load(&ran), 55);
                   ASSERT_OK(usched_destroy(s));
               }));
}

static void case_spawn_outside(void)
{
    usched_task_t *t = (usched_task_t *)&t;
    atomic_store(&ran, 0);
    long expect = 0;
    FOR_EACH_N(n, "spawn (outside)", usched_spawn(sched, &t, work, (void *)(intptr_t)n),
               ASSERT(t == NULL),
               ({ ASSERT_OK(usched_join(t)); expect += n; }));
    ASSERT_EQ(atomic_load(&ran), expect);
}

static void chan_attempts(void)
{
    usched_chan_t *c = (usched_chan_t *)&c;
    FOR_EACH_N(n, "chan_create 16", usched_chan_create(&c, 16), ASSERT(c == NULL),
               ASSERT_OK(usched_chan_destroy(c)));
    FOR_EACH_N(n, "chan_create 0", usched_chan_create(&c, 0), ASSERT(c == NULL),
               ASSERT_OK(usched_chan_destroy(c)));
}

static void offloaded(void *arg)
{
    atomic_fetch_add((_Atomic long *)arg, 1);
}

/* The first wait on an fd makes the fd's state and the poller: an empty
 * pipe, 1 ms (a timeout is a success here). */
static int poll_empty(int fd)
{
    int rc = usched_poll_fd(fd, POLLIN, 1000000);
    return rc == -ETIMEDOUT ? 0 : rc;
}

/* Waits (allocating nothing) until held_ch is closed. */
static usched_chan_t *held_ch;
static void held(void *arg)
{
    (void)arg;
    void *msg;
    ASSERT_EQ(usched_chan_recv(held_ch, &msg), -EPIPE);
}

/* Spawns fibers that stay alive until the stack cache runs dry, so that a
 * spawn maps a new chunk, with the k-th allocation of that spawn failing,
 * for k = 1, 2, ... until one maps without reaching it. */
static void case_spawn_dry(void)
{
    long k, held_n = 0;
    ASSERT_OK(usched_chan_create(&held_ch, 0));
    for (k = 1; k < 16; k++) {
        bool reached = false, done = false;
        for (int i = 0; i < 100000 && !reached; i++) {
            usched_task_t *t = (usched_task_t *)&t;
            usched__fault_arm(k);
            int rc = usched_spawn(sched, &t, held, NULL);
            long pending = usched__fault_pending();
            usched__fault_arm(0);
            if (rc < 0) {
                ASSERT_EQ(rc, -ENOMEM);
                ASSERT(t == NULL);
                reached = true;
            } else {
                held_n++;
                reached = pending < k; /* it allocated */
                done = reached && pending > 0;
            }
        }
        ASSERT(reached);
        if (done) break;
    }
    printf("%-24s %ld allocation(s) when the stack cache is dry, each failure handled (%ld fibers held)\n",
           "spawn (new chunk)", k - 1, held_n);
    ASSERT_OK(usched_chan_close(held_ch));
}

/* From a fiber: spawn, offload, a timed sleep. The other workers are idle,
 * so the armed failure is this fiber's. */
static void inside(void *arg)
{
    (void)arg;
    _Atomic long offl = 0;
    long offl_ok = 0;
    FOR_EACH_N(n, "offload", usched_offload(offloaded, &offl), (void)0, offl_ok++);
    ASSERT_EQ(atomic_load(&offl), offl_ok);
    usched_task_t *t = (usched_task_t *)&t;
    long expect = atomic_load(&ran);
    FOR_EACH_N(n, "spawn (fiber)", usched_spawn(sched, &t, work, (void *)(intptr_t)n),
               ASSERT(t == NULL), ({ ASSERT_OK(usched_join(t)); expect += n; }));
    ASSERT_EQ(atomic_load(&ran), expect);
    FOR_EACH_N(n, "sleep (timer heap)", usched_sleep_ns(1000), (void)0, (void)0);
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    FOR_EACH_N(n, "poll_fd (first I/O)", poll_empty(p[0]), (void)0, (void)0);
    ASSERT_EQ(write(p[1], "x", 1), 1);
    ASSERT_EQ(usched_poll_fd(p[0], POLLIN, 1000000000), POLLIN);
    ASSERT_OK(usched_close(p[0]));
    ASSERT_OK(usched_close(p[1]));
    chan_attempts();
}

int main(void)
{
    case_create();
    case_start(NULL);
    case_start("pack:1 l3:1 l2:4 core:1 pu:1");

    ASSERT_OK(usched_create(&sched));
    ASSERT_OK(usched_start(sched));
    /* Fibers already running, which must outlive every failure below. */
    ASSERT_OK(usched_chan_create(&keep_ch, 0));
    for (int i = 1; i <= NKEEP; i++) ASSERT_OK(usched_spawn(sched, NULL, keeper, (void *)(intptr_t)i));

    case_spawn_outside();
    case_spawn_dry();
    usched_task_t *t;
    ASSERT_OK(usched_spawn(sched, &t, inside, NULL));
    ASSERT_OK(usched_join(t));
    chan_attempts();

    /* Nothing running was lost; the scheduler keeps working. */
    for (int i = 1; i <= NKEEP; i++) ASSERT_OK(usched_chan_send(keep_ch, (void *)(intptr_t)(10 * i)));
    atomic_store(&ran, 0);
    for (int i = 1; i <= 100; i++) ASSERT_OK(usched_spawn(sched, NULL, work, (void *)(intptr_t)i));
    ASSERT_OK(usched_wait(sched));
    ASSERT_EQ(atomic_load(&keep_done), NKEEP);
    ASSERT_EQ(atomic_load(&keep_sum), 10L * NKEEP * (NKEEP + 1) / 2);
    ASSERT_EQ(atomic_load(&ran), 5050);
    ASSERT_OK(usched_chan_destroy(keep_ch));
    ASSERT_OK(usched_chan_destroy(held_ch));
    ASSERT_OK(usched_destroy(sched));
    printf("injected %ld failure(s); ok\n", usched__fault_injected());
    return 0;
}
