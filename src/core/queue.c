/* The global queue's locked half (the inline half is in core/queue.h). */
#include "core/queue.h"

void usched__gq_push_many(struct usched *s, struct usched_task **v, unsigned n)
{
    if (!n) return;
    pthread_mutex_lock(&s->gq_lock);
    for (unsigned i = 0; i < n; i++) {
        v[i]->qnext = NULL;
        atomic_store_explicit(&v[i]->in_gq, 1, memory_order_relaxed);
        if (s->gq_tail)
            s->gq_tail->qnext = v[i];
        else
            s->gq_head = v[i];
        s->gq_tail = v[i];
    }
    atomic_store_explicit(&s->gq_n, atomic_load_explicit(&s->gq_n, memory_order_relaxed) + n,
                          memory_order_seq_cst);
    pthread_mutex_unlock(&s->gq_lock);
}

/* Under gq_lock: unlinks the oldest fiber (the queue is not empty). */
static struct usched_task *gq_unlink_head(struct usched *s)
{
    struct usched_task *t = s->gq_head;
    atomic_store_explicit(&t->in_gq, 0, memory_order_relaxed);
    s->gq_head = t->qnext;
    if (!s->gq_head) s->gq_tail = NULL;
    atomic_store_explicit(&s->gq_n, atomic_load_explicit(&s->gq_n, memory_order_relaxed) - 1,
                          memory_order_release);
    return t;
}

bool usched__gq_take_head(struct usched *s, struct usched_task *t)
{
    if (atomic_load_explicit(&s->gq_n, memory_order_acquire) == 0) return false;
    pthread_mutex_lock(&s->gq_lock);
    bool ok = s->gq_head == t;
    if (ok) gq_unlink_head(s);
    pthread_mutex_unlock(&s->gq_lock);
    return ok;
}

struct usched_task *usched__gq_pop_locked(struct usched *s)
{
    pthread_mutex_lock(&s->gq_lock);
    struct usched_task *t = s->gq_head ? gq_unlink_head(s) : NULL;
    pthread_mutex_unlock(&s->gq_lock);
    return t;
}
