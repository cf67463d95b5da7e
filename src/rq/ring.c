/*
 * ring_spmc: the per-CPU run queue ring (docs/queues.md), after Go's runq
 * (runqput/runqputslow/runqgrab) and Tokio's local queue, with a LIFO owner
 * end: the owner pushes and pops at the tail (newest first: fork-join trees
 * unfold depth first), consumers at the head take the oldest (thieves take
 * half with one CAS; the owner's FIFO pop and spill use the same CAS).
 * A solo ring (one CPU: nobody but the owner ever consumes) commits the
 * owner's moves of head with plain release stores instead (own_head_cas).
 *
 * Indices are free-running uint32_t counters; a slot is index & RQ_MASK, the
 * length is tail - head (modulo 2^32, so the counters may wrap). The head
 * word packs the head index (low 32 bits) with a tag (high 32 bits) that
 * every successful CAS on it increments. Who touches what:
 *   tail   - written by the owner only. Owner: relaxed load of its own value,
 *            release store after filling a slot. Others: acquire load.
 *   head   - advanced by every consumer (owner FIFO pop, thieves, owner
 *            spill) with a CAS; the owner also CASes it to take an item at
 *            the tail (only the tag moves) and to push at the head end
 *            (index - 1). Acquire load; CAS release on success.
 *   slots  - written by the owner (and by a thief into its own ring before it
 *            publishes its tail), read by anyone between head and tail;
 *            relaxed atomics: the ordering comes from head and tail.
 *
 * The pairings that make it work:
 *   R1. owner's release store of tail  ->  consumer's acquire load of tail:
 *       every slot below the tail a consumer saw holds the item pushed there.
 *   R2. consumer's release CAS of head ->  owner's acquire load of head:
 *       a consumer's reads of slots [h, h+n) happen before the owner reuses
 *       them, so a consumer whose CAS succeeds copied the items, not their
 *       successors. A consumer that read a reused slot fails its CAS (head
 *       moved past it before the owner could reuse it) and retries.
 * Consumers copy first and CAS second: the CAS is the commit, and a failed one
 * discards the copies.
 *
 * Owner takes at the tail (LIFO pop, or taking one given item out of the
 * middle for an inline join), protocol E1-E4:
 *   E1. find the item at index i in [h, t) (i = t - 1 for a pop);
 *   E2. store tail = i: consumers that load tail from now on stay below i;
 *   E3. CAS head (h, tag) -> (h, tag + 1), release, retried while head <= i.
 *       A consumer that loaded tail before E2 loaded head before E3 (it
 *       loads head first, acquire, and E3 is release after E2): its CAS
 *       expects the old tag, so it fails if E3 came first; if its CAS came
 *       first, it took at most half of what it saw, and E3 reloads head and
 *       sees whether item i went with it (head > i: stolen, restore tail = t
 *       and fail). After E3 no consumer can take index i or above;
 *   E4. move the items above i down one slot (they are beyond the tail, no
 *       consumer reads them) and store tail = t - 1, release (R1).
 * So the owner's pop costs one CAS, like Go's runqget, and a thief's
 * steal-half stays one CAS; a push stays a plain release store. A steal-half
 * without the tag would be wrong: a thief that read tail t could commit
 * after the owner popped t-1, t-2, ... without a CAS, taking them twice.
 * (The tag wraps after 2^32 CASes; a thief would have to stall across all
 * of them between its load and its CAS.)
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
    atomic_init(&r->head, (uint64_t)start);
    r->solo = false;
    atomic_init(&r->tail, start);
    for (unsigned i = 0; i < RQ_RING_SIZE; i++)
        atomic_init(&r->slots[i], NULL);
}

void usched__ring_init(usched__ring_spmc_t *r)
{
    usched__ring_init_at(r, 0);
}

void usched__ring_set_solo(usched__ring_spmc_t *r, bool solo)
{
    r->solo = solo;
}

static inline uint32_t own_tail(const usched__ring_spmc_t *r)
{
    /* Owner reading what only it writes: relaxed. */
    return atomic_load_explicit(&r->tail, memory_order_relaxed);
}

static inline uint32_t hidx(uint64_t hw) { return (uint32_t)hw; }

/* The head word after a CAS that moves the index to idx: tag + 1. */
static inline uint64_t hword(uint64_t old, uint32_t idx)
{
    return ((old >> 32) + 1) << 32 | idx;
}

static inline uint64_t load_head(const usched__ring_spmc_t *r)
{
    /* Acquire: pairs with the release CAS of head (R2, E3). */
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

/* A consumer other than the owner (a thief, the stall monitor) commits the
 * consumption of [h, h + n) of r. Release on success (R2); a failure only
 * tells the caller to retry, which reloads head with acquire. */
static inline bool head_cas(usched__ring_spmc_t *r, uint64_t hw, uint32_t n)
{
    return atomic_compare_exchange_strong_explicit(&r->head, &hw, hword(hw, hidx(hw) + n),
                                                   memory_order_release, memory_order_relaxed);
}

/* The owner commits the consumption of [h, h + n) (or, n = 0, only bumps
 * the tag, E3): head_cas, or on a solo ring, where nobody else moves head,
 * a plain release store that cannot fail. */
static inline bool own_head_cas(usched__ring_spmc_t *r, uint64_t hw, uint32_t n)
{
    if (r->solo) {
        atomic_store_explicit(&r->head, hword(hw, hidx(hw) + n), memory_order_release);
        return true;
    }
    return head_cas(r, hw, n);
}

static void thief_check(const usched__ring_spmc_t *victim)
{
    if (victim->solo) usched__rq_throw("ring_steal: ring %p is its owner's alone (solo)", (const void *)victim);
}

int usched__ring_push(usched__ring_spmc_t *r, void *item)
{
    uint32_t t = own_tail(r);
    if (t - hidx(load_head(r)) >= RQ_RING_SIZE) return -ENOSPC;
    slot_put(r, t, item);
    /* Release: publishes the slot to consumers (R1). */
    atomic_store_explicit(&r->tail, t + 1, memory_order_release);
    return 0;
}

unsigned usched__ring_push_or_spill(usched__ring_spmc_t *r, void *item, void **spill)
{
    for (;;) {
        uint32_t t = own_tail(r);
        uint64_t hw = load_head(r);
        uint32_t h = hidx(hw);
        if (t - h < RQ_RING_SIZE) {
            slot_put(r, t, item);
            atomic_store_explicit(&r->tail, t + 1, memory_order_release); /* R1 */
            return 0;
        }
        /* Full: take the older half like a thief would (copy, then CAS). */
        for (uint32_t i = 0; i < RQ_HALF; i++)
            spill[i] = slot_get(r, h + i);
        if (own_head_cas(r, hw, RQ_HALF)) {
            /* The new item stays: it is the newest, the next the owner's
             * LIFO pop takes, and the global queue keeps spawn order. */
            slot_put(r, t, item);
            atomic_store_explicit(&r->tail, t + 1, memory_order_release); /* R1 */
            return RQ_HALF;
        }
        /* A thief took some: there is room now, so the next pass pushes. */
    }
}

void *usched__ring_pop(usched__ring_spmc_t *r)
{
    for (;;) {
        uint64_t hw = load_head(r);
        uint32_t h = hidx(hw);
        uint32_t t = own_tail(r);
        if (t == h) return NULL;
        void *item = slot_get(r, h);
        if (own_head_cas(r, hw, 1)) return item;
    }
}

/* E2-E4 for the item at index i of [h, t) (hw: the head word read at E1).
 * True when the item at i is the caller's, now out of the ring. */
static bool take_at(usched__ring_spmc_t *r, uint64_t hw, uint32_t t, uint32_t i)
{
    uint32_t h = hidx(hw);
    /* E2. Release, like every store of tail: a consumer that reads this
     * value must also see the items below it (R1). */
    atomic_store_explicit(&r->tail, i, memory_order_release);
    while (!own_head_cas(r, hw, 0)) {                         /* E3 */
        hw = load_head(r);
        if (hidx(hw) - h > i - h) {
            /* A consumer took index i: [head, t) is still intact. */
            atomic_store_explicit(&r->tail, t, memory_order_release);
            return false;
        }
    }
    for (uint32_t j = i; j + 1 != t; j++) /* E4 */
        slot_put(r, j, slot_get(r, j + 1));
    atomic_store_explicit(&r->tail, t - 1, memory_order_release); /* R1 */
    return true;
}

void *usched__ring_pop_lifo(usched__ring_spmc_t *r)
{
    uint32_t t = own_tail(r);
    uint64_t hw = load_head(r);
    if (t == hidx(hw)) return NULL;
    void *item = slot_get(r, t - 1); /* E1 */
    return take_at(r, hw, t, t - 1) ? item : NULL;
}

void *usched__ring_peek_lifo(const usched__ring_spmc_t *r)
{
    uint32_t t = own_tail(r);
    return t == hidx(load_head(r)) ? NULL : slot_get(r, t - 1);
}

void *usched__ring_peek_head(const usched__ring_spmc_t *r)
{
    uint32_t t = own_tail(r), h = hidx(load_head(r));
    return t == h ? NULL : slot_get(r, h);
}

bool usched__ring_take(usched__ring_spmc_t *r, const void *item)
{
    for (;;) {
        uint32_t t = own_tail(r);
        uint64_t hw = load_head(r);
        uint32_t h = hidx(hw), i = t;
        if (t == h) return false;
        /* E1: the oldest first (joins in spawn order find their child
         * there), then newest first (the child spawned last). */
        if (slot_get(r, h) != item) {
            do {
                if (--i == h) return false;
            } while (slot_get(r, i) != item);
            return take_at(r, hw, t, i);
        }
        /* The oldest: a consumer's CAS, nothing to move. A failed CAS
         * means a consumer moved head; look again. */
        if (own_head_cas(r, hw, 1)) return true;
    }
}

int usched__ring_push_head(usched__ring_spmc_t *r, void *item)
{
    for (;;) {
        uint64_t hw = load_head(r);
        uint32_t h = hidx(hw);
        if (own_tail(r) - h >= RQ_RING_SIZE) return -ENOSPC;
        /* Slot h - 1 is beyond the tail (the ring is not full), so no
         * consumer reads it before the release CAS publishes it. */
        slot_put(r, h - 1, item);
        if (own_head_cas(r, hw, (uint32_t)-1)) return 0;
    }
}

/* Copies half (rounded up) of victim's items into thief's slots from index
 * `to` and commits with one CAS on victim's head; returns how many (0 when the
 * victim is empty). Go's runqgrab. */
static uint32_t grab(usched__ring_spmc_t *victim, usched__ring_spmc_t *thief, uint32_t to)
{
    for (;;) {
        uint64_t hw = load_head(victim);
        uint32_t h = hidx(hw);
        /* Acquire: pairs with the victim owner's release store (R1). */
        uint32_t t = atomic_load_explicit(&victim->tail, memory_order_acquire);
        uint32_t n = t - h;
        if (n == 0) return 0;
        n -= n / 2;
        /* h was loaded before t, so a stale h can make t - h look larger than
         * the ring (a racing spill, or the owner's E2 lowering the tail below
         * a head that moved, can make it so briefly): reload. */
        if (n > RQ_HALF) continue;
        for (uint32_t i = 0; i < n; i++)
            slot_put(thief, to + i, slot_get(victim, h + i));
        if (head_cas(victim, hw, n)) return n;
    }
}

void *usched__ring_steal(usched__ring_spmc_t *victim, usched__ring_spmc_t *thief,
                         unsigned *taken)
{
    if (victim == thief) usched__rq_throw("ring_steal: victim and thief are the same ring %p", (void *)victim);
    thief_check(victim);
    uint32_t t = own_tail(thief);
    uint32_t used = t - hidx(load_head(thief));
    if (used > RQ_RING_SIZE - RQ_HALF)
        usched__rq_throw("ring_steal: thief ring %p holds %u items, no room for %u",
                         (void *)thief, used, RQ_HALF);
    uint32_t n = grab(victim, thief, t);
    if (taken) *taken = n;
    if (n == 0) return NULL;
    void *last = slot_get(thief, t + n - 1);
    if (n > 1) atomic_store_explicit(&thief->tail, t + n - 1, memory_order_release); /* R1 */
    return last;
}

void *usched__ring_steal_one(usched__ring_spmc_t *victim)
{
    thief_check(victim);
    for (;;) {
        uint64_t hw = load_head(victim);
        uint32_t h = hidx(hw);
        /* Acquire: pairs with the victim owner's release store of tail (R1). */
        uint32_t t = atomic_load_explicit(&victim->tail, memory_order_acquire);
        uint32_t n = t - h;
        if (n == 0) return NULL;
        if (n > RQ_RING_SIZE) continue; /* h went stale before t was read (or E2) */
        /* Read the slot before the CAS: once head passes h the owner may
         * overwrite it, and then our CAS fails. */
        void *item = slot_get(victim, h);
        if (head_cas(victim, hw, 1)) return item;
    }
}

void usched__ring_ends(const usched__ring_spmc_t *r, uint32_t *head, uint32_t *tail)
{
    /* If the head word (index and tag) is unchanged around the tail load,
     * then (h, t) was the state at the moment tail was read. */
    for (;;) {
        uint64_t hw = load_head(r);
        uint32_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (load_head(r) == hw) {
            *head = hidx(hw);
            *tail = t;
            return;
        }
    }
}

uint32_t usched__ring_len(const usched__ring_spmc_t *r)
{
    uint32_t h, t;
    usched__ring_ends(r, &h, &t);
    return usched__ring_count(h, t);
}
