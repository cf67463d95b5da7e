/*
 * Wake-up pairs under the default policy (2x6x2 virtual topology):
 *  - a ping-pong pair stays on one CPU with affine=1 (the wakee goes to the
 *    waker's next slot), both with the SYNC hint and, without it, once the
 *    two fibers have woken each other, also where each LLC has one CPU;
 *    with affine=0 no sync placement;
 *  - the policy's sync answer is reused (USCHED_OPS_SYNC_REUSE) for at most
 *    15 wake-ups in a row, for a hinted pair and for one without the hint
 *    alike, never under another policy, and never after a
 *    knob changed: affine=0 set mid-run stops every sync placement at once;
 *  - a 1:N waker (a dispatcher waking N workers that answer it) is detected
 *    as wide: its workers spread over idle CPUs and never queue in the
 *    dispatcher's next slot; with wake_wide_factor=4096 (never wide) the
 *    last worker to answer is taken for a sync partner: each of its
 *    wake-ups by the dispatcher lands on the dispatcher's CPU.
 * Under an emulator (USCHED_TEST_EMULATOR) the placement rules are asserted
 * as everywhere; how often the workers get CPU time promptly enough for a
 * pair to form or a round to spread is printed, not asserted (see below).
 */
#include "ptest.h"

#define TOPO "pack:2 l3:1 l2:6 core:1 pu:2"

struct pp {
    struct pt_mbox mb[2];
    long rounds;
    unsigned flags;
    _Atomic int cpu[2];
    _Atomic long same; /* iterations where both ran on one CPU (after warm-up) */
    _Atomic int woken_by[2]; /* side that last woke each side, -1 none */
    _Atomic long pair_wakes; /* wake-ups of one side by the other when each last woke the other */
    usched_t *s;
    long knob_at;            /* > 0: side 0 sets affine=0 at this round */
    uint64_t sync_at_knob;   /* place_sync just after it did */
};

struct pp_side {
    struct pp *pp;
    int me;
};

static void pp_fn(void *arg)
{
    struct pp_side *sd = arg;
    struct pp *pp = sd->pp;
    int me = sd->me, other = 1 - me;
    for (long i = 0; i < pp->rounds; i++) {
        if (me == 1 || i > 0) pt_mb_wait(&pp->mb[me]);
        atomic_store(&pp->cpu[me], usched_self_cpu());
        if (me == 0 && i >= 10 && atomic_load(&pp->cpu[0]) == atomic_load(&pp->cpu[1]))
            atomic_fetch_add(&pp->same, 1);
        if (me == 1 && i == pp->rounds - 1) break;
        if (me == 0 && i == pp->knob_at && pp->knob_at > 0) {
            ASSERT_OK(usched_set(pp->s, "knobs", "affine=0"));
            pp->sync_at_knob = pt_stat(pp->s, "place_sync");
        }
        /* A post that found the other side not yet waiting would wake
         * nobody, and the policy sees a pair (without the hint) only once
         * each side's last wake-up came from the other. On a loaded
         * machine one side running apart could post before the other had
         * parked, round after round, and the pair would never form (a CI
         * run saw same_cpu=0 with every wake-up one-sided): each side
         * waits until the other has parked, as a ping-pong's answer
         * would, yielding so that a partner queued on this CPU runs. */
        pt_mb_await_waiter(&pp->mb[other]);
        usched_task_t *t = pt_mb_take(&pp->mb[other]);
        ASSERT(t != NULL);
        if (atomic_load(&pp->woken_by[me]) == other && atomic_load(&pp->woken_by[other]) == me)
            atomic_fetch_add(&pp->pair_wakes, 1);
        atomic_store(&pp->woken_by[other], me);
        usched__wake(t, pp->flags);
    }
}

/* Prints the non-zero placement counters; returns their sum. */
static uint64_t print_placements(usched_t *s)
{
    uint64_t placed = 0, v;
#define X(id, name, desc)                                                               \
    if ((v = pt_stat(s, "place_" #name))) printf(" place_%s=%llu", #name, (unsigned long long)v); \
    placed += v;
    USCHED_REASON_MAP(X)
#undef X
    return placed;
}

static void pingpong_at(const char *topo, const char *policy, const char *knobs, unsigned flags,
                        bool expect_pair, long knob_at)
{
    usched_t *s = pt_start(policy, topo, knobs);
    struct pp pp = {.rounds = test_scale(2000), .flags = flags, .woken_by = {-1, -1}, .s = s,
                    .knob_at = knob_at};
    struct pp_side sd[2] = {{&pp, 0}, {&pp, 1}};
    usched_task_t *t[2];
    ASSERT_OK(usched_spawn(s, &t[1], pp_fn, &sd[1]));
    ASSERT_OK(usched_spawn(s, &t[0], pp_fn, &sd[0]));
    ASSERT_OK(usched_join(t[0]));
    ASSERT_OK(usched_join(t[1]));
    long measured = pp.rounds - 10;
    uint64_t sync = pt_stat(s, "place_sync");
    printf("pingpong %-22s %s flags=%u rounds=%ld same_cpu=%ld", knobs, topo, flags, pp.rounds,
           atomic_load(&pp.same));
    uint64_t placed = print_placements(s);
    long pair_wakes = atomic_load(&pp.pair_wakes);
    uint64_t reused = pt_stat(s, "sync_reused");
    printf(" wakes_as_pair=%ld sync_reused=%llu\n", pair_wakes, (unsigned long long)reused);
    /* A reuse is a sync placement; each asked answer serves at most 15 */
    ASSERT_LE(reused, sync);
    ASSERT_LE(reused, 15 * (sync - reused));
    if (strcmp(policy, "usched")) { /* only a policy that allows it */
        ASSERT_EQ_U(reused, 0);
        ASSERT_OK(usched_destroy(s));
        return;
    }
    if (knob_at > 0) {
        /* the knob's generation changed: not one more sync placement */
        ASSERT_EQ_U(sync, pp.sync_at_knob);
        ASSERT_GT(pp.sync_at_knob, 0);
        ASSERT_OK(usched_destroy(s));
        return;
    }
    if (expect_pair) {
        /* Every wake-up of a pair keeps the wakee on the waker's CPU: with
         * the hint every wake-up but the spawns, without it those where
         * each side last woke the other. */
        if (flags & USCHED_SEL_SYNC)
            /* ...or, by the smt rule, a whole idle core while the
             * waker's SMT sibling is busy (a momentary state on a
             * loaded machine; counted as place_idle_core). The 2 are the
             * spawns; on a loaded machine a stall moved to another CPU
             * by the monitor can make the waker's CPU look loaded for an
             * instant, so one wake-up in 50 may go by the usual search
             * (a CI run under ASan had place_prev=1 in 400). */
            ASSERT_GE(sync + 2 + placed / 50 + pt_stat(s, "place_idle_core"), placed);
        else
            ASSERT_GE(sync * 10, (uint64_t)pair_wakes * 9);
        /* Where the pair runs: under an emulator a worker gets its CPU in
         * slices far longer than the 3 us next-slot back-off or a round
         * trip, so one side may find the other not yet waiting again and
         * again; the two then run apart, posting without wake-ups. */
        if (!getenv("USCHED_TEST_EMULATOR")) {
            ASSERT_GE(atomic_load(&pp.same) * 10, measured * 9);
            ASSERT_GE(sync * 10, (uint64_t)(2 * measured) * 9);
            /* the pair wakes only each other: most answers reused, with
             * the hint or without it (a rendezvous channel whose senders
             * park first wakes each side plainly, from the receiver) */
            ASSERT_GE(reused * 2, sync);
        }
    } else {
        ASSERT_EQ_U(sync, 0);
    }
    ASSERT_OK(usched_destroy(s));
}

static void pingpong_on(const char *policy, const char *knobs, unsigned flags, bool expect_pair, long knob_at)
{
    pingpong_at(TOPO, policy, knobs, flags, expect_pair, knob_at);
}

static void pingpong(const char *knobs, unsigned flags, bool expect_pair)
{
    pingpong_on("usched", knobs, flags, expect_pair, 0);
}

/* ---- 1:N ------------------------------------------------------------------ */

#define NW 8

struct disp {
    usched_t *s;
    struct pt_mbox dmb, wmb[NW];
    long rounds;
    _Atomic int stop;
    _Atomic int replies;
    _Atomic int dcpu;
    _Atomic long on_dispatcher; /* worker wake-ups on the dispatcher's CPU */
    _Atomic long placed;
    _Atomic uint64_t used[NW]; /* bit per CPU (< 64) used in the last round */
    int max_distinct;          /* most CPUs one round's workers ran on (dispatcher only) */
    _Atomic int dwoken_by;     /* the worker whose answer last woke the dispatcher, -1 none */
    _Atomic int pair_woken[NW]; /* this wake-up of the worker was a pair's (dispatcher only writes 1) */
    _Atomic long pair_wakes, pair_landed; /* wake-ups of a pair, and those that ran on dcpu */
};

struct wk_arg {
    struct disp *d;
    int i;
};

static void worker_fn(void *arg)
{
    struct wk_arg *wa = arg;
    struct disp *d = wa->d;
    for (;;) {
        pt_mb_wait(&d->wmb[wa->i]);
        if (atomic_load(&d->stop)) return;
        int cpu = usched_self_cpu();
        atomic_fetch_add(&d->placed, 1);
        if (cpu == atomic_load(&d->dcpu)) atomic_fetch_add(&d->on_dispatcher, 1);
        if (atomic_exchange(&d->pair_woken[wa->i], 0) && cpu == atomic_load(&d->dcpu))
            atomic_fetch_add(&d->pair_landed, 1);
        atomic_store(&d->used[wa->i], 1ull << (cpu % 64));
        if (atomic_fetch_add(&d->replies, 1) == NW - 1) {
            /* the last answer: a real wake-up of the dispatcher makes this
             * worker its last waker */
            usched_task_t *t = pt_mb_take(&d->dmb);
            if (t) {
                atomic_store(&d->dwoken_by, wa->i); /* read by the dispatcher once it runs */
                usched__wake(t, USCHED_SEL_SYNC);
            }
        }
    }
}

static void dispatcher_fn(void *arg)
{
    struct disp *d = arg;
    for (long r = 0; r < d->rounds; r++) {
        if (r == 5) { /* warm-up done: the flips are counted */
            atomic_store(&d->on_dispatcher, 0);
            atomic_store(&d->placed, 0);
        }
        atomic_store(&d->replies, 0);
        atomic_store(&d->dcpu, usched_self_cpu());
        for (int i = 0; i < NW; i++) {
            /* A real wake-up of the worker that last woke the dispatcher
             * (whose own last waker is the dispatcher, as for every
             * worker): the policy sees a pair. */
            usched_task_t *t = pt_mb_take(&d->wmb[i]);
            if (!t) continue;
            if (i == atomic_load(&d->dwoken_by) && r >= 5) {
                atomic_fetch_add(&d->pair_wakes, 1);
                atomic_store(&d->pair_woken[i], 1);
            }
            usched__wake(t, 0);
        }
        atomic_store(&d->dwoken_by, -1);
        pt_mb_wait(&d->dmb);
        uint64_t mask = 0; /* every worker of this round has replied */
        for (int i = 0; i < NW; i++) mask |= atomic_load(&d->used[i]);
        if (r >= 5 && __builtin_popcountll(mask) > d->max_distinct) d->max_distinct = __builtin_popcountll(mask);
    }
    atomic_store(&d->stop, 1);
    for (int i = 0; i < NW; i++) pt_mb_post(&d->wmb[i], 0);
}

static void one_to_n(const char *knobs, bool expect_wide)
{
    usched_t *s = pt_start("usched", TOPO, knobs);
    struct disp d = {.s = s, .rounds = test_scale(300) + 10, .dwoken_by = -1};
    struct wk_arg wa[NW];
    usched_task_t *w[NW], *dt;
    for (int i = 0; i < NW; i++) {
        wa[i] = (struct wk_arg){&d, i};
        ASSERT_OK(usched_spawn(s, &w[i], worker_fn, &wa[i]));
    }
    ASSERT_OK(usched_spawn(s, &dt, dispatcher_fn, &d));
    ASSERT_OK(usched_join(dt));
    for (int i = 0; i < NW; i++) ASSERT_OK(usched_join(w[i]));
    uint64_t mask = 0;
    for (int i = 0; i < NW; i++) mask |= atomic_load(&d.used[i]);
    int distinct = __builtin_popcountll(mask);
    long pairs = atomic_load(&d.pair_wakes), landed = atomic_load(&d.pair_landed);
    printf("1:%d %-28s placed=%ld on_dispatcher_cpu=%ld distinct_cpus_last_round=%d most_in_a_round=%d "
           "pair_wakes=%ld landed=%ld", NW, knobs, atomic_load(&d.placed), atomic_load(&d.on_dispatcher), distinct,
           d.max_distinct, pairs, landed);
    print_placements(s);
    printf("\n");
    /* Under an emulator a worker thread gets its CPU in long slices: the
     * dispatcher often posts to workers not yet waiting again (no wake-up,
     * so no pair forms), and which CPUs are idle at a wake-up is the
     * emulator's doing; the rules are asserted there too (a wide waker's
     * wakees never land in its CPU's next slot; a pair's wake-up always
     * does), but not how often a pair forms or how wide a round spreads. */
    bool emulated = getenv("USCHED_TEST_EMULATOR") != NULL;
    if (expect_wide) {
        ASSERT_EQ(atomic_load(&d.on_dispatcher), 0);
        /* spread wide at least once after warm-up (a round's spread depends on
         * which CPUs were idle at that moment) */
        if (!emulated) ASSERT_GE(d.max_distinct, NW / 2);
    } else {
        /* Never wide: every wake-up of the worker that answered last (a
         * pair) goes to the dispatcher's next slot and runs there (steal=0:
         * nobody takes it; smt=0 and stall_us=0: no busy-sibling or stall
         * exception), and a pair forms in some round. */
        ASSERT_EQ(landed, pairs);
        if (!emulated) ASSERT_GT(pairs, 0);
    }
    ASSERT_OK(usched_destroy(s));
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    pingpong("spin_us=0,affine=1", USCHED_SEL_SYNC, true);
    pingpong("spin_us=0,affine=1", 0, true);
    pingpong("spin_us=0,affine=0", USCHED_SEL_SYNC, false);
    /* An LLC of one CPU (many virtual machines report one per CPU): the
     * wide test's factor is the LLC's size, and a factor of 1 made every
     * pair wide once each side had switched wakee once (its first round). */
    pingpong_at("pack:1 l3:4 core:1 pu:1", "usched", "spin_us=0,affine=1", USCHED_SEL_SYNC, true, 0);
    pingpong_at("pack:1 l3:4 core:1 pu:1", "usched", "spin_us=0,affine=1", 0, true, 0);
    /* another policy's answers are never reused (linux does not set the flag) */
    pingpong_on("linux", "spin_us=0,affine=1", USCHED_SEL_SYNC, false, 0);
    pingpong_on("usched", "spin_us=0,affine=1", USCHED_SEL_SYNC, true, test_scale(2000) / 2);
    /* steal=0: where the policy places the wakees, not where idle CPUs
     * may later steal them from (the dispatcher's CPU idles between rounds). */
    one_to_n("spin_us=0,steal=0", true);
    one_to_n("spin_us=0,steal=0,smt=0,stall_us=0,wake_wide_factor=4096", false);
    printf("ok\n");
    return 0;
}
