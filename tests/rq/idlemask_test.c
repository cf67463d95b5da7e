/* idlemask: set/clear return the old bit, find within group masks from a
 * rotating start with wrap-around, sizes past one word and past 1024 bits,
 * count, snapshot, bad sizes; then concurrent set/clear of distinct bits
 * keeps every other bit intact. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "rq/rq.h"
#include "rq_test.h"
#include "usched.h"

#define MAXW 32 /* words in the largest mask tested (2048 bits) */

static void bad_sizes(void)
{
    usched__idlemask_t m;
    ASSERT_EQ(usched__idlemask_init(&m, 0), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "nbits 0");
    ASSERT_EQ(usched__idlemask_init(&m, -3), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "nbits -3");
    RQ_ASSERT_PTR_EQ(m.w, NULL);
}

/* Reference: first bit of (bits & within) at or after start, wrapping. */
static int ref_find(const uint64_t *bits, const uint64_t *within, int nbits, int start)
{
    for (int k = 0; k < nbits; k++) {
        int b = (start + k) % nbits;
        uint64_t w = bits[b / 64] & (within ? within[b / 64] : ~UINT64_C(0));
        if (w >> (b % 64) & 1) return b;
    }
    return -1;
}

static void set_bits(uint64_t *w, const int *bits, int n)
{
    for (int i = 0; i < n; i++)
        w[bits[i] / 64] |= UINT64_C(1) << (bits[i] % 64);
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

static void sizes(int nbits)
{
    usched__idlemask_t m;
    ASSERT_OK(usched__idlemask_init(&m, nbits));
    ASSERT_EQ(m.nbits, nbits);
    ASSERT_EQ(m.nwords, (nbits + 63) / 64);
    ASSERT_EQ(usched__idlemask_find(&m, NULL, 0), -1);
    ASSERT_EQ(usched__idlemask_count(&m, NULL), 0);

    /* Edges of words and of the mask. */
    int cand[] = {0, 1, 62, 63, 64, 65, 127, 128, 500, 1023, 1024, 1025, nbits - 2, nbits - 1};
    int bits[16], nb = 0;
    for (unsigned i = 0; i < sizeof cand / sizeof cand[0]; i++) {
        int b = cand[i];
        if (b < 0 || b >= nbits || usched__idlemask_test(&m, b)) continue;
        ASSERT_EQ(usched__idlemask_set(&m, b), 0); /* was clear */
        ASSERT_EQ(usched__idlemask_set(&m, b), 1); /* now set */
        ASSERT(usched__idlemask_test(&m, b));
        bits[nb++] = b;
    }
    qsort(bits, (size_t)nb, sizeof bits[0], cmp_int); /* ascending, for the rotation checks */
    ASSERT_EQ(usched__idlemask_count(&m, NULL), nb);

    uint64_t ref[MAXW] = {0}, snap[MAXW] = {0};
    set_bits(ref, bits, nb);
    usched__idlemask_snapshot(&m, snap);
    for (int i = 0; i < m.nwords; i++)
        ASSERT_EQ_U(snap[i], ref[i]);

    /* Group masks: everything, every other word, a window around word
     * edges, one bit, nothing. */
    uint64_t within[5][MAXW] = {{0}};
    for (int i = 0; i < m.nwords; i++) {
        within[0][i] = ~UINT64_C(0);
        within[1][i] = (i % 2) ? ~UINT64_C(0) : 0;
        within[2][i] = (i == 0) ? UINT64_C(0xC000000000000000) : (i == 1) ? 3 : 0;
    }
    within[3][(nbits - 1) / 64] = UINT64_C(1) << ((nbits - 1) % 64);
    const uint64_t *groups[] = {NULL, within[0], within[1], within[2], within[3], within[4]};
    for (unsigned g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        int cnt = 0;
        for (int i = 0; i < m.nwords; i++)
            cnt += __builtin_popcountll(ref[i] & (groups[g] ? groups[g][i] : ~UINT64_C(0)));
        ASSERT_EQ(usched__idlemask_count(&m, groups[g]), cnt);
        /* Every start (rotation), wrap included. */
        for (int s = 0; s < nbits; s++) {
            int got = usched__idlemask_find(&m, groups[g], s);
            int want = ref_find(ref, groups[g], nbits, s);
            if (got != want)
                TEST_FAIL_("nbits %d group %u start %d: find %d, expected %d", nbits, g, s, got,
                           want);
        }
    }
    /* start is taken modulo nbits (a rotating counter), negatives too. */
    ASSERT_EQ(usched__idlemask_find(&m, NULL, nbits), usched__idlemask_find(&m, NULL, 0));
    ASSERT_EQ(usched__idlemask_find(&m, NULL, 3 * nbits + 1), usched__idlemask_find(&m, NULL, 1));
    ASSERT_EQ(usched__idlemask_find(&m, NULL, -1), usched__idlemask_find(&m, NULL, nbits - 1));

    /* Rotation: with bits b0 < b1, a start just past b0 finds b1, and a
     * start past the last bit wraps to the first. */
    if (nb >= 2) {
        ASSERT_EQ(usched__idlemask_find(&m, NULL, bits[0] + 1), bits[1]);
        if (bits[nb - 1] + 1 < nbits)
            ASSERT_EQ(usched__idlemask_find(&m, NULL, bits[nb - 1] + 1), bits[0]);
        ASSERT_EQ(usched__idlemask_find(&m, NULL, bits[nb - 1]), bits[nb - 1]);
    }

    for (int i = 0; i < nb; i++) {
        ASSERT_EQ(usched__idlemask_clear(&m, bits[i]), 1);
        ASSERT_EQ(usched__idlemask_clear(&m, bits[i]), 0);
        ASSERT(!usched__idlemask_test(&m, bits[i]));
    }
    ASSERT_EQ(usched__idlemask_count(&m, NULL), 0);
    ASSERT_EQ(usched__idlemask_find(&m, NULL, nbits / 2), -1);
    usched__idlemask_fini(&m);
    RQ_ASSERT_PTR_EQ(m.w, NULL);
}

/* Concurrency: NT threads each own the bits b with b % (NT + 1) == t and
 * flip them; bits with b % (NT + 1) == NT are set once and never touched.
 * Every fetch_or/fetch_and must return the owner's last value, and the
 * untouched bits must survive. */
#define NT 3
#define HBITS 200
static usched__idlemask_t hm;
static long rounds;

static void *flipper(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (long r = 0; r < rounds; r++) {
        for (int b = t; b < HBITS; b += NT + 1) {
            bool old = usched__idlemask_set(&hm, b);
            if (old) TEST_FAIL_("thread %d round %ld: bit %d was set, expected clear", t, r, b);
            old = usched__idlemask_clear(&hm, b);
            if (!old) TEST_FAIL_("thread %d round %ld: bit %d was clear, expected set", t, r, b);
        }
        if (r % 2 == 0) { /* leave them set for a while, then clear */
            for (int b = t; b < HBITS; b += NT + 1)
                ASSERT_EQ(usched__idlemask_set(&hm, b), 0);
            for (int b = t; b < HBITS; b += NT + 1)
                ASSERT_EQ(usched__idlemask_clear(&hm, b), 1);
        }
        for (int b = NT; b < HBITS; b += NT + 1)
            if (!usched__idlemask_test(&hm, b))
                TEST_FAIL_("thread %d round %ld: untouched bit %d lost", t, r, b);
    }
    return NULL;
}

static void hammer(void)
{
    rounds = test_scale(20000);
    ASSERT_OK(usched__idlemask_init(&hm, HBITS));
    int fixed = 0;
    for (int b = NT; b < HBITS; b += NT + 1, fixed++)
        ASSERT_EQ(usched__idlemask_set(&hm, b), 0);
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        ASSERT_EQ(pthread_create(&th[t], NULL, flipper, (void *)(intptr_t)t), 0);
    for (int t = 0; t < NT; t++)
        ASSERT_EQ(pthread_join(th[t], NULL), 0);
    ASSERT_EQ(usched__idlemask_count(&hm, NULL), fixed);
    for (int b = 0; b < HBITS; b++)
        ASSERT_EQ(usched__idlemask_test(&hm, b), b % (NT + 1) == NT);
    usched__idlemask_fini(&hm);
}

int main(void)
{
    bad_sizes();
    static const int ns[] = {1, 2, 63, 64, 65, 128, 130, 1024, 1025, 2048};
    for (unsigned i = 0; i < sizeof ns / sizeof ns[0]; i++)
        sizes(ns[i]);
    hammer();
    printf("idlemask_test: ok\n");
    return 0;
}
