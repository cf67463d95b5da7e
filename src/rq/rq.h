/*
 * Per-CPU queue building blocks (DESIGN section 5), all lock-free:
 *   ring_spmc  - 256-slot FIFO ring: the owner pushes and pops, thieves take
 *                half with one CAS (Go's runq, Tokio's local queue);
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
#define RQ_RING_SIZE 256u /* power of two */

/* ---- ring_spmc ------------------------------------------------------------ */
typedef struct usched__ring_spmc {
    /* head: consumers (owner pop and thieves) advance it with CAS,
     * acquire-load / acq_rel CAS; pairs with the owner's release store of tail. */
    _Atomic uint32_t head __attribute__((aligned(USCHED_CACHELINE)));
    /* tail: written by the owner only (release store), read by thieves. */
    _Atomic uint32_t tail __attribute__((aligned(USCHED_CACHELINE)));
    void *_Atomic slots[RQ_RING_SIZE];
} usched__ring_spmc_t;

void usched__ring_init(usched__ring_spmc_t *r);
/* Owner only. Pushes at the tail; -ENOSPC when full (nothing changed). */
int usched__ring_push(usched__ring_spmc_t *r, void *item);
/* Owner only. When the ring is full, moves the oldest half of it plus `item`
 * into spill[] (capacity RQ_RING_SIZE/2 + 1) and returns how many were moved;
 * otherwise pushes `item` and returns 0. The caller puts spill[] on the
 * global queue in order. */
unsigned usched__ring_push_or_spill(usched__ring_spmc_t *r, void *item, void **spill);
/* Owner only. Pops the oldest item; NULL when empty. */
void *usched__ring_pop(usched__ring_spmc_t *r);
/* Called by the thief's owner: takes half (rounded up) of victim's items,
 * moves all but one into `thief` (which must be empty) and returns the
 * remaining one; NULL if the victim was empty. `taken` (may be NULL) receives
 * the number of items taken in all. */
void *usched__ring_steal(usched__ring_spmc_t *victim, usched__ring_spmc_t *thief,
                         unsigned *taken);
/* Any thread: number of items (a snapshot). */
uint32_t usched__ring_len(const usched__ring_spmc_t *r);

/* ---- inbox_mpsc ----------------------------------------------------------- */
typedef struct usched__mpsc_node {
    struct usched__mpsc_node *_Atomic next;
} usched__mpsc_node_t;

typedef struct usched__inbox_mpsc {
    /* producers: exchange (acq_rel) on head, then release-store prev->next. */
    usched__mpsc_node_t *_Atomic head __attribute__((aligned(USCHED_CACHELINE)));
    /* consumer (owner) only. */
    usched__mpsc_node_t *tail __attribute__((aligned(USCHED_CACHELINE)));
    usched__mpsc_node_t stub;
} usched__inbox_mpsc_t;

void usched__inbox_init(usched__inbox_mpsc_t *q);
/* Any thread. Wait-free (one exchange). */
void usched__inbox_push(usched__inbox_mpsc_t *q, usched__mpsc_node_t *n);
/* Owner only. Oldest node, or NULL when empty or when a push is half done
 * (then usched__inbox_empty() is false and the caller retries later). */
usched__mpsc_node_t *usched__inbox_pop(usched__inbox_mpsc_t *q);
/* Any thread (seq_cst load). True only when no push has started that the
 * owner has not popped: safe for the "re-check before parking" step. */
bool usched__inbox_empty(usched__inbox_mpsc_t *q);

/* ---- idlemask ------------------------------------------------------------- */
typedef struct usched__idlemask {
    int nbits;
    int nwords;
    _Atomic uint64_t *w;
} usched__idlemask_t;

int usched__idlemask_init(usched__idlemask_t *m, int nbits); /* all clear */
void usched__idlemask_fini(usched__idlemask_t *m);
/* Any thread; seq_cst read-modify-write (a full fence, which the parking
 * protocol relies on). Return the previous value of the bit. */
bool usched__idlemask_set(usched__idlemask_t *m, int bit);
bool usched__idlemask_clear(usched__idlemask_t *m, int bit);
bool usched__idlemask_test(const usched__idlemask_t *m, int bit);
/* First set bit of (m & within), searching from `start` and wrapping; -1 if
 * none. within == NULL means every bit. O(words). */
int usched__idlemask_find(const usched__idlemask_t *m, const uint64_t *within, int start);
/* Number of set bits of (m & within). */
int usched__idlemask_count(const usched__idlemask_t *m, const uint64_t *within);
/* Copies the mask into out[nwords] (relaxed loads: a hint). */
void usched__idlemask_snapshot(const usched__idlemask_t *m, uint64_t *out);

#endif
