/* Work-first fork-join: the owner runs its newest fiber first (LIFO ring),
 * a join runs any not-yet-started child of its CPU inline wherever it
 * waits (next slot or ring), a join of a child a thief took blocks and
 * returns its result, a join racing its child's exit from either side sees
 * the result, and a fork-join tree sums right across CPUs. */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "test.h"
#include "usched.h"

#define NCHILD 8

/* policy NULL: the one of the environment (the per-policy reruns set it);
 * the order and inline tests ask for the default policy, whose placement
 * (a spawn on the spawner's CPU) they rely on. */
static usched_t *start_with(const char *topology, const char *policy, const char *stack_size)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", topology));
    if (policy) ASSERT_OK(usched_set(s, "policy", policy));
    if (stack_size) ASSERT_OK(usched_set(s, "stack_size", stack_size));
    /* The stall monitor off: under sanitizers a parent spawning hundreds of
     * children holds its CPU past stall_us, and the monitor then serves that
     * CPU's queues elsewhere (docs/monitor.md), which is not the queue
     * order these cases check. */
    ASSERT_OK(usched_set(s, "knobs", "stall_us=0"));
    ASSERT_OK(usched_start(s));
    return s;
}

static usched_t *start_on(const char *topology, const char *policy)
{
    return start_with(topology, policy, NULL);
}

/* From the test's thread: fn(arg) as a fiber of s, joined. */
static void run_fiber(usched_t *s, void (*fn)(void *), void *arg)
{
    usched_task_t *p;
    ASSERT_OK(usched_spawn(s, &p, fn, arg));
    ASSERT_OK(usched_join(p));
}

static uint64_t stat_of(usched_t *s, const char *name)
{
    uint64_t v = 0;
    ASSERT_OK(usched_stat(s, name, &v));
    return v;
}

/* ---- LIFO owner order, one CPU ------------------------------------------- */

static int order[NCHILD + 1];
static _Atomic int norder;

static void record(void *arg)
{
    order[atomic_fetch_add(&norder, 1)] = (int)(intptr_t)arg;
}

/* Spawns NCHILD detached children, then yields: the yielder goes behind
 * them, so the run order is the newest child first, then the older ones,
 * then the parent (rank -1). The ring's FIFO pick (every 31st pick) may
 * take one fiber out of that order among these NCHILD + 1 picks. */
static void lifo_parent(void *arg)
{
    (void)arg;
    usched_t *s = usched_self();
    for (int i = 0; i < NCHILD; i++) ASSERT_OK(usched_spawn(s, NULL, record, (void *)(intptr_t)i));
    usched_yield();
    record((void *)(intptr_t)-1);
}

static void test_lifo_order(void)
{
    usched_t *s = start_on("pack:1 core:1 pu:1", "usched");
    atomic_store(&norder, 0);
    run_fiber(s, lifo_parent, NULL);
    ASSERT_OK(usched_wait(s)); /* the parent may have been the one FIFO pick */
    ASSERT_EQ(atomic_load(&norder), NCHILD + 1);
    /* Expected ranks NCHILD-1, ..., 0, -1: strictly falling once at most one
     * entry is left out. */
    int best = 0;
    for (int skip = -1; skip <= NCHILD; skip++) {
        int prev = NCHILD, ok = 1;
        for (int k = 0; k <= NCHILD; k++) {
            if (k == skip) continue;
            if (order[k] >= prev) ok = 0;
            prev = order[k];
        }
        if (ok) best = 1;
    }
    if (!best) {
        for (int k = 0; k <= NCHILD; k++) fprintf(stderr, "run %d: rank %d\n", k, order[k]);
        TEST_FAIL_("run order is not newest first (rank -1 is the parent)");
    }
    usched_destroy(s);
}

/* ---- inline join of queued children that were not spawned last ------------ */

struct child {
    uint64_t ran_as; /* usched_self_id() inside: the joiner's id when inline */
    int seq;
};

static _Atomic int seq;

static void child_fn(void *arg)
{
    struct child *c = arg;
    c->ran_as = usched_self_id();
    c->seq = atomic_fetch_add(&seq, 1);
}

struct inline_run {
    struct child c[NCHILD];
    uint64_t parent_id;
    int reverse; /* join newest first instead of oldest first */
};

static void inline_parent(void *arg)
{
    struct inline_run *r = arg;
    usched_task_t *t[NCHILD];
    r->parent_id = usched_self_id();
    /* The order asserted below holds only if the parent keeps its CPU: a
     * preemption (the release stage reruns this suite at preempt_us=100)
     * would let a queued child run before its join. */
    ASSERT_EQ(usched_preempt_off(), 1);
    for (int i = 0; i < NCHILD; i++) ASSERT_OK(usched_spawn(usched_self(), &t[i], child_fn, &r->c[i]));
    for (int k = 0; k < NCHILD; k++) {
        int i = r->reverse ? NCHILD - 1 - k : k;
        ASSERT_OK(usched_join(t[i]));
        /* Nothing else ran on this CPU: each child ran when it was joined. */
        ASSERT_EQ(r->c[i].seq, k);
        ASSERT_EQ_U(r->c[i].ran_as, r->parent_id);
    }
    ASSERT_EQ(usched_preempt_on(), 0);
}

/* More children than the ring holds: the oldest spill to the global queue
 * in order, and joins in spawn order take them from its head. */
#define NMANY 2400 /* over twice the ring's 1024 slots */

static struct child many[NMANY];

static void many_parent(void *arg)
{
    uint64_t *parent_id = arg;
    usched_task_t **t = calloc(NMANY, sizeof *t);
    ASSERT(t);
    *parent_id = usched_self_id();
    ASSERT_EQ(usched_preempt_off(), 1); /* as in inline_parent */
    for (int i = 0; i < NMANY; i++) ASSERT_OK(usched_spawn(usched_self(), &t[i], child_fn, &many[i]));
    for (int i = 0; i < NMANY; i++) {
        ASSERT_OK(usched_join(t[i]));
        ASSERT_EQ(many[i].seq, i);
        ASSERT_EQ_U(many[i].ran_as, *parent_id);
    }
    ASSERT_EQ(usched_preempt_on(), 0);
    free(t);
}

static void test_inline_join_spilled(void)
{
    usched_t *s = start_on("pack:1 core:1 pu:1", "usched");
    atomic_store(&seq, 0);
    uint64_t before = stat_of(s, "joins_inline"), overflows = stat_of(s, "ring_overflows");
    uint64_t parent_id = 0;
    run_fiber(s, many_parent, &parent_id);
    ASSERT_GT(stat_of(s, "ring_overflows") - overflows, 0); /* the case under test happened */
    ASSERT_EQ_U(stat_of(s, "joins_inline") - before, NMANY);
    usched_destroy(s);
}

static void test_inline_join(int reverse)
{
    usched_t *s = start_on("pack:1 core:1 pu:1", "usched");
    struct inline_run r = {.reverse = reverse};
    atomic_store(&seq, 0);
    uint64_t before = stat_of(s, "joins_inline");
    run_fiber(s, inline_parent, &r);
    ASSERT_EQ_U(stat_of(s, "joins_inline") - before, NCHILD);
    usched_destroy(s);
}

/* ---- usched_spawn_call: a call once 64 fibers wait on the CPU -------------- */

#define NCALL 100 /* the first 64 are queued as fibers, the other 36 run as calls */

static struct child called[NCALL];
static _Atomic int detached_ran;

static void count_detached(void *arg)
{
    (void)arg;
    atomic_fetch_add(&detached_ran, 1);
}

static void call_parent(void *arg)
{
    uint64_t *parent_id = arg;
    usched_task_t *t[NCALL];
    *parent_id = usched_self_id();
    ASSERT_EQ(usched_preempt_off(), 1); /* as in inline_parent */
    for (int i = 0; i < NCALL; i++) {
        int before = atomic_load(&seq);
        ASSERT_OK(usched_spawn_call(usched_self(), &t[i], child_fn, &called[i]));
        ASSERT(t[i] != NULL);
        /* queued while fewer than 64 wait here; from then on, run before the return */
        ASSERT_EQ(atomic_load(&seq) - before, i < 64 ? 0 : 1);
        if (i >= 64) ASSERT_EQ_U(called[i].ran_as, *parent_id);
    }
    /* detached, with the queue still 64 deep: a call too */
    ASSERT_OK(usched_spawn_call(usched_self(), NULL, count_detached, NULL));
    ASSERT_EQ(atomic_load(&detached_ran), 1);
    for (int i = 0; i < NCALL; i++) ASSERT_OK(usched_join(t[i]));
    /* a second join of a child run as a call is not an error: it finished */
    ASSERT_OK(usched_join(t[NCALL - 1]));
    for (int i = 0; i < NCALL; i++) ASSERT_EQ_U(called[i].ran_as, *parent_id);
    /* the queue is empty again: the next one is a fiber, joined inline */
    usched_task_t *u;
    int before = atomic_load(&seq);
    ASSERT_OK(usched_spawn_call(usched_self(), &u, child_fn, &called[0]));
    ASSERT_EQ(atomic_load(&seq), before);
    ASSERT_OK(usched_join(u));
    ASSERT_EQ(atomic_load(&seq), before + 1);
    ASSERT_EQ(usched_preempt_on(), 0);
}

/* A chain of children that each spawn the next with usched_spawn_call, with
 * 64 fibers queued beneath them: far more levels than one stack holds. Each
 * runs the next as a call only while half of its stack is free; past that
 * the next is a fiber with its own stack (joined by blocking, as an inline
 * join checks the same), so the chain completes instead of overflowing. */
#define NLEVELS 4000
static _Atomic int levels;

static void deep(void *arg)
{
    volatile char frame[512]; /* stack a level uses */
    frame[0] = (char)(intptr_t)arg;
    int depth = (int)(intptr_t)arg;
    atomic_fetch_add(&levels, 1);
    if (depth + 1 < NLEVELS) {
        usched_task_t *t;
        ASSERT_OK(usched_spawn_call(usched_self(), &t, deep, (void *)(intptr_t)(depth + 1)));
        ASSERT_OK(usched_join(t));
    }
    ASSERT_EQ(frame[0], (char)(intptr_t)arg);
}

static void deep_parent(void *arg)
{
    (void)arg;
    usched_task_t *t[64];
    ASSERT_EQ(usched_preempt_off(), 1);
    for (int i = 0; i < 64; i++) ASSERT_OK(usched_spawn(usched_self(), &t[i], count_detached, NULL));
    deep((void *)(intptr_t)0);
    for (int i = 0; i < 64; i++) ASSERT_OK(usched_join(t[i]));
    ASSERT_EQ(usched_preempt_on(), 0);
}

static void test_spawn_call_deep(void)
{
    usched_t *s = start_with("pack:1 core:1 pu:1", "usched", "64k");
    uint64_t calls = stat_of(s, "spawns_called"), spawns = stat_of(s, "spawns");
    atomic_store(&levels, 0);
    run_fiber(s, deep_parent, NULL);
    ASSERT_EQ(atomic_load(&levels), NLEVELS);
    uint64_t called = stat_of(s, "spawns_called") - calls, fibers = stat_of(s, "spawns") - spawns - 64;
    /* some levels ran as calls, and some, where a stack was half used, as fibers */
    ASSERT_GT(called, 0);
    ASSERT_GT(fibers, 0);
    ASSERT_EQ_U(called + fibers, NLEVELS - 1);
    usched_destroy(s);
}

static void test_spawn_call(void)
{
    usched_t *s = start_on("pack:1 core:1 pu:1", "usched");
    atomic_store(&seq, 0);
    uint64_t calls = stat_of(s, "spawns_called"), spawns = stat_of(s, "spawns");
    uint64_t parent_id = 0;
    run_fiber(s, call_parent, &parent_id);
    ASSERT_EQ_U(stat_of(s, "spawns_called") - calls, NCALL - 64 + 1);
    ASSERT_EQ_U(stat_of(s, "spawns") - spawns, 64 + 1); /* the queued and the last (the parent: spawns_outside) */
    /* outside a fiber it is usched_spawn: the child is a fiber */
    usched_task_t *t;
    ASSERT_OK(usched_spawn_call(s, &t, count_detached, NULL));
    ASSERT_OK(usched_join(t));
    ASSERT_EQ(atomic_load(&detached_ran), 2);
    ASSERT_EQ_U(stat_of(s, "spawns_called") - calls, NCALL - 64 + 1);
    /* bad arguments get usched_spawn's errors */
    t = (usched_task_t *)&t;
    ASSERT_EQ(usched_spawn_call(s, &t, NULL, NULL), -EINVAL);
    ASSERT(t == NULL);
    ASSERT_EQ(usched_spawn_call(NULL, &t, count_detached, NULL), -EINVAL);
    usched_destroy(s);
}

/* ---- join of a child another CPU took -------------------------------------- */

struct stolen_run {
    _Atomic int started;
    uint64_t parent_id, ran_as;
    long result;
};

static void stolen_child(void *arg)
{
    struct stolen_run *r = arg;
    r->ran_as = usched_self_id();
    atomic_store(&r->started, 1);
    r->result = 42;
}

static void stolen_parent(void *arg)
{
    struct stolen_run *r = arg;
    r->parent_id = usched_self_id();
    usched_task_t *a, *b;
    struct child cb = {0};
    ASSERT_OK(usched_spawn(usched_self(), &a, stolen_child, r));
    ASSERT_OK(usched_spawn(usched_self(), &b, child_fn, &cb)); /* a to the ring */
    /* Keep this CPU busy until the other CPU has taken a and started it (a
     * bound on the wait, not a timing assertion: a steal that never happens
     * must fail, not hang). */
    double deadline = test_now() + 30.0;
    while (!atomic_load(&r->started)) {
        if (test_now() > deadline) TEST_FAIL_("no other CPU took the queued child within 30 s");
    }
    ASSERT_OK(usched_join(a));
    ASSERT_EQ(r->result, 42);
    ASSERT_NE((int64_t)r->ran_as, (int64_t)r->parent_id); /* it ran as itself, elsewhere */
    ASSERT_OK(usched_join(b));
}

static void test_join_stolen(void)
{
    usched_t *s = start_on("pack:1 core:2 pu:1", NULL);
    struct stolen_run r = {0};
    run_fiber(s, stolen_parent, &r);
    usched_destroy(s);
}

/* ---- a join racing the exit (J1-J5 in core/fiber.c) ------------------------ */

/* Children that run for a random short while on whichever CPU takes them,
 * joined after a random short while by a fiber or an outside thread: the
 * join comes before, during and after the exit, so each side of the
 * protocol sees the other's bit first in some rounds (DONE before JOINED,
 * WAIT before DONE, DONE between JOINED and WAIT). Every join must return 0
 * and see the child's result; detached children must all run. */
struct race {
    long spin, result;
};

static _Atomic long race_detached;

static void race_spin(long n)
{
    for (long i = 0; i < n; i++) __asm__ volatile("" ::: "memory");
}

static void race_child(void *arg)
{
    struct race *r = arg;
    race_spin(r->spin);
    r->result = r->spin + 1;
}

static void race_detached_child(void *arg)
{
    race_spin((long)(intptr_t)arg);
    atomic_fetch_add(&race_detached, 1);
}

static uint32_t race_rand(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static void race_parent(void *arg)
{
    long rounds = *(long *)arg;
    uint32_t rng = 2463534242u;
    for (long i = 0; i < rounds; i++) {
        struct race a = {.spin = race_rand(&rng) % 4000}, b = {.spin = race_rand(&rng) % 4000};
        usched_task_t *ta, *tb;
        ASSERT_OK(usched_spawn(usched_self(), &ta, race_child, &a));
        ASSERT_OK(usched_spawn(usched_self(), &tb, race_child, &b)); /* a to the ring: thieves take it */
        ASSERT_OK(usched_spawn(usched_self(), NULL, race_detached_child, (void *)(intptr_t)(race_rand(&rng) % 4000)));
        race_spin(race_rand(&rng) % 4000);
        ASSERT_OK(usched_join(ta));
        ASSERT_EQ(a.result, a.spin + 1);
        ASSERT_OK(usched_join(tb));
        ASSERT_EQ(b.result, b.spin + 1);
    }
}

static void test_join_race(void)
{
    /* More workers than CPUs: children run elsewhere, and the kernel
     * preempts workers at any point of either side. */
    usched_t *s = start_on("pack:1 core:4 pu:1", NULL);
    atomic_store(&race_detached, 0);
    long rounds = test_scale(3000);
    usched_task_t *p[2];
    for (int k = 0; k < 2; k++) ASSERT_OK(usched_spawn(s, &p[k], race_parent, &rounds));
    /* An outside joiner too (J4 with an owaiter). */
    uint32_t rng = 88675123u;
    long outside = test_scale(500);
    for (long i = 0; i < outside; i++) {
        struct race r = {.spin = race_rand(&rng) % 4000};
        usched_task_t *t;
        ASSERT_OK(usched_spawn(s, &t, race_child, &r));
        race_spin(race_rand(&rng) % 4000);
        ASSERT_OK(usched_join(t));
        ASSERT_EQ(r.result, r.spin + 1);
    }
    for (int k = 0; k < 2; k++) ASSERT_OK(usched_join(p[k]));
    ASSERT_OK(usched_wait(s));
    ASSERT_EQ(atomic_load(&race_detached), 2 * rounds);
    usched_destroy(s);
}

/* ---- a 10-ary fork-join tree on every CPU ---------------------------------- */

struct tree {
    long long num, size, sum;
};

static void tree_fn(void *arg)
{
    struct tree *k = arg;
    if (k->size == 1) {
        k->sum = k->num;
        return;
    }
    struct tree c[10];
    usched_task_t *t[10];
    long long sub = k->size / 10;
    for (int i = 0; i < 10; i++) {
        c[i] = (struct tree){.num = k->num + i * sub, .size = sub};
        ASSERT_OK(usched_spawn(usched_self(), &t[i], tree_fn, &c[i]));
    }
    k->sum = 0;
    for (int i = 0; i < 10; i++) {
        ASSERT_OK(usched_join(t[i]));
        k->sum += c[i].sum;
    }
}

static void test_tree(const char *topology)
{
    usched_t *s = start_on(topology, NULL);
    /* A power of 10, scaled down (a breadth-first policy keeps most of the
     * tree alive at once, and TSan tracks at most 8128 fibers). */
    long sc = test_scale(100000);
    long long leaves = sc >= 100000 ? 100000 : sc >= 10000 ? 10000 : 1000;
    struct tree root = {.num = 0, .size = leaves};
    run_fiber(s, tree_fn, &root);
    ASSERT_EQ(root.sum, leaves * (leaves - 1) / 2);
    usched_destroy(s);
}

int main(void)
{
    test_lifo_order();
    test_inline_join(0);
    test_inline_join(1);
    test_inline_join_spilled();
    test_spawn_call();
    test_spawn_call_deep();
    test_join_stolen();
    test_join_race();
    test_tree("pack:1 core:2 pu:1");
    test_tree("pack:1 l3:1 l2:4 core:1 pu:2");
    printf("core_forkjoin: ok\n");
    return 0;
}
