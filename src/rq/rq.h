/*
 * Per-CPU queue building blocks (docs/queues.md), all lock-free:
 *   ring_spmc  - ring of RQ_RING_SIZE slots: the owner pushes and pops at the
 *                tail (LIFO), thieves take the oldest half with one CAS (Go's
 *                runq, Tokio's local queue, with a work-first owner end);
 *   inbox_mpsc - intrusive multi-producer single-consumer list through which
 *                other CPUs hand fibers to this CPU (Vyukov's queue;
 *                FreeBSD ULE's "assign" list);
 *   idlemask   - an array of atomic words, one bit per CPU (or core), searched
 *                in O(words) within a group mask.
 * Items are opaque pointers (fibers); these structures never dereference them.
 */
#ifndef USCHED_RQ_H
#define USCHED_RQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define USCHED_CACHELINE 64
#define RQ_RING_SIZE 1024u /* power of two */

/* Reports a broken invariant (a caller's bug) on stderr and aborts. */
void usched__rq_throw(const char *fmt, ...)
    __attribute__((noreturn, format(printf, 1, 2), cold));

/* ---- ring_spmc ------------------------------------------------------------ */
/* Memory orderings and the pairings they rely on: top of src/rq/ring.c. */
typedef struct usched__ring_spmc {
    /* head: index (low 32 bits) and tag (high 32, +1 on every CAS).
     * Consumers (owner FIFO pop, owner spill, thieves) advance it with a CAS
     * after copying the items (release on success); the owner's LIFO pop and
     * take CAS only its tag, a push at the head moves it back by one. Acquire
     * loads. The owner's acquire load pairs with that CAS before it reuses a
     * slot. */
    _Atomic uint64_t head __attribute__((aligned(USCHED_CACHELINE)));
    /* solo: no consumer but the owner will ever touch this ring (set before
     * the ring is shared, usched__ring_set_solo): the owner's commits of
     * head are plain stores, not CASes. */
    bool solo;
    /* tail: written by the owner only (release store), read by thieves. */
    _Atomic uint32_t tail __attribute__((aligned(USCHED_CACHELINE)));
    void *_Atomic slots[RQ_RING_SIZE];
} usched__ring_spmc_t;

void usched__ring_init(usched__ring_spmc_t *r);
/* As ring_init, with head = tail = start (tests of index wrap-around). */
void usched__ring_init_at(usched__ring_spmc_t *r, uint32_t start);
/* Before any other thread sees the ring: `solo` true promises that only
 * its owner will ever push, pop or take (no thief, no steal_one): then the
 * owner's pops, takes, spills and head pushes commit with a plain store of
 * head instead of a CAS (a locked instruction costs about 9 ns on the
 * development VM). The steal functions abort on a solo ring. */
void usched__ring_set_solo(usched__ring_spmc_t *r, bool solo);
/* Owner only. Pushes at the tail; -ENOSPC when full (nothing changed). */
int usched__ring_push(usched__ring_spmc_t *r, void *item);
/* Owner only. Pushes `item`; when the ring is full, first moves the oldest
 * half of it into spill[] (capacity RQ_RING_SIZE/2) and returns how many
 * were moved (RQ_RING_SIZE/2), else returns 0. The caller puts spill[] on
 * the global queue in order. */
unsigned usched__ring_push_or_spill(usched__ring_spmc_t *r, void *item, void **spill);
/* Owner only. Pops the oldest item (the head end: FIFO); NULL when empty. */
void *usched__ring_pop(usched__ring_spmc_t *r);
/* Owner only. Pops the newest item (the tail end: LIFO) with one CAS (E1-E4
 * in ring.c); NULL when empty or when a thief took the last one. */
void *usched__ring_pop_lifo(usched__ring_spmc_t *r);
/* Owner only. The item the next LIFO pop would return, or NULL when empty;
 * a hint (a thief may take it first), for prefetching. */
void *usched__ring_peek_lifo(const usched__ring_spmc_t *r);
/* Owner only. The oldest item (the next a thief or a FIFO take gets), or
 * NULL when empty; a hint, for prefetching. */
void *usched__ring_peek_head(const usched__ring_spmc_t *r);
/* Owner only. Takes `item` out of the ring wherever it is (found newest
 * first; the items above it move down one slot, keeping their order), with
 * one CAS. False if it is not in the ring (never was, or a thief took it). */
bool usched__ring_take(usched__ring_spmc_t *r, const void *item);
/* Owner only. Pushes at the head end: the item is the oldest, popped last by
 * the owner's LIFO pop and stolen first. -ENOSPC when full. One CAS. */
int usched__ring_push_head(usched__ring_spmc_t *r, void *item);
/* Called by the thief's owner: takes half (rounded up) of victim's items with
 * one CAS on victim's head, moves all but the newest into `thief` (which must
 * be empty, or at least have RQ_RING_SIZE/2 free slots: aborts otherwise) and
 * returns the newest one; NULL if the victim was empty. `taken` (may be NULL)
 * receives the number of items taken in all. */
void *usched__ring_steal(usched__ring_spmc_t *victim, usched__ring_spmc_t *thief,
                         unsigned *taken);
/* Any thread: takes the victim's oldest item with one CAS (ULE steals one
 * fiber at a time); NULL if it was empty. */
void *usched__ring_steal_one(usched__ring_spmc_t *victim);
/* Any thread: number of items (a snapshot). */
uint32_t usched__ring_len(const usched__ring_spmc_t *r);
/* Any thread: the head and tail indices (a snapshot, as usched__ring_len's);
 * each moves one way only, so a change of either says the ring was used. */
void usched__ring_ends(const usched__ring_spmc_t *r, uint32_t *head, uint32_t *tail);
/* The number of items between the ends of one snapshot. It is in [0,
 * RQ_RING_SIZE] except inside an owner's take (E2 lowered the tail, a
 * consumer then moved head past it, E3 has not restored it): the ring is
 * being emptied then, so it counts 0. */
static inline uint32_t usched__ring_count(uint32_t head, uint32_t tail)
{
    uint32_t n = tail - head;
    return n > RQ_RING_SIZE ? 0 : n;
}
/* Owner only, outside its own pushes and pops: the number of items (a
 * consumer may take some meanwhile). Inline, unlike usched__ring_len. */
static inline uint32_t usched__ring_len_owner(const usched__ring_spmc_t *r)
{
    return usched__ring_count((uint32_t)atomic_load_explicit(&r->head, memory_order_acquire),
                              atomic_load_explicit(&r->tail, memory_order_relaxed));
}
/* Owner only, outside its own pushes and pops: the ring is empty. Consumers
 * only move head towards a tail that the owner alone moves, so one load of
 * each decides it (usched__ring_len's consistent snapshot is for others). */
static inline bool usched__ring_empty_owner(const usched__ring_spmc_t *r)
{
    return atomic_load_explicit(&r->tail, memory_order_relaxed) ==
           (uint32_t)atomic_load_explicit(&r->head, memory_order_acquire);
}

/* ---- inbox_mpsc ----------------------------------------------------------- */
typedef struct usched__mpsc_node {
    struct usched__mpsc_node *_Atomic next;
} usched__mpsc_node_t;

/* Protocol (I1-I4) and orderings: top of src/rq/inbox.c. */
typedef struct usched__inbox_mpsc {
    /* producers: exchange (seq_cst, I1) on head, then release-store
     * prev->next (I2). The consumer exchanges it only to re-insert the stub. */
    usched__mpsc_node_t *_Atomic head __attribute__((aligned(USCHED_CACHELINE)));
    /* written by the consumer (owner) only, relaxed; read by other threads
     * only in inbox_empty() (a hint there). */
    usched__mpsc_node_t *_Atomic tail __attribute__((aligned(USCHED_CACHELINE)));
    usched__mpsc_node_t stub;
} usched__inbox_mpsc_t;

void usched__inbox_init(usched__inbox_mpsc_t *q);
/* Any thread. Wait-free (one exchange). */
void usched__inbox_push(usched__inbox_mpsc_t *q, usched__mpsc_node_t *n);
/* The two halves of inbox_push, for tests of the half-done window:
 * push_start makes n the head and returns its predecessor; push_finish links
 * the predecessor to n. Between them pop may return NULL, empty() is false. */
usched__mpsc_node_t *usched__inbox_push_start(usched__inbox_mpsc_t *q, usched__mpsc_node_t *n);
void usched__inbox_push_finish(usched__mpsc_node_t *prev, usched__mpsc_node_t *n);
/* Owner only. Oldest node, or NULL when empty or when a push is half done
 * (then usched__inbox_empty() is false and the caller retries later). */
usched__mpsc_node_t *usched__inbox_pop(usched__inbox_mpsc_t *q);
/* Any thread (seq_cst load of head). True only when no push has started
 * that the owner has not popped: safe for the "re-check before parking" step
 * on the owner; on other threads a hint. */
bool usched__inbox_empty(usched__inbox_mpsc_t *q);

/* ---- idlemask ------------------------------------------------------------- */
typedef struct usched__idlemask {
    int nbits;
    int nwords;
    _Atomic uint64_t *w;
} usched__idlemask_t;

/* All clear. -EINVAL if nbits <= 0, -ENOMEM; usched_last_error() says why. */
int usched__idlemask_init(usched__idlemask_t *m, int nbits);
void usched__idlemask_fini(usched__idlemask_t *m);
/* Any thread; seq_cst read-modify-write (a full fence, which the parking
 * protocol relies on). Return the previous value of the bit. A bit outside
 * [0, nbits) aborts (usched__rq_throw), for set, clear and test alike. */
bool usched__idlemask_set(usched__idlemask_t *m, int bit);
bool usched__idlemask_clear(usched__idlemask_t *m, int bit);
bool usched__idlemask_test(const usched__idlemask_t *m, int bit);
/* First set bit of (m & within), searching from `start` and wrapping; -1 if
 * none. within == NULL means every bit; otherwise it has nwords words.
 * start is taken modulo nbits (a rotating counter may be passed as is).
 * O(words), relaxed loads: a hint. */
int usched__idlemask_find(const usched__idlemask_t *m, const uint64_t *within, int start);
/* Number of set bits of (m & within); relaxed loads. */
int usched__idlemask_count(const usched__idlemask_t *m, const uint64_t *within);
/* Copies the mask into out[nwords] (relaxed loads: a hint). */
void usched__idlemask_snapshot(const usched__idlemask_t *m, uint64_t *out);

#endif
