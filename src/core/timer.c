/*
 * Timers: one binary min-heap per CPU under a spinlock. The owning worker
 * fires due timers from its host context (between fibers, and before it
 * parks, with the futex timeout set to the earliest deadline); any thread
 * may cancel. Slack: a timer fires at its deadline plus at most the time
 * until its CPU next looks (every 16 picks while busy; at once when idle)
 * plus the kernel's futex timeout slack (~50-100 us in this VM).
 */
#include <errno.h>
#include <stdlib.h>

#include "core/core.h"

void usched__timers_init(struct usched__wk *w)
{
    w->theap = NULL;
    w->tcap = 0;
    atomic_store(&w->ntimers, 0);
}

void usched__timers_fini(struct usched__wk *w)
{
    free(w->theap);
    w->theap = NULL;
}

static void swap_at(usched__timer_t **h, int a, int b)
{
    usched__timer_t *t = h[a];
    h[a] = h[b];
    h[b] = t;
    h[a]->heap_index = a;
    h[b]->heap_index = b;
}

static void sift_up(usched__timer_t **h, int i)
{
    while (i > 0) {
        int p = (i - 1) / 2;
        if (h[p]->deadline_ns <= h[i]->deadline_ns) break;
        swap_at(h, p, i);
        i = p;
    }
}

static void sift_down(usched__timer_t **h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l]->deadline_ns < h[m]->deadline_ns) m = l;
        if (r < n && h[r]->deadline_ns < h[m]->deadline_ns) m = r;
        if (m == i) return;
        swap_at(h, m, i);
        i = m;
    }
}

/* Removes index i; under tlock. */
static void heap_remove(struct usched__wk *w, int i)
{
    int n = (int)atomic_load_explicit(&w->ntimers, memory_order_relaxed) - 1;
    usched__timer_t **h = w->theap;
    h[i]->heap_index = -1;
    if (i != n) {
        h[i] = h[n];
        h[i]->heap_index = i;
        sift_down(h, n, i);
        sift_up(h, i);
    }
    atomic_store_explicit(&w->ntimers, (uint32_t)n, memory_order_relaxed);
}

int usched__timer_add(usched__timer_t *t)
{
    struct usched__wk *w = usched__self_wk();
    if (!w || !w->cur) return -EPERM;
    usched__spin_lock(&w->tlock);
    int n = (int)atomic_load_explicit(&w->ntimers, memory_order_relaxed);
    if (n == w->tcap) {
        int cap = w->tcap ? 2 * w->tcap : 64;
        usched__timer_t **h = realloc(w->theap, (size_t)cap * sizeof *h);
        if (!h) {
            usched__spin_unlock(&w->tlock);
            return -ENOMEM;
        }
        w->theap = h;
        w->tcap = cap;
    }
    t->cpu = w->cpu;
    t->owner = w;
    t->heap_index = n;
    w->theap[n] = t;
    sift_up(w->theap, n);
    atomic_store_explicit(&w->ntimers, (uint32_t)n + 1, memory_order_relaxed);
    usched__spin_unlock(&w->tlock);
    return 0;
}

bool usched__timer_cancel(usched__timer_t *t)
{
    /* A queued timer stays on its worker's heap; a fired or cancelled one
     * has heap_index -1 (set under that heap's lock). */
    struct usched__wk *w = t->owner;
    if (!w) return false;
    usched__spin_lock(&w->tlock);
    bool removed = t->heap_index >= 0;
    if (removed) heap_remove(w, t->heap_index);
    usched__spin_unlock(&w->tlock);
    return removed;
}

void usched__timers_run(struct usched__wk *w, uint64_t now)
{
    for (;;) {
        usched__spin_lock(&w->tlock);
        if (!atomic_load_explicit(&w->ntimers, memory_order_relaxed) ||
            w->theap[0]->deadline_ns > now) {
            usched__spin_unlock(&w->tlock);
            return;
        }
        usched__timer_t *t = w->theap[0];
        heap_remove(w, 0);
        usched__spin_unlock(&w->tlock);
        t->fn(t);
    }
}

uint64_t usched__timers_next(struct usched__wk *w)
{
    usched__spin_lock(&w->tlock);
    uint64_t d = atomic_load_explicit(&w->ntimers, memory_order_relaxed) ? w->theap[0]->deadline_ns
                                                                        : UINT64_MAX;
    usched__spin_unlock(&w->tlock);
    return d;
}
