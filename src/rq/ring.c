/*
 * ring_spmc: the per-CPU run queue ring (DESIGN section 5), after Go's runq
 * (runqput/runqputslow/runqget/runqgrab) and Tokio's local queue.
 *
 * Indices are free-running uint32_t counters; a slot is index & RQ_MASK, the
 * length is tail - head (modulo 2^32, so the counters may wrap). Who touches
 * what:
 *   tail   - written by the owner only. Owner: relaxed load of its own value,
 *            release store after filling a slot. Others: acquire load.
 *   head   - advanced by every consumer (owner pop, thieves, owner spill) with
 *            a CAS. Acquire load; CAS release on success.
 *   slots  - written by the owner (and by a thief into its own ring before it
 *            publishes its tail), read by anyone between head and tail;
 *            relaxed atomics: the ordering comes from head and tail.
 *
 * The two pairings that make it work:
 *   P1. owner's release store of tail  ->  consumer's acquire load of tail:
 *       every slot below the tail a consumer saw holds the item pushed there.
 *   P2. consumer's release CAS of head ->  owner's acquire load of head:
 *       a consumer's reads of slots [h, h+n) happen before the owner reuses
 *       them, so a consumer whose CAS succeeds copied the items, not their
 *       successors. A consumer that read a reused slot fails its CAS (head
 *       moved past it before the owner could reuse it) and retries.
 * Consumers copy first and CAS second: the CAS is the commit, and a failed one
 * discards the copies.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "rq/rq.h"

#define RQ_MASK (RQ_RING_SIZE - 1u)
#define RQ_HALF (RQ_RING_SIZE / 2u)

_Static_assert((RQ_RING_SIZE & RQ_MASK) == 0, "RQ_RING_SIZE must be a power of two");

void usched__rq_throw(const char *fmt, ...)
{
    va_list ap;
    fputs("usched: fatal: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}

void usched__ring_init_at(usched__ring_spmc_t *r, uint32_t start)
{
    atomic_init(&r->head, start);
    atomic_init(&r->tail, start);
    for (unsigned i = 0; i < RQ_RING_SIZE; i++)
        atomic_init(&r->slots[i], NULL);
}

void usched__ring_init(usched__ring_spmc_t *r)
{
    usched__ring_init_at(r, 0);
}

static inline uint32_t own_tail(const usched__ring_spmc_t *r)
{
    /* Owner reading what only it writes: relaxed. */
    return atomic_load_explicit(&r->tail, memory_order_relaxed);
}

static inline uint32_t load_head(const usched__ring_spmc_t *r)
{
    /* Acquire: pairs with the release CAS of head (P2). */
    return atomic_load_explicit(&r->head, memory_order_acquire);
}

static inline void *slot_get(const usched__ring_spmc_t *r, uint32_t i)
{
    return atomic_load_explicit(&r->slots[i & RQ_MASK], memory_order_relaxed);
}

static inline void slot_put(usched__ring_spmc_t *r, uint32_t i, void *item)
{
    atomic_store_explicit(&r->slots[i & RQ_MASK], item, memory_order_relaxed);
}

/* Commits the consumption of [h, h + n). Release on success (P2); a failure
 * only tells the caller to retry, which reloads head with acquire. */
static inline bool head_cas(usched__ring_spmc_t *r, uint32_t h, uint32_t n)
{
    return atomic_compare_exchange_strong_explicit(&r->head, &h, h + n, memory_order_release,
                                                   memory_order_relaxed);
}

int usched__ring_push(usched__ring_spmc_t *r, void *item)
{
    uint32_t t = own_tail(r);
    if (t - load_head(r) >= RQ_RING_SIZE) return -ENOSPC;
    slot_put(r, t, item);
    /* Release: publishes the slot to consumers (P1). */
    atomic_store_explicit(&r->tail, t + 1, memory_order_release);
    return 0;
}

unsigned usched__ring_push_or_spill(usched__ring_spmc_t *r, void *item, void **spill)
{
    for (;;) {
        uint32_t t = own_tail(r);
        uint32_t h = load_head(r);
        if (t - h < RQ_RING_SIZE) {
            slot_put(r, t, item);
            atomic_store_explicit(&r->tail, t + 1, memory_order_release); /* P1 */
            return 0;
        }
        /* Full: take the older half like a thief would (copy, then CAS). */
        for (uint32_t i = 0; i < RQ_HALF; i++)
            spill[i] = slot_get(r, h + i);
        if (head_cas(r, h, RQ_HALF)) {
            spill[RQ_HALF] = item;
            return RQ_HALF + 1;
        }
        /* A thief took some: there is room now, so the next pass pushes. */
    }
}

void *usched__ring_pop(usched__ring_spmc_t *r)
{
    for (;;) {
        uint32_t h = load_head(r);
        uint32_t t = own_tail(r);
        if (t == h) return NULL;
        void *item = slot_get(r, h);
        if (head_cas(r, h, 1)) return item;
    }
}

/* Copies half (rounded up) of victim's items into thief's slots from index
 * `to` and commits with one CAS on victim's head; returns how many (0 when the
 * victim is empty). Go's runqgrab. */
static uint32_t grab(usched__ring_spmc_t *victim, usched__ring_spmc_t *thief, uint32_t to)
{
    for (;;) {
        uint32_t h = load_head(victim);
        /* Acquire: pairs with the victim owner's release store (P1). */
        uint32_t t = atomic_load_explicit(&victim->tail, memory_order_acquire);
        uint32_t n = t - h;
        if (n == 0) return 0;
        n -= n / 2;
        /* h was loaded before t, so a stale h can make t - h look larger than
         * the ring (or a racing spill can make it briefly so): reload. */
        if (n > RQ_HALF) continue;
        for (uint32_t i = 0; i < n; i++)
            slot_put(thief, to + i, slot_get(victim, h + i));
        if (head_cas(victim, h, n)) return n;
    }
}

void *usched__ring_steal(usched__ring_spmc_t *victim, usched__ring_spmc_t *thief,
                         unsigned *taken)
{
    if (victim == thief) usched__rq_throw("ring_steal: victim and thief are the same ring %p", (void *)victim);
    uint32_t t = own_tail(thief);
    uint32_t used = t - load_head(thief);
    if (used > RQ_RING_SIZE - RQ_HALF)
        usched__rq_throw("ring_steal: thief ring %p holds %u items, no room for %u",
                         (void *)thief, used, RQ_HALF);
    uint32_t n = grab(victim, thief, t);
    if (taken) *taken = n;
    if (n == 0) return NULL;
    void *last = slot_get(thief, t + n - 1);
    if (n > 1) atomic_store_explicit(&thief->tail, t + n - 1, memory_order_release); /* P1 */
    return last;
}

void *usched__ring_steal_one(usched__ring_spmc_t *victim)
{
    for (;;) {
        uint32_t h = load_head(victim);
        /* Acquire: pairs with the victim owner's release store of tail (P1). */
        uint32_t t = atomic_load_explicit(&victim->tail, memory_order_acquire);
        uint32_t n = t - h;
        if (n == 0) return NULL;
        if (n > RQ_RING_SIZE) continue; /* h went stale before t was read */
        /* Read the slot before the CAS: once head passes h the owner may
         * overwrite it, and then our CAS fails. */
        void *item = slot_get(victim, h);
        if (head_cas(victim, h, 1)) return item;
    }
}

uint32_t usched__ring_len(const usched__ring_spmc_t *r)
{
    /* head is monotonic: if it is unchanged around the tail load, then
     * (h, t) was the state at the moment tail was read, and t - h is a
     * consistent length in [0, RQ_RING_SIZE]. */
    for (;;) {
        uint32_t h = load_head(r);
        uint32_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (load_head(r) == h) return t - h;
    }
}
