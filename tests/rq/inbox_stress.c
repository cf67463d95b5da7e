/* inbox_mpsc under contention: 4 producers x 1M items (scaled) into one
 * consumer. Checks per-producer FIFO order and that every item arrives exactly
 * once, and the parking guarantee: whenever inbox_empty() says true, no
 * producer has finished a push the consumer has not popped. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>

#include "rq/rq.h"
#include "rq_test.h"

#define NPROD 4

typedef struct {
    usched__mpsc_node_t node;
    int producer;
    long seq;
} item_t;

static usched__inbox_mpsc_t q;
static long per_producer;
static item_t *items[NPROD];
/* Pushes producer p has completed (seq_cst store after inbox_push returns). */
static _Atomic long pushed[NPROD];

static void *producer(void *arg)
{
    int p = (int)(intptr_t)arg;
    for (long i = 0; i < per_producer; i++) {
        items[p][i].producer = p;
        items[p][i].seq = i;
        usched__inbox_push(&q, &items[p][i].node);
        atomic_store_explicit(&pushed[p], i + 1, memory_order_seq_cst);
        if ((i & 1023) == 0) sched_yield(); /* vary the interleaving */
    }
    return NULL;
}

int main(void)
{
    per_producer = test_scale(1000 * 1000);
    usched__inbox_init(&q);
    for (int p = 0; p < NPROD; p++) {
        items[p] = calloc((size_t)per_producer, sizeof(item_t));
        ASSERT(items[p]);
    }
    pthread_t th[NPROD];
    double t0 = test_now();
    for (int p = 0; p < NPROD; p++)
        ASSERT_EQ(pthread_create(&th[p], NULL, producer, (void *)(intptr_t)p), 0);

    long popped[NPROD] = {0}, total = 0, empties = 0, half_done = 0;
    while (total < NPROD * per_producer) {
        usched__mpsc_node_t *n = usched__inbox_pop(&q);
        if (n) {
            item_t *it = (item_t *)((char *)n - offsetof(item_t, node));
            int p = it->producer;
            if (p < 0 || p >= NPROD) TEST_FAIL_("popped a node with producer %d", p);
            if (it->seq != popped[p])
                TEST_FAIL_("producer %d: popped seq %ld, expected %ld (FIFO per producer)", p,
                           it->seq, popped[p]);
            popped[p]++;
            total++;
            continue;
        }
        /* Snapshot the completed pushes first, then ask empty(): any push
         * completed before the snapshot moved head off the stub before the
         * empty() load, so empty() may say true only if we popped it. */
        long done[NPROD];
        for (int p = 0; p < NPROD; p++)
            done[p] = atomic_load_explicit(&pushed[p], memory_order_seq_cst);
        if (usched__inbox_empty(&q)) {
            empties++;
            for (int p = 0; p < NPROD; p++)
                if (done[p] > popped[p])
                    TEST_FAIL_("inbox_empty() true but producer %d completed %ld pushes and "
                               "only %ld were popped",
                               p, done[p], popped[p]);
        } else {
            half_done++; /* NULL from pop with empty() false */
        }
    }
    for (int p = 0; p < NPROD; p++)
        ASSERT_EQ(pthread_join(th[p], NULL), 0);
    double dt = test_now() - t0;
    RQ_ASSERT_PTR_EQ(usched__inbox_pop(&q), NULL);
    ASSERT(usched__inbox_empty(&q));
    for (int p = 0; p < NPROD; p++) {
        ASSERT_EQ(popped[p], per_producer);
        free(items[p]);
    }
    printf("inbox_stress: %d x %ld items in order, once each; %ld empty re-checks, "
           "%ld NULL pops with a push in flight or none yet; %.2f s\n",
           NPROD, per_producer, empties, half_done, dt);
    return 0;
}
