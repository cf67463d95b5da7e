/* ring_spmc under contention: one owner pushes (spilling when full) and pops
 * while 3 thieves steal from it continuously; every item must be seen exactly
 * once. Mode "into" also lets the owner steal back from the thieves' rings
 * into its own (empty) ring while they keep stealing from it, and lets the
 * thieves steal from each other. Mode "lifo" has the owner pop its newest
 * item (the one-CAS take at the tail), take given items out of the middle,
 * and push at the head end, all while the thieves steal halves.
 * Steals must happen, not only be safe: before draining its ring the owner
 * waits (up to 30 s, then fails) until a thief has stolen, so a steal that
 * always failed cannot pass; in "into" mode, with two or more CPUs, the
 * owner must have stolen back too.
 * Usage: rq_ring_stress [plain|into|lifo]   (default plain; 10M items, scaled) */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "rq/rq.h"
#include "test.h"

#define NTHREADS 4 /* ring 0: the owner (producer); 1..3: thieves */
#define HALF (RQ_RING_SIZE / 2)

static usched__ring_spmc_t rings[NTHREADS];
static _Atomic uint8_t *seen;
static long nitems;
static bool mode_into, mode_lifo;
static _Atomic long consumed;
static _Atomic long steals[NTHREADS], spills;

static void *item(long i) { return (void *)(uintptr_t)(i + 1); }

static void consume(void *p)
{
    long i = (long)((uintptr_t)p - 1);
    if (i < 0 || i >= nitems) TEST_FAIL_("item %ld outside [0, %ld)", i, nitems);
    uint8_t before = atomic_fetch_add_explicit(&seen[i], 1, memory_order_relaxed);
    if (before != 0) TEST_FAIL_("item %ld seen %u times before, expected 0", i, before);
    atomic_fetch_add_explicit(&consumed, 1, memory_order_relaxed);
}

static bool all_done(void)
{
    return atomic_load_explicit(&consumed, memory_order_relaxed) == nitems;
}

/* Own ring empty: steal from the victims allowed by the mode, starting at a
 * rotating one. Returns whether anything was taken (and consumes the item
 * steal returns). */
static bool try_steal(int self, unsigned *rot)
{
    for (int k = 0; k < NTHREADS; k++) {
        int v = (int)((*rot)++ % NTHREADS);
        if (v == self) continue;
        if (!mode_into && v != 0) continue; /* plain: only the owner's ring */
        unsigned taken;
        void *p = usched__ring_steal(&rings[v], &rings[self], &taken);
        if (p) {
            atomic_fetch_add_explicit(&steals[self], 1, memory_order_relaxed);
            consume(p);
            return true;
        }
    }
    return false;
}

static long thief_steals(void)
{
    long n = 0;
    for (int t = 1; t < NTHREADS; t++) n += atomic_load(&steals[t]);
    return n;
}

/* After the pushes, with items still in the owner's ring (none was stolen,
 * so they are there): wait for a thief to take some. */
static void wait_for_a_steal(void)
{
    double deadline = test_now() + 30.0;
    while (thief_steals() == 0) {
        if (test_now() > deadline)
            TEST_FAIL_("no thief stole within 30 s while the owner's ring held %u items",
                       usched__ring_len(&rings[0]));
        sched_yield();
    }
}

/* The owner's pop in this mode: the oldest, or the newest in "lifo". */
static void *owner_pop(usched__ring_spmc_t *r)
{
    return mode_lifo ? usched__ring_pop_lifo(r) : usched__ring_pop(r);
}

/* "lifo": take an item pushed a few pushes ago out of wherever it is (it may
 * have been popped, stolen or spilled already: then take says no), and move
 * the newest item to the head end. */
static void lifo_extra(usched__ring_spmc_t *r, long i)
{
    if (i % 7 == 6 && usched__ring_take(r, item(i - 5))) consume(item(i - 5));
    if (i % 11 == 10) {
        void *p = usched__ring_pop_lifo(r);
        if (p && usched__ring_push_head(r, p) != 0) consume(p); /* full: keep it */
    }
}

static void *owner(void *arg)
{
    (void)arg;
    usched__ring_spmc_t *r = &rings[0];
    void *spill[HALF];
    unsigned rot = 1;
    for (long i = 0; i < nitems; i++) {
        unsigned n = usched__ring_push_or_spill(r, item(i), spill);
        if (n) {
            /* The spill is the oldest half, in order ("lifo" moves items to
             * the head end out of order); the new item stays in the ring. */
            if (n != HALF) TEST_FAIL_("spill of %u items, expected %u", n, HALF);
            for (unsigned k = 1; !mode_lifo && k < n; k++)
                if ((uintptr_t)spill[k] <= (uintptr_t)spill[k - 1])
                    TEST_FAIL_("spill[%u]=%p not after spill[%u]=%p", k, spill[k], k - 1,
                               spill[k - 1]);
            atomic_fetch_add_explicit(&spills, 1, memory_order_relaxed);
            for (unsigned k = 0; k < n; k++)
                consume(spill[k]);
        }
        if (i % 3 == 0) { /* pop one for every three pushes */
            void *p = owner_pop(r);
            if (p) consume(p);
        }
        if (mode_lifo) lifo_extra(r, i);
        if (mode_into && i % 512 == 511) {
            /* Empty the ring, then steal back into it while the thieves
             * keep stealing from it. */
            void *p;
            while ((p = usched__ring_pop(r)))
                consume(p);
            try_steal(0, &rot);
        }
    }
    wait_for_a_steal();
    while (!all_done()) {
        void *p = owner_pop(r);
        if (p) consume(p);
        else if (!mode_into || !try_steal(0, &rot)) sched_yield();
    }
    return NULL;
}

static void *thief(void *arg)
{
    int self = (int)(intptr_t)arg;
    unsigned rot = (unsigned)self;
    long last = -1;
    while (!all_done()) {
        void *p = usched__ring_pop(&rings[self]);
        if (p) {
            /* In plain mode a thief's ring holds one stolen batch at a time,
             * oldest first: what it pops rises ("lifo" reorders the
             * victim's head end). */
            long i = (long)((uintptr_t)p - 1);
            if (!mode_into && !mode_lifo && i <= last) TEST_FAIL_("thief %d popped %ld after %ld", self, i, last);
            last = i;
            consume(p);
            /* "into": keep the batch a while, so the owner (and the other
             * thieves) find it to steal back. */
            if (mode_into) sched_yield();
        } else if (try_steal(self, &rot)) {
            last = -1;
        } else {
            sched_yield();
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "into") == 0) mode_into = true;
    else if (argc > 1 && strcmp(argv[1], "lifo") == 0) mode_lifo = true;
    else if (argc > 1 && strcmp(argv[1], "plain") != 0)
        TEST_FAIL_("unknown mode '%s' (expected plain, into or lifo)", argv[1]);
    nitems = test_scale(10 * 1000 * 1000);
    seen = calloc((size_t)nitems, 1);
    ASSERT(seen);
    for (int t = 0; t < NTHREADS; t++)
        usched__ring_init(&rings[t]);

    pthread_t th[NTHREADS];
    double t0 = test_now();
    ASSERT_EQ(pthread_create(&th[0], NULL, owner, NULL), 0);
    for (int t = 1; t < NTHREADS; t++)
        ASSERT_EQ(pthread_create(&th[t], NULL, thief, (void *)(intptr_t)t), 0);
    for (int t = 0; t < NTHREADS; t++)
        ASSERT_EQ(pthread_join(th[t], NULL), 0);
    double dt = test_now() - t0;

    ASSERT_EQ(atomic_load(&consumed), nitems);
    for (long i = 0; i < nitems; i++)
        if (atomic_load_explicit(&seen[i], memory_order_relaxed) != 1)
            TEST_FAIL_("item %ld seen %u times, expected 1", i, atomic_load(&seen[i]));
    for (int t = 0; t < NTHREADS; t++)
        ASSERT_EQ(usched__ring_len(&rings[t]), 0);
    long st = 0;
    for (int t = 0; t < NTHREADS; t++)
        st += atomic_load(&steals[t]);
    printf("ring_stress %s: %ld items once each, %ld steals (owner %ld), %ld spills, %.2f s\n",
           mode_into ? "into" : mode_lifo ? "lifo" : "plain", nitems, st, atomic_load(&steals[0]),
           atomic_load(&spills), dt);
    ASSERT_GT(thief_steals(), 0);
    cpu_set_t cpus;
    int ncpus = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    /* The owner steals back only when its ring is empty while a thief holds
     * a batch: with one CPU the thieves may never be caught holding one. */
    if (mode_into && ncpus >= 2) {
        long owner_steals = atomic_load(&steals[0]);
        ASSERT_GT(owner_steals, 0);
    }
    free(seen);
    return 0;
}
