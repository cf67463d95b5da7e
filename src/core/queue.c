/* The global queue's locked half (the inline half is in core/queue.h). */
#include <linux/membarrier.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/queue.h"

void usched__gq_push_many(struct usched *s, struct usched_task **v, unsigned n)
{
    if (!n) return;
    pthread_mutex_lock(&s->gq.lock);
    for (unsigned i = 0; i < n; i++) {
        v[i]->qnext = NULL;
        atomic_store_explicit(&v[i]->in_gq, 1, memory_order_relaxed);
        if (s->gq.tail)
            s->gq.tail->qnext = v[i];
        else
            s->gq.head = v[i];
        s->gq.tail = v[i];
    }
    atomic_store_explicit(&s->gq.n, atomic_load_explicit(&s->gq.n, memory_order_relaxed) + n,
                          memory_order_seq_cst);
    pthread_mutex_unlock(&s->gq.lock);
}

/* Under gq_lock: unlinks the oldest fiber (the queue is not empty). */
static struct usched_task *gq_unlink_head(struct usched *s)
{
    struct usched_task *t = s->gq.head;
    atomic_store_explicit(&t->in_gq, 0, memory_order_relaxed);
    s->gq.head = t->qnext;
    if (!s->gq.head) s->gq.tail = NULL;
    atomic_store_explicit(&s->gq.n, atomic_load_explicit(&s->gq.n, memory_order_relaxed) - 1,
                          memory_order_release);
    return t;
}

bool usched__gq_take_head(struct usched *s, struct usched_task *t)
{
    if (atomic_load_explicit(&s->gq.n, memory_order_acquire) == 0) return false;
    pthread_mutex_lock(&s->gq.lock);
    bool ok = s->gq.head == t;
    if (ok) gq_unlink_head(s);
    pthread_mutex_unlock(&s->gq.lock);
    return ok;
}

struct usched_task *usched__gq_pop_locked(struct usched *s)
{
    pthread_mutex_lock(&s->gq.lock);
    struct usched_task *t = s->gq.head ? gq_unlink_head(s) : NULL;
    pthread_mutex_unlock(&s->gq.lock);
    return t;
}

/* ---- the next slot's rare side (N2-N4, core/queue.h) ---------------------- */

static long membarrier(int cmd)
{
    return syscall(SYS_membarrier, cmd, 0, 0);
}

void usched__next_asym_init(struct usched *s)
{
    /* Registration is per process and may be repeated. USCHED_NO_MEMBARRIER
     * (any value) keeps the locked protocol, for comparison and for
     * sandboxes that allow the syscall but slow it down. */
    long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    s->next_asym = !getenv("USCHED_NO_MEMBARRIER") && cmds > 0 &&
                   (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                   membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

/* The fiber is the taker's only if the CAS from t to NULL succeeds [model: NXC]: a
 * load and a store instead would let the owner take t between them (both
 * would run it) or drop a fiber the owner put there since. */
bool usched__wk_next_steal(struct usched *s, struct usched__wk *w, struct usched_task *t)
{
    if (!s->next_asym) return atomic_compare_exchange_strong(&w->next, &t, NULL);
    uint32_t zero = 0;
    if (!atomic_compare_exchange_strong(&w->next_thief, &zero, 1)) return false; /* N2 */
    bool ok = membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0 &&            /* N3 */
              !atomic_load_explicit(&w->next_owner, memory_order_acquire) &&  /* N4 */
              atomic_compare_exchange_strong(&w->next, &t, NULL);
    atomic_store_explicit(&w->next_thief, 0, memory_order_release);
    return ok;
}
