/*
 * inbox_mpsc: Dmitry Vyukov's intrusive MPSC queue with a stub node
 * (1024cores.net, "Intrusive MPSC node-based queue"), FreeBSD ULE's "assign"
 * list in role: other CPUs hand fibers to this CPU through it.
 *
 * The list runs from tail (oldest, consumer side) to head (newest, producer
 * side) through ->next. The stub node keeps it from ever being empty, so a
 * producer never touches tail and the consumer never touches head except to
 * re-insert the stub.
 *
 * A push is two steps (push_start, push_finish); between them the new node
 * is the head but is not linked from its predecessor yet. Protocol:
 *   I1. push_start exchanges head (seq_cst). From that instant head != stub,
 *       so inbox_empty() is false: the parking re-check cannot miss the node.
 *   I2. push_finish release-stores prev->next; the consumer's acquire load of
 *       ->next pairs with it, so it sees the node's contents.
 *   I3. pop that finds tail == head's predecessor chain broken (next == NULL
 *       but tail != head) returns NULL: a push is half done. The caller
 *       retries later; inbox_empty() stays false until it is popped.
 *   I4. The queue is empty exactly when head == stub and tail == stub: the
 *       consumer re-inserts the stub only behind the last node it is about to
 *       return, and any later push moves head off the stub.
 */
#include <stddef.h>

#include "rq/rq.h"

void usched__inbox_init(usched__inbox_mpsc_t *q)
{
    atomic_init(&q->stub.next, NULL);
    atomic_init(&q->head, &q->stub);
    atomic_init(&q->tail, &q->stub);
}

usched__mpsc_node_t *usched__inbox_push_start(usched__inbox_mpsc_t *q, usched__mpsc_node_t *n)
{
    /* Relaxed: published by the release store in push_finish (I2). */
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    /* seq_cst (I1): the same instruction as acq_rel on x86-64 (xchg) and
     * aarch64 (swpal), and it puts the push in the single total order that
     * the parking protocol's fences and inbox_empty()'s load rely on. */
    return atomic_exchange_explicit(&q->head, n, memory_order_seq_cst);
}

void usched__inbox_push_finish(usched__mpsc_node_t *prev, usched__mpsc_node_t *n)
{
    /* Release (I2): pairs with the consumer's acquire load of prev->next. */
    atomic_store_explicit(&prev->next, n, memory_order_release);
}

void usched__inbox_push(usched__inbox_mpsc_t *q, usched__mpsc_node_t *n)
{
    usched__inbox_push_finish(usched__inbox_push_start(q, n), n);
}

static inline usched__mpsc_node_t *next_of(usched__mpsc_node_t *n)
{
    return atomic_load_explicit(&n->next, memory_order_acquire); /* I2 */
}

static inline void set_tail(usched__inbox_mpsc_t *q, usched__mpsc_node_t *n)
{
    /* Owner only; relaxed because other threads read it only as a hint. */
    atomic_store_explicit(&q->tail, n, memory_order_relaxed);
}

usched__mpsc_node_t *usched__inbox_pop(usched__inbox_mpsc_t *q)
{
    usched__mpsc_node_t *tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
    usched__mpsc_node_t *next = next_of(tail);
    if (tail == &q->stub) {
        if (!next) return NULL; /* empty, or the first push half done (I3) */
        set_tail(q, next);
        tail = next;
        next = next_of(next);
    }
    if (next) {
        set_tail(q, next);
        return tail;
    }
    /* tail is the last linked node. If it is not the head, a push is half
     * done behind it (I3). Acquire pairs with the producers' exchange. */
    if (tail != atomic_load_explicit(&q->head, memory_order_acquire)) return NULL;
    /* Re-insert the stub behind tail so tail can be returned (I4). */
    usched__inbox_push(q, &q->stub);
    next = next_of(tail);
    if (next) {
        set_tail(q, next);
        return tail;
    }
    return NULL; /* a producer slipped in before the stub: half done (I3) */
}

bool usched__inbox_empty(usched__inbox_mpsc_t *q)
{
    /* I4. head first, seq_cst (I1). The tail load is exact on the owner and
     * a hint anywhere else. */
    if (atomic_load_explicit(&q->head, memory_order_seq_cst) != &q->stub) return false;
    return atomic_load_explicit(&q->tail, memory_order_relaxed) == &q->stub;
}
