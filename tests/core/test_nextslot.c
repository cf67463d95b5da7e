/*
 * The next slot's two sides (N1-N4, core/queue.h): the owner takes and
 * displaces without a locked instruction while thieves take the slot away
 * with membarrier. Two cases, each with membarrier and without it
 * (USCHED_NO_MEMBARRIER):
 *  - stranded: a fiber spawns a child, which lands in its CPU's next slot,
 *    and spins without yielding until the child has run. Only a thief can
 *    run the child, from the next slot: every round must end, and each one
 *    counts a steal_next (under the default policy, which puts a spawn in
 *    the spawner's next slot).
 *  - race: the spawner spins a random short while (0-6 us, around the
 *    thief's 3 us back-off) and then yields, so its own take of the slot
 *    races the thief's. Every child must run exactly once.
 * A round that does not end within 20 s fails the test (a lost fiber).
 * Usage: core_nextslot [topology]
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "test.h"
#include "usched.h"

#define ROUND_LIMIT_S 20.0

struct run {
    long rounds;
    _Atomic uint8_t *ran; /* per child: how many times it ran */
    _Atomic long stranded_done;
    uint32_t rng;
};

static void child(void *arg)
{
    _Atomic uint8_t *slot = arg;
    atomic_fetch_add_explicit(slot, 1, memory_order_release);
}

static void spin_until_ran(_Atomic uint8_t *slot, long round)
{
    double end = test_now() + ROUND_LIMIT_S;
    while (!atomic_load_explicit(slot, memory_order_acquire)) {
        if (test_now() > end) TEST_FAIL_("round %ld: the child left in the next slot never ran", round);
        __asm__ volatile("" ::: "memory");
    }
}

static void stranded(void *arg)
{
    struct run *r = arg;
    for (long i = 0; i < r->rounds; i++) {
        usched_task_t *t;
        ASSERT_OK(usched_spawn(usched_self(), &t, child, (void *)&r->ran[i]));
        spin_until_ran(&r->ran[i], i); /* no yield: only a thief can run it */
        ASSERT_OK(usched_join(t));
        atomic_fetch_add(&r->stranded_done, 1);
    }
}

static void race(void *arg)
{
    struct run *r = arg;
    for (long i = 0; i < r->rounds; i++) {
        usched_task_t *t;
        ASSERT_OK(usched_spawn(usched_self(), &t, child, (void *)&r->ran[i]));
        r->rng = r->rng * 1103515245u + 12345u;
        double until = test_now() + (double)((r->rng >> 8) % 6000) * 1e-9;
        while (test_now() < until) __asm__ volatile("" ::: "memory");
        usched_yield(); /* takes it back from the next slot, unless a thief did */
        ASSERT_OK(usched_join(t));
    }
}

static uint64_t stat(usched_t *s, const char *name)
{
    uint64_t v = 0;
    ASSERT_OK(usched_stat(s, name, &v));
    return v;
}

static void one(const char *topo, bool membarrier_off, void (*body)(void *), long rounds, const char *what)
{
    if (membarrier_off)
        setenv("USCHED_NO_MEMBARRIER", "1", 1);
    else
        unsetenv("USCHED_NO_MEMBARRIER");
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    if (topo) ASSERT_OK(usched_set(s, "topology", topo));
    /* The spawner holds its CPU while its child waits in the next slot for
     * a thief: preemption (docs/preempt.md) would run the child there. */
    ASSERT_OK(usched_set(s, "knobs", "preempt_us=0"));
    ASSERT_OK(usched_start(s));
    if (membarrier_off) ASSERT(!s->next_asym);
    struct run r = {.rounds = rounds, .ran = calloc((size_t)rounds, 1), .rng = 7};
    ASSERT(r.ran);
    usched_task_t *t;
    ASSERT_OK(usched_spawn(s, &t, body, &r));
    ASSERT_OK(usched_join(t));
    for (long i = 0; i < rounds; i++)
        if (atomic_load(&r.ran[i]) != 1)
            TEST_FAIL_("%s: child %ld ran %d times", what, i, (int)atomic_load(&r.ran[i]));
    uint64_t sn = stat(s, "steal_next");
    /* The default policy puts a spawn in the spawner's next slot; other
     * policies (USCHED_POLICY, the policy suite's reruns) place it
     * elsewhere, and only the exactly-once check applies. */
    if (body == stranded && !strcmp(s->ops->name, "usched")) ASSERT_GE(sn, (uint64_t)rounds);
    printf("%s (%s, membarrier %s): %ld rounds, steal_next %llu\n", what, topo ? topo : "live machine",
           s->next_asym ? "on" : "off", rounds, (unsigned long long)sn);
    free(r.ran);
    usched_destroy(s);
}

int main(int argc, char **argv)
{
    const char *topo = argc > 1 ? argv[1] : NULL;
    for (int off = 0; off <= 1; off++) {
        one(topo, off, stranded, test_scale(200), "stranded");
        one(topo, off, race, test_scale(20000), "race");
    }
    unsetenv("USCHED_NO_MEMBARRIER");
    printf("core_nextslot: ok\n");
    return 0;
}
