/*
 * Counting semaphore and waitgroup, on the wait queue's lock.
 *
 * Semaphore: post hands its permit straight to the first waiter (the value
 * does not move), so a waiter is never overtaken by a newcomer and never
 * wakes to find the permit gone. Waitgroup: the count is changed under the
 * lock; reaching 0 claims every waiter at once, so a waiter that arrives
 * after a later wg_add waits for the new round, never the old one.
 */
#include <errno.h>

#include "base/error.h"
#include "base/export.h"
#include "sync/waitq.h"

#define SEM_MAX 0xffffffffull

static int scheck(const usched_sem_t *s, const char *op)
{
    return usched__sync_check(s, s ? &s->_magic : NULL, "sem", op);
}

static int wcheck(const usched_wg_t *w, const char *op)
{
    return usched__sync_check(w, w ? &w->_magic : NULL, "wg", op);
}

/* Links the caller on q (locked) and parks until claimed. */
static int park(struct usched__waitq *q, int blk)
{
    struct usched__waiter w;
    usched__waiter_init(&w, blk);
    usched__wq_push(q, &w);
    return usched__wq_wait(q, &w, UINT64_MAX);
}

USCHED_EXPORT int usched_sem_init(usched_sem_t *s, unsigned value)
{
    int rc = usched__sync_init(s, sizeof *s, s ? &s->_magic : NULL, "sem");
    if (!rc) s->_value = value;
    return rc;
}

USCHED_EXPORT int usched_sem_destroy(usched_sem_t *s)
{
    int rc = scheck(s, "sem_destroy");
    if (rc) return rc;
    return usched__sync_destroy_idle(&s->_wq, &s->_magic, "sem");
}

USCHED_EXPORT int usched_sem_wait(usched_sem_t *s)
{
    int rc = scheck(s, "sem_wait");
    if (rc) return rc;
    usched__wq_lock(&s->_wq);
    if (s->_value) {
        s->_value--;
        usched__wq_unlock(&s->_wq);
        return 0;
    }
    return park(&s->_wq, USCHED__TBLK_sem); /* woken holding the poster's permit */
}

USCHED_EXPORT int usched_sem_post(usched_sem_t *s)
{
    int rc = scheck(s, "sem_post");
    if (rc) return rc;
    usched__wq_lock(&s->_wq);
    struct usched__waiter *w = usched__wq_pop(&s->_wq);
    if (w) {
        usched__wtok_t tok = usched__wq_claim(w, 0);
        usched__wq_unlock(&s->_wq);
        usched__wq_wake(tok, 0);
        return 0;
    }
    if (s->_value >= SEM_MAX) {
        usched__wq_unlock(&s->_wq);
        return usched__error(EOVERFLOW, "sem_post: the value would exceed %llu", SEM_MAX);
    }
    s->_value++;
    usched__wq_unlock(&s->_wq);
    return 0;
}

USCHED_EXPORT int usched_wg_init(usched_wg_t *w)
{
    return usched__sync_init(w, sizeof *w, w ? &w->_magic : NULL, "wg");
}

USCHED_EXPORT int usched_wg_destroy(usched_wg_t *w)
{
    int rc = wcheck(w, "wg_destroy");
    if (rc) return rc;
    return usched__sync_destroy_idle(&w->_wq, &w->_magic, "wg");
}

static int wg_add(usched_wg_t *w, int n, const char *op)
{
    int rc = wcheck(w, op);
    if (rc) return rc;
    usched__wq_lock(&w->_wq);
    int64_t now = w->_count + n;
    if (now < 0) {
        int64_t was = w->_count;
        usched__wq_unlock(&w->_wq);
        return usched__error(EINVAL, "%s: the count would become negative (%lld%+d)", op,
                             (long long)was, n);
    }
    w->_count = now;
    if (now > 0 || !w->_wq.nwaiters) {
        usched__wq_unlock(&w->_wq);
        return 0;
    }
    usched_task_t *chain = usched__wq_claim_all(&w->_wq, 0, NULL);
    usched__wq_unlock(&w->_wq);
    usched__wq_wake_chain(chain, 0);
    return 0;
}

USCHED_EXPORT int usched_wg_add(usched_wg_t *w, int n)
{
    return wg_add(w, n, "wg_add");
}

USCHED_EXPORT int usched_wg_done(usched_wg_t *w)
{
    return wg_add(w, -1, "wg_done");
}

USCHED_EXPORT int usched_wg_wait(usched_wg_t *w)
{
    int rc = wcheck(w, "wg_wait");
    if (rc) return rc;
    usched__wq_lock(&w->_wq);
    if (w->_count == 0) {
        usched__wq_unlock(&w->_wq);
        return 0;
    }
    return park(&w->_wq, USCHED__TBLK_wg);
}
