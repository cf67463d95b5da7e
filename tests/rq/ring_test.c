/* ring_spmc, one thread: FIFO, full and empty edges, index wrap-around past
 * 2^32, spill contents and order, steal halves; the owner's LIFO end (pop
 * newest, take a given item, push at the head) and how it mixes with the
 * FIFO end and steals. The owner's operations again on a solo ring (its
 * commits are plain stores), and a steal from a solo ring aborts. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rq/rq.h"
#include "rq_test.h"

#define N RQ_RING_SIZE
#define HALF (RQ_RING_SIZE / 2)

static void *item(uintptr_t i) { return (void *)(i + 1); } /* never NULL */
static uintptr_t id(void *p) { return (uintptr_t)p - 1; }

static usched__ring_spmc_t ra, rb;
static bool solo; /* the owner's rings (ra) are solo: no thief part */

static void init_owner(usched__ring_spmc_t *r, uint32_t start)
{
    usched__ring_init_at(r, start);
    usched__ring_set_solo(r, solo);
}

/* Starting the indices at `start`: fill, check full, drain in order. */
static void fifo_full_empty(uint32_t start)
{
    init_owner(&ra, start);
    ASSERT_EQ(usched__ring_len(&ra), 0);
    RQ_ASSERT_PTR_EQ(usched__ring_pop(&ra), NULL);
    for (uintptr_t i = 0; i < N; i++) {
        ASSERT_EQ(usched__ring_push(&ra, item(i)), 0);
        ASSERT_EQ(usched__ring_len(&ra), i + 1);
    }
    ASSERT_EQ(usched__ring_push(&ra, item(999)), -ENOSPC);
    ASSERT_EQ(usched__ring_len(&ra), N); /* a refused push changes nothing */
    for (uintptr_t i = 0; i < N; i++)
        ASSERT_EQ_U(id(usched__ring_pop(&ra)), i);
    RQ_ASSERT_PTR_EQ(usched__ring_pop(&ra), NULL);
    ASSERT_EQ(usched__ring_len(&ra), 0);
    /* Full again after a drain: slots are reused. */
    for (uintptr_t i = 0; i < N; i++)
        ASSERT_EQ(usched__ring_push(&ra, item(1000 + i)), 0);
    ASSERT_EQ(usched__ring_push(&ra, item(0)), -ENOSPC);
    ASSERT_EQ_U(id(usched__ring_pop(&ra)), 1000);
    ASSERT_EQ(usched__ring_push(&ra, item(2000)), 0); /* one slot freed, one push fits */
    ASSERT_EQ(usched__ring_push(&ra, item(0)), -ENOSPC);
}

/* Interleaved push/pop across many laps of the ring (and across 2^32 when
 * start is near UINT32_MAX): always FIFO. */
static void fifo_interleaved(uint32_t start)
{
    init_owner(&ra, start);
    uintptr_t next_in = 0, next_out = 0;
    for (int round = 0; round < 40; round++) {
        int pushes = 1 + (round * 37) % 200, pops = 1 + (round * 53) % 200;
        for (int k = 0; k < pushes; k++)
            if (usched__ring_push(&ra, item(next_in)) == 0) next_in++;
        for (int k = 0; k < pops; k++) {
            void *p = usched__ring_pop(&ra);
            if (!p) break;
            ASSERT_EQ_U(id(p), next_out);
            next_out++;
        }
        ASSERT_EQ_U(usched__ring_len(&ra), next_in - next_out);
    }
    ASSERT_GT(next_in, 3 * N); /* several laps */
}

/* Full ring: push_or_spill moves the oldest half, in order, and keeps the
 * newer half in place with the new item on top. */
static void spill(uint32_t start)
{
    void *out[HALF];
    init_owner(&ra, start);
    ASSERT_EQ(usched__ring_push_or_spill(&ra, item(0), out), 0); /* not full: a push */
    for (uintptr_t i = 1; i < N; i++)
        ASSERT_EQ(usched__ring_push_or_spill(&ra, item(i), out), 0);
    ASSERT_EQ(usched__ring_len(&ra), N);
    ASSERT_EQ(usched__ring_push_or_spill(&ra, item(N), out), HALF);
    for (uintptr_t i = 0; i < HALF; i++)
        ASSERT_EQ_U(id(out[i]), i);
    ASSERT_EQ(usched__ring_len(&ra), N - HALF + 1); /* the new item stays, newest */
    for (uintptr_t i = HALF; i <= N; i++)
        ASSERT_EQ_U(id(usched__ring_pop(&ra)), i);
    RQ_ASSERT_PTR_EQ(usched__ring_pop(&ra), NULL);
}

/* Steal takes half rounded up, the oldest ones; returns the newest of them
 * and leaves the rest in order in the thief. */
static void steal(uint32_t start_a, uint32_t start_b)
{
    unsigned taken = 12345;
    usched__ring_init_at(&ra, start_a);
    usched__ring_init_at(&rb, start_b);
    RQ_ASSERT_PTR_EQ(usched__ring_steal(&ra, &rb, &taken), NULL);
    ASSERT_EQ(taken, 0);

    static const unsigned sizes[] = {1, 2, 3, 7, 128, 129, N};
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        unsigned n = sizes[s], want = n - n / 2;
        for (uintptr_t i = 0; i < n; i++)
            ASSERT_EQ(usched__ring_push(&ra, item(i)), 0);
        void *p = usched__ring_steal(&ra, &rb, &taken);
        ASSERT_EQ(taken, want);
        ASSERT_EQ_U(id(p), want - 1);
        ASSERT_EQ(usched__ring_len(&rb), want - 1);
        ASSERT_EQ(usched__ring_len(&ra), n - want);
        for (uintptr_t i = 0; i + 1 < want; i++)
            ASSERT_EQ_U(id(usched__ring_pop(&rb)), i);
        RQ_ASSERT_PTR_EQ(usched__ring_pop(&rb), NULL);
        for (uintptr_t i = want; i < n; i++)
            ASSERT_EQ_U(id(usched__ring_pop(&ra)), i);
        RQ_ASSERT_PTR_EQ(usched__ring_pop(&ra), NULL);
    }
    /* taken may be NULL; a thief with half its slots used still has room. */
    for (uintptr_t i = 0; i < 10; i++)
        ASSERT_EQ(usched__ring_push(&ra, item(i)), 0);
    for (uintptr_t i = 0; i < HALF; i++)
        ASSERT_EQ(usched__ring_push(&rb, item(100 + i)), 0);
    ASSERT_EQ_U(id(usched__ring_steal(&ra, &rb, NULL)), 4);
    ASSERT_EQ(usched__ring_len(&rb), HALF + 4);
    for (uintptr_t i = 0; i < HALF; i++)
        ASSERT_EQ_U(id(usched__ring_pop(&rb)), 100 + i);
    for (uintptr_t i = 0; i < 4; i++)
        ASSERT_EQ_U(id(usched__ring_pop(&rb)), i);
}

/* The owner's LIFO end: newest first; take from the top, the middle and the
 * bottom keeps the others' order; push_head goes behind everything. */
static void lifo(uint32_t start)
{
    init_owner(&ra, start);
    RQ_ASSERT_PTR_EQ(usched__ring_pop_lifo(&ra), NULL);
    RQ_ASSERT_PTR_EQ(usched__ring_peek_lifo(&ra), NULL);
    ASSERT(!usched__ring_take(&ra, item(0)));
    for (uintptr_t i = 0; i < N; i++)
        ASSERT_EQ(usched__ring_push(&ra, item(i)), 0);
    ASSERT_EQ(usched__ring_push_head(&ra, item(999)), -ENOSPC);
    for (uintptr_t i = N; i-- > 0;) {
        ASSERT_EQ_U(id(usched__ring_peek_lifo(&ra)), i); /* what the pop then returns */
        ASSERT_EQ_U(id(usched__ring_pop_lifo(&ra)), i);
    }
    RQ_ASSERT_PTR_EQ(usched__ring_pop_lifo(&ra), NULL);
    RQ_ASSERT_PTR_EQ(usched__ring_peek_lifo(&ra), NULL);
    ASSERT_EQ(usched__ring_len(&ra), 0);

    /* 0..9, take 9 (top), 4 (middle), 0 (bottom), and one not there. */
    for (uintptr_t i = 0; i < 10; i++)
        ASSERT_EQ(usched__ring_push(&ra, item(i)), 0);
    ASSERT(usched__ring_take(&ra, item(9)));
    ASSERT(usched__ring_take(&ra, item(4)));
    ASSERT(usched__ring_take(&ra, item(0)));
    ASSERT(!usched__ring_take(&ra, item(4)));
    ASSERT(!usched__ring_take(&ra, item(50)));
    ASSERT_EQ(usched__ring_len(&ra), 7);
    /* push_head: 100 is now the oldest. */
    ASSERT_EQ(usched__ring_push_head(&ra, item(100)), 0);
    static const uintptr_t newest_first[] = {8, 7, 6, 5, 3, 2, 1, 100};
    for (unsigned k = 0; k < 8; k++)
        ASSERT_EQ_U(id(usched__ring_pop_lifo(&ra)), newest_first[k]);
    RQ_ASSERT_PTR_EQ(usched__ring_pop_lifo(&ra), NULL);

    /* The two ends together: FIFO pop takes the head, LIFO the tail. */
    for (uintptr_t i = 0; i < 4; i++)
        ASSERT_EQ(usched__ring_push(&ra, item(i)), 0);
    ASSERT_EQ(usched__ring_push_head(&ra, item(200)), 0);
    ASSERT_EQ_U(id(usched__ring_pop(&ra)), 200);
    ASSERT_EQ_U(id(usched__ring_pop_lifo(&ra)), 3);
    ASSERT_EQ_U(id(usched__ring_pop(&ra)), 0);
    ASSERT_EQ_U(id(usched__ring_pop_lifo(&ra)), 2);
    ASSERT_EQ_U(id(usched__ring_pop_lifo(&ra)), 1);
    RQ_ASSERT_PTR_EQ(usched__ring_pop(&ra), NULL);

    /* A thief takes the oldest half; the owner's take of a stolen item says
     * no, of a remaining one yes; the thief's ring keeps its order. */
    if (solo) return;
    usched__ring_init_at(&rb, start + 7);
    for (uintptr_t i = 0; i < 10; i++)
        ASSERT_EQ(usched__ring_push(&ra, item(i)), 0);
    unsigned taken = 0;
    ASSERT_EQ_U(id(usched__ring_steal(&ra, &rb, &taken)), 4);
    ASSERT_EQ(taken, 5);
    ASSERT(!usched__ring_take(&ra, item(2)));
    ASSERT(usched__ring_take(&ra, item(5)));
    ASSERT_EQ(usched__ring_len(&ra), 4);
    for (uintptr_t i = 9; i > 5; i--)
        ASSERT_EQ_U(id(usched__ring_pop_lifo(&ra)), i);
    ASSERT_EQ_U(id(usched__ring_pop_lifo(&rb)), 3);
    ASSERT_EQ_U(id(usched__ring_pop(&rb)), 0);
    ASSERT_EQ(usched__ring_len(&rb), 2);
}

/* A thief's take from a solo ring is a caller's bug: it aborts. */
static void solo_steal_aborts(void)
{
    for (int k = 0; k < 2; k++) {
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            usched__ring_init(&ra);
            usched__ring_init(&rb);
            usched__ring_set_solo(&ra, true);
            (void)usched__ring_push(&ra, item(0));
            if (k == 0) (void)usched__ring_steal_one(&ra);
            else (void)usched__ring_steal(&ra, &rb, NULL);
            _exit(0);
        }
        int st = 0;
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
        ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    }
}

int main(void)
{
    /* 0: the plain case; the others cross 2^32 during the test. */
    static const uint32_t starts[] = {0, UINT32_MAX - 5, UINT32_MAX - N / 2, UINT32_MAX};
    for (int so = 0; so < 2; so++) {
        solo = so;
        for (unsigned s = 0; s < sizeof starts / sizeof starts[0]; s++) {
            fifo_full_empty(starts[s]);
            fifo_interleaved(starts[s]);
            spill(starts[s]);
            lifo(starts[s]);
            for (unsigned s2 = 0; s2 < sizeof starts / sizeof starts[0] && !solo; s2++)
                steal(starts[s], starts[s2]);
        }
    }
    solo = false;
    solo_steal_aborts();
    /* The wrap really happened: tail went past UINT32_MAX to small values. */
    usched__ring_init_at(&ra, UINT32_MAX - 1);
    for (uintptr_t i = 0; i < 4; i++)
        ASSERT_EQ(usched__ring_push(&ra, item(i)), 0);
    ASSERT_EQ_U(atomic_load(&ra.tail), 2);
    ASSERT_EQ(usched__ring_len(&ra), 4);
    printf("ring_test: ok\n");
    return 0;
}
