/*
 * Every op of the ops table, driven by a test-owned policy through the
 * public interface only (usched.h, usched/policy.h):
 *   - registration: no brief, unknown flags, -ENOSPC past 16 policies;
 *   - a failing init fails usched_start with its error, and exit is not
 *     called for it;
 *   - select_cpu (with per-fiber state), running, stopping (runnable for a
 *     switching yield), idle, busy, per-CPU state (zeroed, cache-line
 *     aligned, one per CPU), steal_order and want_steal, and NO_STEAL, which
 *     keeps every fiber on the CPU the policy chose;
 *   - the queries a policy may make: usched_pol_random, usched_pol_count,
 *     usched_pol_cpu_state, and out-of-range arguments (a neutral answer and
 *     one warning);
 *   - usched_self_id and usched_stat_desc;
 *   - USCHED_OPS_FORK_NEXT: spawns by fibers are placed in the spawner's next
 *     slot without a select_cpu call (counted as place_local); spawns from
 *     outside threads, bound spawns and wake-ups still ask.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "test.h"
#include "usched.h"
#include "usched/policy.h"

#define PSTATE_MAGIC 0x5eed5eedu
#define NCHILD 64

/* Per-CPU policy state: counters written on that CPU, read at exit. */
struct cstate {
    _Atomic uint64_t running, stopping, runnable, idle, busy, steal_order, want_steal;
    _Atomic uint64_t bad; /* a broken expectation seen inside an op */
};

struct pstate {
    uint32_t magic;       /* set by select_cpu */
    uint32_t placed;      /* select_cpu calls for this fiber */
    uint64_t spawned_by;  /* waker id at the spawn */
};

/* What the ops saw, summed by exit over the CPUs. */
static struct {
    _Atomic int inits, exits;
    uint64_t running, stopping, runnable, idle, busy, steal_order, want_steal, bad;
} seen;
static usched_pol_ctx_t *live_ctx;

static struct cstate *cst(usched_pol_ctx_t *ctx, int cpu)
{
    return usched_pol_cpu_state(ctx, cpu);
}

static int ops_init(usched_pol_ctx_t *ctx)
{
    atomic_fetch_add(&seen.inits, 1);
    live_ctx = ctx;
    int n = usched_pol_ncpus(ctx);
    for (int c = 0; c < n; c++) {
        struct cstate *st = cst(ctx, c);
        /* zeroed, cache-line aligned, one per CPU */
        ASSERT(st != NULL);
        ASSERT_EQ((uintptr_t)st % 64, 0);
        ASSERT_EQ(atomic_load(&st->running) + atomic_load(&st->bad), 0);
        if (c) ASSERT(labs((char *)st - (char *)cst(ctx, c - 1)) >= 64); /* no shared line */
    }
    return 0;
}

static void ops_exit(usched_pol_ctx_t *ctx)
{
    atomic_fetch_add(&seen.exits, 1);
    int n = usched_pol_ncpus(ctx);
    memset(&seen.running, 0, sizeof seen - offsetof(__typeof__(seen), running));
    for (int c = 0; c < n; c++) {
        struct cstate *st = cst(ctx, c);
        seen.running += atomic_load(&st->running);
        seen.stopping += atomic_load(&st->stopping);
        seen.runnable += atomic_load(&st->runnable);
        seen.idle += atomic_load(&st->idle);
        seen.busy += atomic_load(&st->busy);
        seen.steal_order += atomic_load(&st->steal_order);
        seen.want_steal += atomic_load(&st->want_steal);
        seen.bad += atomic_load(&st->bad);
        /* every CPU leaves idle (busy) before it stops */
        if (atomic_load(&st->idle) != atomic_load(&st->busy)) seen.bad++;
    }
    live_ctx = NULL;
}

/* Every fiber on the spawner's CPU (CPU 0 from outside), at the tail. */
static void ops_select(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                       struct usched_select_result *out)
{
    (void)ctx;
    struct pstate *ps = a->task->pstate;
    if (a->flags & USCHED_SEL_FORK) {
        ps->magic = PSTATE_MAGIC;
        ps->spawned_by = a->waker_id;
    }
    ps->placed++;
    out->cpu = a->waker_cpu >= 0 ? a->waker_cpu : 0;
    out->reason = USCHED_REASON_LOCAL;
    out->slot = USCHED_SLOT_TAIL;
}

static void ops_running(usched_pol_ctx_t *ctx, const struct usched_cpu_event *ev)
{
    struct cstate *st = cst(ctx, ev->cpu);
    const struct pstate *ps = ev->task->pstate;
    if (ev->size != sizeof *ev || ev->task->prev_cpu != ev->cpu || ps->magic != PSTATE_MAGIC)
        atomic_fetch_add_explicit(&st->bad, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->running, 1, memory_order_relaxed);
    /* a policy's own decision counter: counted as place_least_loaded */
    usched_pol_count(ctx, ev->cpu, USCHED_REASON_LEAST_LOADED);
}

static void ops_stopping(usched_pol_ctx_t *ctx, const struct usched_cpu_event *ev)
{
    struct cstate *st = cst(ctx, ev->cpu);
    atomic_fetch_add_explicit(&st->stopping, 1, memory_order_relaxed);
    if (ev->flags & USCHED_EV_RUNNABLE) atomic_fetch_add_explicit(&st->runnable, 1, memory_order_relaxed);
}

static void ops_idle(usched_pol_ctx_t *ctx, const struct usched_cpu_event *ev)
{
    if (ev->task) atomic_fetch_add_explicit(&cst(ctx, ev->cpu)->bad, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&cst(ctx, ev->cpu)->idle, 1, memory_order_relaxed);
}

static void ops_busy(usched_pol_ctx_t *ctx, const struct usched_cpu_event *ev)
{
    atomic_fetch_add_explicit(&cst(ctx, ev->cpu)->busy, 1, memory_order_relaxed);
}

/* Every other CPU, starting at a random one (usched_pol_random on the
 * thief's own CPU: two draws in a row differ). */
static int ops_steal_order(usched_pol_ctx_t *ctx, const struct usched_steal_args *a, int *out)
{
    struct cstate *st = cst(ctx, a->cpu);
    atomic_fetch_add_explicit(&st->steal_order, 1, memory_order_relaxed);
    uint32_t r1 = usched_pol_random(ctx, a->cpu), r2 = usched_pol_random(ctx, a->cpu);
    if (r1 == r2) atomic_fetch_add_explicit(&st->bad, 1, memory_order_relaxed);
    int n = 0;
    for (int i = 0; i < a->max; i++) {
        int c = (int)((r1 + (uint32_t)i) % (uint32_t)a->max);
        if (c != a->cpu) out[n++] = c;
    }
    return n;
}

static int ops_want_steal(usched_pol_ctx_t *ctx, const struct usched_victim_args *a)
{
    struct cstate *st = cst(ctx, a->thief);
    atomic_fetch_add_explicit(&st->want_steal, 1, memory_order_relaxed);
    if (a->thief == a->victim || a->load == 0) atomic_fetch_add_explicit(&st->bad, 1, memory_order_relaxed);
    return -1; /* half */
}

/* ---- USCHED_OPS_FORK_NEXT ------------------------------------------------------ */

static _Atomic int fn_fork_worker, fn_fork_outside, fn_other; /* select_cpu calls */

static void fn_select(usched_pol_ctx_t *ctx, const struct usched_select_args *a,
                      struct usched_select_result *out)
{
    (void)ctx;
    if ((a->flags & USCHED_SEL_FORK) && a->waker_cpu >= 0)
        atomic_fetch_add(&fn_fork_worker, 1);
    else if (a->flags & USCHED_SEL_FORK)
        atomic_fetch_add(&fn_fork_outside, 1);
    else
        atomic_fetch_add(&fn_other, 1);
    out->cpu = a->waker_cpu >= 0 ? a->waker_cpu : 0;
    out->reason = USCHED_REASON_STACKED;
    out->slot = USCHED_SLOT_TAIL;
}

static const struct usched_ops forknext = {
    .name = "t_forknext", .brief = "test: spawns by fibers go to the next slot unasked",
    .flags = USCHED_OPS_FORK_NEXT, .select_cpu = fn_select};

static _Atomic int fn_ran;

static void fn_sender(void *arg)
{
    ASSERT_OK(usched_chan_send(arg, (void *)1));
}

static void fn_child(void *arg)
{
    (void)arg;
    atomic_fetch_add(&fn_ran, 1);
}

/* NCHILD spawns joined one by one, one bound spawn, and a wake-up (a
 * rendezvous message from the bound child, which the parent waits for). */
static void fn_parent(void *arg)
{
    usched_chan_t *ch = arg;
    for (long i = 0; i < NCHILD; i++) {
        usched_task_t *t;
        ASSERT_OK(usched_spawn(usched_self(), &t, fn_child, NULL));
        ASSERT_OK(usched_join(t));
    }
    usched_task_t *b;
    ASSERT_OK(usched_spawn_on(usched_self(), &b, 1, fn_sender, ch));
    void *m;
    ASSERT_OK(usched_chan_recv(ch, &m));
    ASSERT_OK(usched_join(b));
}

static void fork_next(void)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "policy", "t_forknext"));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:2 pu:1"));
    ASSERT_OK(usched_start(s));
    usched_chan_t *ch;
    ASSERT_OK(usched_chan_create(&ch, 0));
    usched_task_t *p;
    ASSERT_OK(usched_spawn(s, &p, fn_parent, ch));
    ASSERT_OK(usched_join(p));
    uint64_t local = 0, bound = 0;
    ASSERT_OK(usched_stat(s, "place_local", &local));
    ASSERT_OK(usched_stat(s, "place_bound", &bound));
    ASSERT_OK(usched_destroy(s));
    ASSERT_OK(usched_chan_destroy(ch));
    printf("t_forknext: select_cpu for spawns by fibers %d, from outside %d, other %d; "
           "place_local %llu, place_bound %llu\n", atomic_load(&fn_fork_worker), atomic_load(&fn_fork_outside),
           atomic_load(&fn_other), (unsigned long long)local, (unsigned long long)bound);
    ASSERT_EQ(atomic_load(&fn_ran), NCHILD);
    ASSERT_EQ(atomic_load(&fn_fork_worker), 0);  /* never asked */
    ASSERT_EQ(atomic_load(&fn_fork_outside), 1); /* the parent */
    ASSERT_GE(atomic_load(&fn_other), 1);        /* the parent's wake-up by the bound child */
    ASSERT_GE(local, NCHILD);                    /* the children, as LOCAL */
    ASSERT_GE(bound, 1);
}

static int failing_init(usched_pol_ctx_t *ctx)
{
    (void)ctx;
    atomic_fetch_add(&seen.inits, 1);
    return -ENODEV;
}

#define OPS_COMMON                                                                 \
    .task_state_size = sizeof(struct pstate), .cpu_state_size = sizeof(struct cstate), \
    .init = ops_init, .exit = ops_exit, .select_cpu = ops_select,                  \
    .steal_order = ops_steal_order, .want_steal = ops_want_steal,                  \
    .running = ops_running, .stopping = ops_stopping, .idle = ops_idle, .busy = ops_busy

static const struct usched_ops steals = {
    .name = "t_steals", .brief = "test: every op, stealing", .flags = USCHED_OPS_TRACK_TIME, OPS_COMMON};
static const struct usched_ops nosteal = {
    .name = "t_nosteal", .brief = "test: every op, no stealing", .flags = USCHED_OPS_NO_STEAL, OPS_COMMON};
static const struct usched_ops failing = {
    .name = "t_failing", .brief = "test: init fails", .init = failing_init, .exit = ops_exit};

/* ---- the workload ------------------------------------------------------------- */

static _Atomic int off_cpu0;  /* children that ran elsewhere than CPU 0 */
static _Atomic int done;
static uint64_t child_id[NCHILD];

static void child(void *arg)
{
    long i = (long)arg;
    child_id[i] = usched_self_id();
    if (usched_self_cpu() != 0) atomic_fetch_add(&off_cpu0, 1);
    usched_yield(); /* with siblings queued: a switching yield */
    if (usched_self_cpu() != 0) atomic_fetch_add(&off_cpu0, 1);
    atomic_fetch_add(&done, 1);
}

/* Queues NCHILD children on its own CPU (0); with stealing allowed it keeps
 * CPU 0 busy until another CPU has stolen one (bounded: 20 s). */
static void parent(void *arg)
{
    bool wait_steal = arg != NULL;
    for (long i = 0; i < NCHILD; i++) ASSERT_OK(usched_spawn(usched_self(), NULL, child, (void *)i));
    for (int k = 0; wait_steal && !atomic_load(&off_cpu0) && k < 20000; k++) usleep(1000);
}

static void run(const char *policy, bool steal)
{
    memset(child_id, 0, sizeof child_id);
    atomic_store(&off_cpu0, 0);
    atomic_store(&done, 0);
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "policy", policy));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:2 pu:1"));
    /* Without stealing, the stall monitor would move CPU 0's queue away
     * should the parent's spawns take stall_us (sanitizers): off here, where
     * the policy's own no-steal is checked (docs/monitor.md). */
    if (!steal) ASSERT_OK(usched_set(s, "knobs", "stall_us=0"));
    ASSERT_OK(usched_start(s));
    int inits = atomic_load(&seen.inits), exits = atomic_load(&seen.exits);
    ASSERT_OK(usched_spawn(s, NULL, parent, steal ? (void *)1 : NULL));
    ASSERT_OK(usched_wait(s));
    ASSERT_EQ(atomic_load(&done), NCHILD);

    /* usched_self_id: 0 outside fibers, distinct and non-zero inside */
    ASSERT_EQ_U(usched_self_id(), 0);
    for (int i = 0; i < NCHILD; i++) {
        ASSERT_NE(child_id[i], 0);
        for (int j = 0; j < i; j++) ASSERT(child_id[i] != child_id[j]);
    }

    /* queries out of range: a neutral answer (and one warning, checked in main) */
    usched_pol_ctx_t *ctx = live_ctx;
    ASSERT(ctx != NULL);
    ASSERT_PTR_EQ(usched_pol_cpu_state(ctx, 2), NULL);
    ASSERT_PTR_EQ(usched_pol_cpu_state(ctx, -1), NULL);
    ASSERT_EQ(usched_pol_cpu_load(ctx, 7), 0);
    ASSERT_EQ(usched_pol_group(ctx, 0, USCHED_NLEVELS), -1);
    ASSERT_PTR_EQ(usched_pol_group_mask(ctx, USCHED_LVL_SMT, 99), NULL);
    ASSERT_PTR_EQ(usched_pol_order(ctx, 2), NULL);
    ASSERT(!usched_pol_cpu_idle(ctx, -3));
    ASSERT(!usched_pol_claim_idle(ctx, 2));
    /* usched_pol_random off its CPU (an outside thread): still a sequence */
    ASSERT(usched_pol_random(ctx, 0) != usched_pol_random(ctx, 0));

    uint64_t switches = 0, least = 0;
    ASSERT_OK(usched_stat(s, "switches", &switches));
    ASSERT_OK(usched_stat(s, "place_least_loaded", &least));
    ASSERT_OK(usched_destroy(s));

    printf("%s: running=%llu stopping=%llu runnable=%llu idle=%llu busy=%llu steal_order=%llu "
           "want_steal=%llu off_cpu0=%d switches=%llu place_least_loaded=%llu bad=%llu\n",
           policy, (unsigned long long)seen.running, (unsigned long long)seen.stopping,
           (unsigned long long)seen.runnable, (unsigned long long)seen.idle,
           (unsigned long long)seen.busy, (unsigned long long)seen.steal_order,
           (unsigned long long)seen.want_steal, atomic_load(&off_cpu0),
           (unsigned long long)switches, (unsigned long long)least, (unsigned long long)seen.bad);
    ASSERT_EQ(atomic_load(&seen.inits), inits);     /* once, at start */
    ASSERT_EQ(atomic_load(&seen.exits), exits + 1); /* once, at destroy */
    ASSERT_EQ_U(seen.bad, 0);
    /* every switch to a fiber is announced, and every fiber stops once per run */
    ASSERT_EQ_U(seen.running, switches);
    ASSERT_EQ_U(seen.stopping, seen.running);
    ASSERT_EQ_U(least, seen.running);
    ASSERT_GE(seen.running, NCHILD + 1);
    ASSERT_LE(seen.runnable, seen.stopping);
    ASSERT_GT(seen.idle, 0);
    if (steal) {
        ASSERT_GT(seen.steal_order, 0);
        ASSERT_GT(seen.want_steal, 0);
        ASSERT_GT(atomic_load(&off_cpu0), 0);
    } else {
        /* Every child yields with siblings queued on CPU 0: a switching
         * yield, announced as a runnable stop. With stealing, a thief that
         * took the children one by one while the parent spawned (a loaded
         * machine) runs each alone, and no yield switches. */
        ASSERT_GT(seen.runnable, 0);
        ASSERT_EQ_U(seen.steal_order, 0);
        ASSERT_EQ_U(seen.want_steal, 0);
        ASSERT_EQ(atomic_load(&off_cpu0), 0);
    }
}

static void registration(void)
{
    struct usched_ops bad = {.name = "t_nobrief", .select_cpu = ops_select};
    ASSERT_EQ(usched_policy_register(&bad), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "no brief");
    bad.brief = "test: unknown flag";
    bad.flags = 0x80;
    ASSERT_EQ(usched_policy_register(&bad), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "unknown flags 0x80");
    ASSERT_OK(usched_policy_register(&steals));
    ASSERT_OK(usched_policy_register(&nosteal));
    ASSERT_OK(usched_policy_register(&failing));
    ASSERT_OK(usched_policy_register(&forknext));
    /* fill the table: 16 registered policies at most */
    static struct usched_ops fill[16];
    static char names[16][16];
    int n = 4;
    for (int i = 0; n < 16; i++, n++) {
        snprintf(names[i], sizeof names[i], "t_fill%d", i);
        fill[i] = (struct usched_ops){.name = names[i], .brief = "test: fills the table"};
        ASSERT_OK(usched_policy_register(&fill[i]));
    }
    struct usched_ops extra = {.name = "t_extra", .brief = "test: one too many"};
    ASSERT_EQ(usched_policy_register(&extra), -ENOSPC);
    ASSERT_STR_CONTAINS(usched_last_error(), "at most 16");
    /* the refused ones are not listed; the accepted ones are */
    int listed = 0;
    for (int i = 0; i < usched_policy_count(); i++) {
        ASSERT(strcmp(usched_policy_name(i), "t_extra") != 0);
        ASSERT(strcmp(usched_policy_name(i), "t_nobrief") != 0);
        listed += strncmp(usched_policy_name(i), "t_", 2) == 0;
    }
    ASSERT_EQ(listed, 16);
}

static void failing_start(void)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "policy", "t_failing"));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:2 pu:1"));
    int inits = atomic_load(&seen.inits), exits = atomic_load(&seen.exits);
    ASSERT_EQ(usched_start(s), -ENODEV);
    ASSERT_STR_CONTAINS(usched_last_error(), "t_failing");
    ASSERT_EQ(atomic_load(&seen.inits), inits + 1);
    ASSERT_EQ(atomic_load(&seen.exits), exits); /* no exit without a successful init */
    ASSERT_EQ(usched_spawn(s, NULL, child, NULL), -ESRCH); /* not started */
    ASSERT_OK(usched_destroy(s));
    ASSERT_EQ(atomic_load(&seen.exits), exits);
}

static void stat_descs(void)
{
    int n = usched_stat_count();
    ASSERT_GT(n, 0);
    for (int i = 0; i < n; i++) {
        const char *d = usched_stat_desc(i);
        ASSERT(d != NULL && d[0] != '\0');
        ASSERT(strcmp(d, usched_stat_name(i)) != 0);
    }
    ASSERT_PTR_EQ(usched_stat_desc(-1), NULL);
    ASSERT_PTR_EQ(usched_stat_desc(n), NULL);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    stat_descs();
    registration();
    failing_start();
    fork_next();

    /* capture stderr: the out-of-range queries warn once per scheduler */
    struct capture cap;
    char buf[4096];
    capture_begin(&cap);
    run("t_steals", true);
    run("t_nosteal", false);
    capture_end(&cap, buf, sizeof buf);
    int warnings = capture_count(buf, "(warned once)");
    printf("stderr: %s", buf);
    ASSERT_EQ(warnings, 2); /* one per scheduler */
    ASSERT_STR_CONTAINS(buf, "usched_pol_cpu_state with cpu 2 outside [0, 2)");
    printf("ok\n");
    return 0;
}
