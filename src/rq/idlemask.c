/*
 * idlemask: one bit per CPU (or core) in an array of atomic 64-bit words.
 * set/clear are seq_cst read-modify-writes, and clear reports whether the
 * bit was set: a placement claims an idle CPU by being the one whose clear
 * found the bit set (core/idle.c, usched__idle_claim). Searches and counts use
 * relaxed loads: the mask is a hint. Whether the CPU is really parked is its
 * worker's state word, which a waker CASes before a futex wake-up (W3 in
 * core/park.c); the masks never decide that.
 */
#include <errno.h>
#include <stdlib.h>

#include "base/fault.h"
#include "base/error.h"
#include "rq/rq.h"

#define WBITS 64

int usched__idlemask_init(usched__idlemask_t *m, int nbits)
{
    m->nbits = 0;
    m->nwords = 0;
    m->w = NULL;
    if (nbits <= 0) return usched__error(EINVAL, "idlemask: nbits %d is not positive", nbits);
    int nwords = (nbits + WBITS - 1) / WBITS;
    /* Whole cache lines, so the mask shares no line with its neighbours. */
    size_t bytes = ((size_t)nwords * sizeof(uint64_t) + USCHED_CACHELINE - 1) &
                   ~(size_t)(USCHED_CACHELINE - 1);
    _Atomic uint64_t *w = usched__aligned_alloc(USCHED_CACHELINE, bytes);
    if (!w) return usched__error(ENOMEM, "idlemask: cannot allocate %d words", nwords);
    for (int i = 0; i < nwords; i++)
        atomic_init(&w[i], 0);
    m->nbits = nbits;
    m->nwords = nwords;
    m->w = w;
    return 0;
}

void usched__idlemask_fini(usched__idlemask_t *m)
{
    free(m->w);
    m->w = NULL;
    m->nbits = 0;
    m->nwords = 0;
}

static inline void check_bit(const usched__idlemask_t *m, int bit, const char *op)
{
    if (bit < 0 || bit >= m->nbits)
        usched__rq_throw("idlemask_%s: bit %d outside the mask's %d bits", op, bit, m->nbits);
}

bool usched__idlemask_set(usched__idlemask_t *m, int bit)
{
    check_bit(m, bit, "set");
    uint64_t b = UINT64_C(1) << (bit % WBITS);
    return atomic_fetch_or_explicit(&m->w[bit / WBITS], b, memory_order_seq_cst) & b;
}

bool usched__idlemask_clear(usched__idlemask_t *m, int bit)
{
    check_bit(m, bit, "clear");
    uint64_t b = UINT64_C(1) << (bit % WBITS);
    return atomic_fetch_and_explicit(&m->w[bit / WBITS], ~b, memory_order_seq_cst) & b;
}

bool usched__idlemask_test(const usched__idlemask_t *m, int bit)
{
    check_bit(m, bit, "test");
    uint64_t b = UINT64_C(1) << (bit % WBITS);
    /* seq_cst: a plain load on x86-64, ldar on aarch64. */
    return atomic_load_explicit(&m->w[bit / WBITS], memory_order_seq_cst) & b;
}

static inline uint64_t word_and(const usched__idlemask_t *m, const uint64_t *within, int i)
{
    uint64_t v = atomic_load_explicit(&m->w[i], memory_order_relaxed);
    return within ? v & within[i] : v;
}

int usched__idlemask_find(const usched__idlemask_t *m, const uint64_t *within, int start)
{
    int n = m->nbits;
    if (n <= 0) return -1;
    start %= n;
    if (start < 0) start += n;
    int ws = start / WBITS, bs = start % WBITS;
    /* Word ws from bit bs, the words after it, the words before it (wrap),
     * and last word ws below bit bs: nwords + 1 loads at most. Bits at or
     * above nbits are never set, so the last word needs no mask. */
    uint64_t v = word_and(m, within, ws) & (~UINT64_C(0) << bs);
    if (v) return ws * WBITS + __builtin_ctzll(v);
    for (int k = 1; k < m->nwords; k++) {
        int i = ws + k;
        if (i >= m->nwords) i -= m->nwords;
        v = word_and(m, within, i);
        if (v) return i * WBITS + __builtin_ctzll(v);
    }
    if (bs == 0) return -1;
    v = word_and(m, within, ws) & ((UINT64_C(1) << bs) - 1);
    return v ? ws * WBITS + __builtin_ctzll(v) : -1;
}

int usched__idlemask_count(const usched__idlemask_t *m, const uint64_t *within)
{
    int c = 0;
    for (int i = 0; i < m->nwords; i++)
        c += __builtin_popcountll(word_and(m, within, i));
    return c;
}

void usched__idlemask_snapshot(const usched__idlemask_t *m, uint64_t *out)
{
    for (int i = 0; i < m->nwords; i++)
        out[i] = atomic_load_explicit(&m->w[i], memory_order_relaxed);
}
