/*
 * Timers: one binary min-heap per CPU (core/timer.h). Slack: a timer fires
 * at its deadline plus at most the time until its CPU next looks (every 16
 * picks while busy; at once when idle) plus the kernel's futex timeout slack
 * (~50-100 us in this VM).
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "base/fault.h"
#include "base/atomic.h"
#include "core/timer.h"

uint64_t usched__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void usched__timers_init(usched__timers_t *h)
{
    h->heap = NULL;
    h->cap = 0;
    atomic_store(&h->n, 0);
    atomic_store(&h->first, UINT64_MAX);
    atomic_store(&h->lock, 0);
}

void usched__timers_fini(usched__timers_t *h)
{
    free(h->heap);
    h->heap = NULL;
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

/* Removes index i; under the heap's lock. */
static void heap_remove(usched__timers_t *q, int i)
{
    int n = (int)atomic_load_explicit(&q->n, memory_order_relaxed) - 1;
    usched__timer_t **h = q->heap;
    h[i]->heap_index = -1;
    if (i != n) {
        h[i] = h[n];
        h[i]->heap_index = i;
        sift_down(h, n, i);
        sift_up(h, i);
    }
    atomic_store_explicit(&q->n, (uint32_t)n, memory_order_relaxed);
    atomic_store_explicit(&q->first, n ? h[0]->deadline_ns : UINT64_MAX, memory_order_release);
}

int usched__timers_add(usched__timers_t *q, usched__timer_t *t, int cpu)
{
    usched__spin_lock(&q->lock);
    int n = (int)atomic_load_explicit(&q->n, memory_order_relaxed);
    if (n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 64;
        usched__timer_t **h = usched__realloc(q->heap, (size_t)cap * sizeof *h);
        if (!h) {
            usched__spin_unlock(&q->lock);
            return -ENOMEM;
        }
        q->heap = h;
        q->cap = cap;
    }
    t->cpu = cpu;
    t->owner = q;
    t->heap_index = n;
    q->heap[n] = t;
    sift_up(q->heap, n);
    atomic_store_explicit(&q->n, (uint32_t)n + 1, memory_order_relaxed);
    atomic_store_explicit(&q->first, q->heap[0]->deadline_ns, memory_order_release);
    usched__spin_unlock(&q->lock);
    return 0;
}

bool usched__timer_cancel(usched__timer_t *t)
{
    /* A queued timer stays on its CPU's heap; a fired or cancelled one has
     * heap_index -1 (set under that heap's lock). */
    usched__timers_t *q = t->owner;
    if (!q) return false;
    usched__spin_lock(&q->lock);
    bool removed = t->heap_index >= 0;
    if (removed) heap_remove(q, t->heap_index);
    usched__spin_unlock(&q->lock);
    return removed;
}

int usched__timers_run_guarded(usched__timers_t *q, uint64_t now,
                               bool (*may_fire)(const usched__timer_t *t, void *arg), void *arg)
{
    int fired = 0;
    /* Nothing due: no lock (every idle pass of a worker asks, and a
     * server's reads keep an idle timeout queued that is far off). */
    if (atomic_load_explicit(&q->first, memory_order_acquire) > now) return 0;
    for (;; fired++) {
        usched__spin_lock(&q->lock);
        if (!atomic_load_explicit(&q->n, memory_order_relaxed) || q->heap[0]->deadline_ns > now ||
            (may_fire && !may_fire(q->heap[0], arg))) {
            usched__spin_unlock(&q->lock);
            return fired;
        }
        usched__timer_t *t = q->heap[0];
        heap_remove(q, 0);
        usched__spin_unlock(&q->lock);
        t->fn(t);
    }
}

void usched__timers_run(usched__timers_t *q, uint64_t now)
{
    usched__timers_run_guarded(q, now, NULL, NULL);
}

uint64_t usched__timers_next(usched__timers_t *q)
{
    return atomic_load_explicit(&q->first, memory_order_acquire);
}
