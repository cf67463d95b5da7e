/* inbox_mpsc, one thread: FIFO, node reuse, and the half-done push window
 * simulated with push_start/push_finish: pop returns NULL there, and empty()
 * must be false (the parking re-check must not miss the fiber). */
#include <stddef.h>

#include "rq/rq.h"
#include "rq_test.h"

typedef struct {
    usched__mpsc_node_t node;
    int id;
} item_t;

static usched__inbox_mpsc_t q;
static item_t it[8];

static int pop_id(void)
{
    usched__mpsc_node_t *n = usched__inbox_pop(&q);
    return n ? ((item_t *)((char *)n - offsetof(item_t, node)))->id : -1;
}

int main(void)
{
    for (int i = 0; i < 8; i++)
        it[i].id = i;
    usched__inbox_init(&q);
    ASSERT(usched__inbox_empty(&q));
    ASSERT_EQ(pop_id(), -1);

    /* FIFO, twice, reusing the nodes (the stub goes round the list). */
    for (int lap = 0; lap < 2; lap++) {
        for (int i = 0; i < 5; i++) {
            usched__inbox_push(&q, &it[i].node);
            ASSERT(!usched__inbox_empty(&q));
        }
        for (int i = 0; i < 5; i++) {
            ASSERT(!usched__inbox_empty(&q));
            ASSERT_EQ(pop_id(), i);
        }
        ASSERT_EQ(pop_id(), -1);
        ASSERT(usched__inbox_empty(&q));
    }
    /* One in, one out, many times: the single-node path re-inserts the stub. */
    for (int k = 0; k < 100; k++) {
        usched__inbox_push(&q, &it[k % 8].node);
        ASSERT(!usched__inbox_empty(&q));
        ASSERT_EQ(pop_id(), k % 8);
        ASSERT(usched__inbox_empty(&q));
    }

    /* Half-done first push into an empty inbox (only the stub is linked). */
    usched__mpsc_node_t *prev = usched__inbox_push_start(&q, &it[0].node);
    RQ_ASSERT_PTR_EQ(prev, &q.stub);
    ASSERT(!usched__inbox_empty(&q));
    ASSERT_EQ(pop_id(), -1);          /* not linked yet */
    ASSERT(!usched__inbox_empty(&q)); /* and pop did not make it look empty */
    usched__inbox_push_finish(prev, &it[0].node);
    ASSERT_EQ(pop_id(), 0);
    ASSERT(usched__inbox_empty(&q));

    /* Half-done push behind a complete one: the complete one comes out,
     * then NULL until the link is made, and empty() stays false. */
    usched__inbox_push(&q, &it[1].node);
    prev = usched__inbox_push_start(&q, &it[2].node);
    RQ_ASSERT_PTR_EQ(prev, &it[1].node);
    usched__inbox_push(&q, &it[3].node); /* a later complete push behind the gap */
    ASSERT_EQ(pop_id(), -1);             /* 1 cannot leave: its next is not linked */
    ASSERT(!usched__inbox_empty(&q));
    usched__inbox_push_finish(prev, &it[2].node);
    ASSERT_EQ(pop_id(), 1);
    ASSERT_EQ(pop_id(), 2);
    ASSERT_EQ(pop_id(), 3);
    ASSERT_EQ(pop_id(), -1);
    ASSERT(usched__inbox_empty(&q));

    /* Half-done push while the consumer holds the last node: pop must not
     * return it (its successor is unknown) and empty() stays false. */
    usched__inbox_push(&q, &it[4].node);
    ASSERT_EQ(pop_id(), 4);
    usched__inbox_push(&q, &it[5].node);
    usched__inbox_push(&q, &it[6].node);
    ASSERT_EQ(pop_id(), 5); /* tail is now 6, the last linked node */
    prev = usched__inbox_push_start(&q, &it[7].node);
    RQ_ASSERT_PTR_EQ(prev, &it[6].node);
    ASSERT_EQ(pop_id(), -1);
    ASSERT(!usched__inbox_empty(&q));
    ASSERT_EQ(pop_id(), -1); /* retrying does not help until the link */
    usched__inbox_push_finish(prev, &it[7].node);
    ASSERT_EQ(pop_id(), 6);
    ASSERT(!usched__inbox_empty(&q));
    ASSERT_EQ(pop_id(), 7);
    ASSERT(usched__inbox_empty(&q));
    ASSERT_EQ(pop_id(), -1);
    printf("inbox_test: ok\n");
    return 0;
}
