/*
 * Channels: FIFO message passing between fibers and outside threads.
 *
 * One lock (the receive queue's) guards the whole channel: the ring, the
 * closed flag and both wait queues (the send queue's own lock word is not
 * used). Go's algorithm:
 *   send: a receiver is waiting -> hand the message to it directly (no copy
 *         through the ring) and wake it; else room in the ring -> enqueue;
 *         else park on the send queue with the message in the waiter.
 *   recv: the ring has a message -> take it, and refill the ring from the
 *         first parked sender (waking it); else a sender is parked (capacity
 *         0, or a ring emptied while senders wait) -> take its message and
 *         wake it; else park on the receive queue.
 * A rendezvous send (capacity 0) therefore completes only once a receiver
 * has the message. Messages are never lost or duplicated: each one is in
 * exactly one place (a sender's waiter, the ring, a receiver's waiter) and
 * moves under the lock.
 *
 * Which receiver: a send that finds several receivers parked hands its
 * message to the one of the four oldest that last ran nearest the sender's
 * CPU (the same CPU, else the lowest topology level shared; the oldest of
 * equals; knob near_wake; waitq.h, usched__wq_pop_near): any receiver may
 * take any message, and a local one is woken with a switch instead of a
 * cross-CPU hand-off, one in the same LLC without moving the message's
 * lines out of it. The oldest is passed over at most 16 times. Which
 * receiver gets a message does not change the order in which messages are
 * received.
 *
 * Wake-ups: a send that hands a message to a parked receiver wakes it with
 * USCHED__WAKE_SYNC (as Linux does for pipe writes): the sender of a message
 * typically waits for the answer next, so the policy may run the receiver on
 * this CPU, next. A receiver releasing a parked sender wakes it plainly.
 *
 * close: wakes every waiter with -EPIPE: parked senders' messages were not
 * delivered (the caller still owns them). Messages already in the ring stay
 * receivable; recv returns -EPIPE once the ring is drained.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "base/error.h"
#include "base/export.h"
#include "sync/sync.h"
#include "sync/waitq.h"

struct usched_chan {
    struct usched__waitq recvq; /* its lock guards the whole channel */
    struct usched__waitq sendq;
    uint32_t magic;
    int closed;
    size_t cap;   /* 0: rendezvous */
    size_t head;  /* next message to receive */
    size_t count; /* messages in the ring */
    void **ring;  /* cap slots */
};

#define CHAN_LOCK(c) usched__wq_lock(&(c)->recvq)
#define CHAN_UNLOCK(c) usched__wq_unlock(&(c)->recvq)

static int check(const usched_chan_t *c, const char *call)
{
    return usched__sync_check(c, c ? &c->magic : NULL, "chan", call);
}

USCHED_EXPORT int usched_chan_create(usched_chan_t **out, size_t capacity)
{
    if (!out) return usched__error(EINVAL, "chan_create: out is NULL");
    *out = NULL;
    if (capacity > ((size_t)1 << 40))
        return usched__error(EINVAL, "chan_create: capacity %zu is too large", capacity);
    /* Whole cache lines for the channel and its ring: two channels that
     * fibers on different CPUs use must share no line (adjacent channels
     * from calloc put two pairs' locks on one line, and pairs on two CPUs
     * ran at less than half of one pair's speed). */
    usched_chan_t *c = usched__alloc_lines(sizeof *c);
    if (!c) return usched__error(ENOMEM, "chan_create: out of memory");
    memset(c, 0, sizeof *c);
    if (capacity) {
        c->ring = usched__alloc_lines(capacity * sizeof *c->ring);
        if (!c->ring) {
            free(c);
            return usched__error(ENOMEM, "chan_create: no memory for %zu slots", capacity);
        }
    }
    c->cap = capacity;
    c->magic = USCHED__SYNC_MAGIC;
    *out = c;
    return 0;
}

static void ring_put(usched_chan_t *c, void *msg)
{
    size_t i = c->head + c->count;
    if (i >= c->cap) i -= c->cap;
    c->ring[i] = msg;
    c->count++;
}

static void *ring_take(usched_chan_t *c)
{
    void *msg = c->ring[c->head];
    if (++c->head == c->cap) c->head = 0;
    c->count--;
    return msg;
}

/*
 * Under the lock: completes a send without blocking if it can. Returns 1
 * (done; the lock is released and a receiver may be woken), 0 (would block;
 * still locked) or -EPIPE (closed; still locked).
 */
static int send_now(usched_chan_t *c, void *msg)
{
    if (c->closed) return -EPIPE;
    struct usched__waiter *r = usched__wq_pop_near(&c->recvq);
    if (r) {
        r->msg = msg;
        usched__wtok_t tok = usched__wq_claim(r, 0);
        CHAN_UNLOCK(c);
        usched__wq_wake(tok, USCHED__WAKE_SYNC);
        return 1;
    }
    if (c->count < c->cap) {
        ring_put(c, msg);
        CHAN_UNLOCK(c);
        return 1;
    }
    return 0;
}

/* Under the lock: as send_now, for a receive. -EPIPE when closed and empty. */
static int recv_now(usched_chan_t *c, void **msg)
{
    if (c->count) {
        *msg = ring_take(c);
        struct usched__waiter *s = usched__wq_pop(&c->sendq);
        if (s) {
            ring_put(c, s->msg);
            usched__wtok_t tok = usched__wq_claim(s, 0);
            CHAN_UNLOCK(c);
            usched__wq_wake(tok, 0);
            return 1;
        }
        CHAN_UNLOCK(c);
        return 1;
    }
    struct usched__waiter *s = usched__wq_pop(&c->sendq);
    if (s) {
        *msg = s->msg;
        usched__wtok_t tok = usched__wq_claim(s, 0);
        CHAN_UNLOCK(c);
        usched__wq_wake(tok, 0);
        return 1;
    }
    return c->closed ? -EPIPE : 0;
}

USCHED_EXPORT int usched_chan_send(usched_chan_t *c, void *msg)
{
    int rc = check(c, "chan_send");
    if (rc) return rc;
    CHAN_LOCK(c);
    if ((rc = send_now(c, msg)) != 0) {
        if (rc > 0) return 0;
        CHAN_UNLOCK(c);
        return usched__error(EPIPE, "chan_send: channel is closed");
    }
    struct usched__waiter w;
    usched__waiter_init(&w, USCHED__TBLK_chan);
    w.msg = msg;
    usched__wq_push(&c->sendq, &w);
    w.lk = &c->recvq; /* the channel lock guards the send queue too */
    rc = usched__wq_wait(&c->recvq, &w, UINT64_MAX);
    if (rc < 0) return usched__error(-rc, "chan_send: channel closed while waiting");
    return 0;
}

USCHED_EXPORT int usched_chan_try_send(usched_chan_t *c, void *msg)
{
    int rc = check(c, "chan_try_send");
    if (rc) return rc;
    CHAN_LOCK(c);
    rc = send_now(c, msg);
    if (rc > 0) return 0;
    CHAN_UNLOCK(c);
    if (rc < 0) return usched__error(EPIPE, "chan_try_send: channel is closed");
    return -EAGAIN;
}

static int chan_recv(usched_chan_t *c, void **msg, uint64_t timeout_ns, const char *op)
{
    int rc = check(c, op);
    if (rc) return rc;
    if (!msg) return usched__error(EINVAL, "%s: msg is NULL", op);
    CHAN_LOCK(c);
    if ((rc = recv_now(c, msg)) != 0) {
        if (rc > 0) return 0;
        CHAN_UNLOCK(c);
        return usched__error(EPIPE, "%s: channel is closed and drained", op);
    }
    if (timeout_ns == 0) {
        CHAN_UNLOCK(c);
        return -ETIMEDOUT;
    }
    struct usched__waiter w;
    usched__waiter_init(&w, USCHED__TBLK_chan);
    usched__wq_push(&c->recvq, &w);
    rc = usched__wq_wait(&c->recvq, &w, timeout_ns);
    if (rc == 0) {
        *msg = w.msg;
        return 0;
    }
    if (rc == -ETIMEDOUT) return rc;
    if (rc == -EPIPE) return usched__error(EPIPE, "%s: channel closed while waiting", op);
    return usched__error(-rc, "%s: cannot arm a timer", op);
}

USCHED_EXPORT int usched_chan_recv(usched_chan_t *c, void **msg)
{
    return chan_recv(c, msg, UINT64_MAX, "chan_recv");
}

USCHED_EXPORT int usched_chan_recv_timeout(usched_chan_t *c, void **msg, uint64_t timeout_ns)
{
    return chan_recv(c, msg, timeout_ns, "chan_recv_timeout");
}

USCHED_EXPORT int usched_chan_try_recv(usched_chan_t *c, void **msg)
{
    int rc = check(c, "chan_try_recv");
    if (rc) return rc;
    if (!msg) return usched__error(EINVAL, "chan_try_recv: msg is NULL");
    CHAN_LOCK(c);
    rc = recv_now(c, msg);
    if (rc > 0) return 0;
    CHAN_UNLOCK(c);
    if (rc < 0) return usched__error(EPIPE, "chan_try_recv: channel is closed and drained");
    return -EAGAIN;
}

USCHED_EXPORT int usched_chan_close(usched_chan_t *c)
{
    int rc = check(c, "chan_close");
    if (rc) return rc;
    CHAN_LOCK(c);
    if (c->closed) {
        CHAN_UNLOCK(c);
        return usched__error(EPIPE, "chan_close: channel is closed already");
    }
    c->closed = 1;
    /* Parked senders: their messages were not delivered. Parked receivers:
     * the ring is empty if any wait. */
    usched_task_t *chain = usched__wq_claim_all(&c->sendq, -EPIPE, NULL);
    chain = usched__wq_claim_all(&c->recvq, -EPIPE, chain);
    CHAN_UNLOCK(c);
    usched__wq_wake_chain(chain, 0);
    return 0;
}

USCHED_EXPORT int usched_chan_destroy(usched_chan_t *c)
{
    int rc = check(c, "chan_destroy");
    if (rc) return rc;
    CHAN_LOCK(c);
    uint32_t nw = c->recvq.nwaiters + c->sendq.nwaiters;
    if (nw) {
        CHAN_UNLOCK(c);
        return usched__error(EBUSY, "chan_destroy: %u fiber%s or thread%s still waiting", nw,
                             nw == 1 ? "" : "s", nw == 1 ? "" : "s");
    }
    c->magic = USCHED__SYNC_DEAD;
    CHAN_UNLOCK(c);
    free(c->ring);
    free(c);
    return 0;
}

int usched__chan_nwaiters(usched_chan_t *c)
{
    if (!c) return -EINVAL;
    return (int)(usched__wq_len(&c->recvq) + usched__wq_len(&c->sendq));
}
