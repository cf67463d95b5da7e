/*
 * usched core: fibers on per-CPU workers.
 *
 * Glossary
 *   fiber (task)  a user-level thread: stack, saved registers, last CPU, bound
 *                 CPU. Its descriptor comes from a pool (desc.c); its stack
 *                 is reserved at spawn and set up where it first runs.
 *   worker        the OS thread running fibers for one CPU; pinned to it on
 *                 the live machine, unpinned on virtual topologies.
 *   CPU           a dense usched CPU number of the loaded topology.
 *   run queue     the CPU's 1024-slot ring (the owner pushes and pops at the
 *                 tail, newest first; thieves take the oldest half) plus its
 *                 next slot and, for bound fibers, an owner-only list.
 *   inbox         the CPU's MPSC list: other CPUs hand it fibers there.
 *   idle masks    idle_cpus (a bit per idle CPU) and idle_cores (the bits of
 *                 every CPU of a fully idle core); hints, kept by idle.c; a
 *                 placement claims an idle CPU by clearing its bit.
 *   global queue  one locked FIFO for outside spawns, ring overflow and the
 *                 shared run queue of the 4BSD-style policies.
 *
 * This file is the worker loop: pick, switch, finish the fiber that left.
 * The pick among the CPU's own queues is in local.h, the idle path (steal,
 * spin) in steal.c, parking and waking in park.c, the queues in queue.h,
 * placement in place.c, the idle masks in idle.c, the fiber lifecycle in
 * fiber.c (map and floors: docs/architecture.md).
 *
 * Switching. A fiber that yields, blocks or exits switches straight to the
 * next fiber of its CPU (find_local) when there is one, else to its worker's
 * host context, which steals, spins or parks. The context switched to runs
 * finish_prev() for the fiber that left: requeue it, call its blocking
 * `after` function, or retire it. One switch per hand-off, not two.
 *
 * Blocking (sched.h): a fiber parks with usched__block(after, arg); the
 * context it switches to calls after(arg) (typically a wait-queue unlock)
 * only once the fiber's registers are saved, so no waker can resume a fiber
 * still on its stack.
 *
 * Fork-join, work first. Under the default policy a spawned fiber goes to
 * the spawner's next slot (the child it displaces goes to the ring's tail,
 * where the owner takes it back first and idle CPUs steal the oldest half);
 * joining a child that still waits on this CPU, unstarted, in the next slot
 * or anywhere in the ring (or first in the global queue, where a full ring
 * spills its oldest half), runs it inline; a joiner woken by its exiting
 * child takes that CPU's next slot. So fork-join trees unfold depth first
 * (Cilk's work-first order) with few stacks alive, while thieves take the
 * biggest subtrees. A yield goes behind every fiber of its CPU (the ring's
 * head end).
 *
 * Designs rejected
 *   - One global run queue (4BSD): every pick takes one lock; kept only as
 *     the `global` and `bsd4` policies to measure against.
 *   - Waking the wakee on the waker's CPU always (Go's ready()): ignores
 *     where the wakee's cache is; the policy decides instead.
 *   - A mutex-protected remote queue (Tokio's inject queue) for cross-CPU
 *     wake-ups: the MPSC inbox costs one exchange and no lock.
 *   - A FIFO owner pop (Go's runq): spawn-order trees unfold breadth first,
 *     every child of a level alive (its stack) before the first one runs,
 *     and a join finds its child already started. The LIFO pop costs the
 *     same one CAS (ring.c, E1-E4).
 *   - The descriptor at the top of the fiber's stack (an earlier design):
 *     it saved an allocation per spawn, but a batch of spawns wrote a fresh
 *     page per child, and a thief's child pulled its spawner's stack lines
 *     over; pooled descriptors and stacks set up at first run (desc.c) cost
 *     two cache pops instead.
 *   - A registry of every fiber: it would put a shared lock on spawn and
 *     exit. Without it, fibers blocked forever when the scheduler is
 *     destroyed cannot be reclaimed; destroy reports them (see api.c).
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/export.h"
#include "core/idle.h"
#include "core/local.h"
#include "core/place.h"
#include "core/preempt.h"
#include "core/retire.h"
#include "core/sched.h"

/* ---- fibers on this worker ------------------------------------------------- */

/* S1/S2 of the stall monitor (monitor.c): odd while a switch is under way.
 * A plain store on a line this worker owns (S2's release is a plain store on
 * x86-64 and stlr on aarch64): no locked instruction. */
static inline void sched_seq_bump(struct usched__wk *w, memory_order mo)
{
    atomic_store_explicit(&w->sched_seq, atomic_load_explicit(&w->sched_seq, memory_order_relaxed) + 1, mo);
}

static void finish_prev(usched_t *s, struct usched__wk *w);
static inline void poll_timers(struct usched__wk *w);
static void leave(struct usched__wk *w, int post, void (*fn)(void *), void *arg);

/* A new fiber's first code (fiber.c makes its context with it). */
void usched__fiber_entry(void *arg)
{
    struct usched_task *t = arg;
    usched__fctx_started(&t->fctx);
    struct usched__wk *w = usched__self_wk();
    finish_prev(t->s, w);
    poll_timers(w);
    t->fn(t->arg);
    leave(usched__self_wk(), POST_EXIT, NULL, NULL); /* fn may have moved it to another worker */
    __builtin_unreachable();
}

void usched__block(void (*after)(void *), void *arg)
{
    usched__block_on(USCHED__TBLK_other, after, arg);
}

void usched__block_on(int blk, void (*after)(void *), void *arg)
{
    struct usched__wk *w = usched__self_wk();
    w->cur->blk = (uint8_t)blk;
    leave(w, POST_BLOCK, after, arg);
}

USCHED_EXPORT void usched_yield(void)
{
    struct usched__wk *w = usched__self_wk();
    if (!w || !w->cur) {
        sched_yield();
        return;
    }
    leave(w, POST_YIELD, NULL, NULL);
}

int usched__timer_add(usched__timer_t *t)
{
    struct usched__wk *w = usched__self_wk();
    if (!w || !w->cur) return -EPERM;
    t->task_id = w->cur->id; /* T2 (monitor.c): never fired by the monitor while its fiber runs */
    return usched__timers_add(&w->timers, t, w->cpu);
}

/* ---- the worker ------------------------------------------------------------ */

/* Fires due timers now and then while busy (every 16th call). Only from a
 * context that is not leaving: the host, or a fiber right after finish_prev,
 * so that a timer never wakes a fiber still on its way out. */
static inline void run_timers_tick(struct usched__wk *w)
{
    if (usched__timers_pending(&w->timers) && (++w->tpoll & 15) == 0)
        usched__timers_run(&w->timers, usched__now_ns());
}

/* I/O: a busy CPU polls on a tick and a time bound (the I/O backend, park.h).
 * Same contexts as run_timers_tick, and only on a CPU that has a fiber to
 * run next. */
static inline void io_tick(struct usched__wk *w)
{
    usched__park_io_tick(w);
}

static inline void poll_timers(struct usched__wk *w)
{
    run_timers_tick(w);
    io_tick(w);
}

/*
 * A yield that finds nothing else queued on its CPU (a lone yield) lets the
 * fiber run on, with no switch. A fiber that yields in a loop waiting for
 * another fiber would then never let a timer fire or I/O readiness be seen
 * on this CPU (both are looked at only between picks), and on one worker
 * nothing else looks: the fiber it waits for never wakes. So a lone yield
 * now and then does what the host does between picks - fires due timers and
 * polls I/O without blocking (one CPU at a time, only while fibers wait on
 * fds: src/io/poller.c) - and then switches to a fiber that woke here.
 *
 * How often: every yevery lone yields, from YIELD_LOOK_MIN, doubled after
 * each look that woke nothing here up to YIELD_LOOK_MAX, back to the
 * minimum after one that did. A poll is a system call: a tight lone-yield
 * loop (20-40 ns a turn on a loaded 2-vCPU VM) went to 1,000-1,300 ns a
 * turn with a look every 8th yield while another fiber waited on a socket,
 * and to 33-49 ns with this back-off; readiness waits at most
 * YIELD_LOOK_MAX yields (some 40 us of such a loop).
 * Same context as poll_timers: a fiber that is not leaving.
 */
#define YIELD_LOOK_MIN 8u
#define YIELD_LOOK_MAX 1024u

/* True when it looked (the caller then looks for a woken fiber). */
static bool yield_look(struct usched__wk *w)
{
    if (++w->ypoll < w->yevery) return false;
    w->ypoll = 0;
    if (usched__timers_pending(&w->timers)) usched__timers_run(&w->timers, usched__now_ns());
    usched__park_io_poll(w);
    return true;
}

/* The look woke a fiber here (found) or not: the next look's distance. */
static void yield_looked(struct usched__wk *w, bool found)
{
    uint32_t e = 2 * w->yevery;
    w->yevery = found || e < YIELD_LOOK_MIN ? YIELD_LOOK_MIN : e > YIELD_LOOK_MAX ? YIELD_LOOK_MAX : e;
}

/* Returns a fiber to run, or NULL when the scheduler stops. */
static struct usched_task *find_work(usched_t *s, struct usched__wk *w)
{
    struct usched_task *t;
    run_timers_tick(w);
    /* The I/O tick only when this CPU has work. One that is about to go idle
     * polls in its spin instead, where the fibers it finds run here (policy
     * step 2i); a busy poll places them elsewhere, as this CPU is busy, and
     * on the one-connection echo that sent a fiber to the parked CPU (a
     * futex wake and a migration) every 61 picks (docs/io.md). */
    if ((t = usched__find_local(s, w)) || (t = usched__gq_pull(s, w))) {
        io_tick(w);
        return t;
    }
    usched__wk_go_idle(s, w);
    usched__live_flush(s, w); /* L3 (retire.h) */
    usched__spares_trim(w);   /* a burst's spares back to the caches (worker.h) */
    return usched__find_idle(s, w); /* steal.c */
}

static const int migrate_stat[TOPO_NLEVELS] = {
    -1, USCHED_STAT_migrate_l2, USCHED_STAT_migrate_llc,
    USCHED_STAT_migrate_package, USCHED_STAT_migrate_numa, USCHED_STAT_migrate_machine};

/*
 * A fiber's first run: its context is made here, on the CPU that runs it,
 * on that CPU's most recently freed stack, whose top is warm in this CPU's
 * cache; the stack reserved at spawn takes that one's place (in the spare
 * fiber or the cache). So a child another CPU took runs without pulling
 * its spawner's stack lines over, and the spawner's reserved stacks are
 * never touched. The stacks of one worker all have the scheduler's size.
 */
static void first_run(struct usched__wk *w, struct usched_task *t)
{
    if (t->fresh) usched__task_fresh_zero(w->s, t); /* left by spawn's short path (fiber.c) */
    /* The warmest free stack here is the newest spare fiber's, if any (the
     * spares take most frees, retire.h), else the cache's newest. */
    if (w->nspare) {
        usched__stack_t *warm = &w->spare[w->nspare - 1]->stack, st = *warm;
        *warm = t->stack;
        t->stack = st;
    } else {
        usched__stack_cache_trade(&w->stacks, &t->stack);
    }
    usched__fctx_make(&t->fctx, t->stack.lo, t->stack.size, usched__fiber_entry, t, w->s->fpmode);
}

/* Makes t the running fiber of w (just before switching to it). */
static USCHED__HOT_INLINE void prologue(usched_t *s, struct usched__wk *w, struct usched_task *t)
{
    w->spawn_woke = 0; /* the next spawn into the ring wakes one (place.c) */
    if (t->cpu == -1) first_run(w, t);
    if (t->cpu != w->cpu && t->cpu >= 0) {
        int l = usched__topo_level_shared(s->topo, t->cpu, w->cpu);
        usched__stat_add(&w->stats, l == TOPO_SMT ? USCHED_STAT_migrate_smt : migrate_stat[l], 1);
        USCHED__TRACE(s, w, migrate, t->id, 0, t->cpu, l);
    }
    if (t->wake_ns) { /* wake-up latency, on the CPU that runs it */
        usched__lat_add(&w->lat, usched__now_ns() - t->wake_ns);
        t->wake_ns = 0;
    }
    USCHED__TRACE(s, w, run, t->id, 0, usched__ring_len(&w->ring) + (unsigned)atomic_load_explicit(&w->inbox_n, memory_order_relaxed), 0);
    __atomic_store_n(&t->cpu, w->cpu, __ATOMIC_RELAXED); /* a joiner reads it as a hint (join_take) */
    w->cur = t;
    if (s->track_time) {
        t->run_start_ns = usched__now_ns();
        atomic_store_explicit(&w->cur_ran_ns, t->ran_ns, memory_order_relaxed);
        atomic_store_explicit(&w->cur_start_ns, t->run_start_ns, memory_order_relaxed);
    }
    atomic_store_explicit(&w->cur_id, t->id, memory_order_relaxed);
    atomic_store_explicit(&w->current, t, memory_order_release);
    if (s->ops->running) {
        struct usched_task_info ti;
        usched__task_info_fill(t, &ti, 0);
        struct usched_cpu_event ev = {.size = sizeof ev, .cpu = w->cpu, .task = &ti};
        s->ops->running(&s->pol, &ev);
    }
    usched__stat_add(&w->stats, USCHED_STAT_switches, 1);
    usched__stack_set_current(&t->stack, t->id);
}

/*
 * Runs on whatever context a switch lands on (the host, a resumed fiber or
 * a new one): completes the fiber that switched out, now that its registers
 * are saved - requeue it (yield), release its wait-queue lock (block), or
 * retire it (exit).
 */
static USCHED__HOT_INLINE void finish_prev(usched_t *s, struct usched__wk *w)
{
    struct usched_task *t = w->prev;
    if (!t) return;
    w->prev = NULL;
    int post = w->post;
    w->post = POST_NONE;
    if (!t->stack.guarded) usched__stack_check(&t->stack, t->id);
    if (s->track_time) {
        t->last_ran_ns = usched__now_ns();
        t->ran_ns += t->last_ran_ns - t->run_start_ns;
    }
    if (s->ops->stopping) {
        struct usched_task_info ti;
        usched__task_info_fill(t, &ti, 0);
        struct usched_cpu_event ev = {.size = sizeof ev, .flags = post == POST_YIELD || post == POST_PREEMPT ? USCHED_EV_RUNNABLE : 0,
                                      .cpu = w->cpu, .task = &ti};
        s->ops->stopping(&s->pol, &ev);
    }
    switch (post) {
    case POST_YIELD:
    case POST_PREEMPT: /* a yield, but a preempted bound hog waits for the queues */
        usched__stat_add(&w->stats, USCHED_STAT_yields, 1);
        if (s->yield_shared && t->bound < 0)
            usched__gq_push(s, t);
        else if (post == POST_PREEMPT)
            usched__wk_queue_behind(s, w, t);
        else
            usched__wk_queue_oldest(s, w, t); /* behind every other fiber here */
        break;
    case POST_BLOCK:
        if (w->post_fn) w->post_fn(w->post_arg);
        break;
    case POST_EXIT:
        usched__fiber_exit(s, w, t);
        break;
    default:
        fprintf(stderr, "usched: fiber %llu switched out without a reason\n",
                (unsigned long long)t->id);
        abort();
    }
    sched_seq_bump(w, memory_order_release); /* S2: the fiber that left is done with */
}

/*
 * The running fiber gives up its CPU (yield, block or exit; w is the worker
 * running it, looked up by the caller). If this CPU has
 * other work queued locally, switch straight to it (one switch, not two via
 * the host); otherwise to the host, which steals, spins or parks. Either way
 * the switched-to context calls finish_prev() for this fiber.
 */
static void leave(struct usched__wk *w, int post, void (*fn)(void *), void *arg)
{
    struct usched_task *t = w->cur;
    usched_t *s = t->s;
    struct usched_task *next = usched__find_local(s, w);
    if (!next && (post == POST_YIELD || post == POST_PREEMPT)) {
        if (!yield_look(w)) return; /* nothing else to run here */
        next = usched__find_local(s, w);
        yield_looked(w, next != NULL);
        if (!next) return;
    }
    sched_seq_bump(w, memory_order_relaxed); /* S1: a switch starts (monitor.c) */
    /* t->blk is set by every block (usched__block_on), read only for one */
    USCHED__TRACE(s, w, stop, t->id, 0, post == POST_BLOCK ? t->blk : 0,
                  post | (next ? USCHED__TSTOP_SWITCH : 0)); /* before the next run's event, which shares its clock */
    w->prev = t;
    w->post = post;
    w->post_fn = fn;
    w->post_arg = arg;
    usched__fctx_t *to = &w->host;
    if (next) {
        prologue(s, w, next);
        to = &next->fctx;
    } else {
        w->cur = NULL;
        atomic_store_explicit(&w->current, NULL, memory_order_relaxed);
        usched__stack_set_current(NULL, 0);
    }
    if (post == POST_EXIT) {
        usched__fctx_switch_final(&t->fctx, to);
        __builtin_unreachable();
    }
    usched__fctx_switch(&t->fctx, to);
    /* Resumed, perhaps on another worker. */
    w = usched__self_wk();
    finish_prev(s, w);
    poll_timers(w);
}

/* Preemption (preempt_sig.c): w's running fiber, interrupted at a safe
 * place, yields from the signal handler. Due timers fire first (as in
 * yield_look), the pick looks at the global queue first, and a lone yield
 * polls I/O at once: any of them may hold the work that asked for the CPU. */
void usched__preempt_leave(struct usched__wk *w)
{
    if (usched__timers_pending(&w->timers)) usched__timers_run(&w->timers, usched__now_ns());
    w->ypoll = w->yevery;
    w->tick += USCHED_GLOBAL_EVERY - 1 - w->tick % USCHED_GLOBAL_EVERY; /* find_local: gq first */
    leave(w, POST_PREEMPT, NULL, NULL);
}

void *usched__worker_main(void *arg)
{
    struct usched__wk *w = arg;
    usched_t *s = w->s;
    usched__self_set(w);
    usched__stack_thread_init();
    usched__fctx_host(&w->host);
    struct usched_task *t;
    while ((t = find_work(s, w))) {
        prologue(s, w, t);
        usched__fctx_switch(&w->host, &t->fctx);
        /* Back on the host: the fiber that switched here is in w->prev. */
        finish_prev(s, w);
    }
    usched__spares_drain(w);
    usched__stack_cache_drain(&w->stacks);
    usched__desc_cache_drain(&w->descs);
    usched__stack_thread_fini();
    usched__self_set(NULL);
    return NULL;
}
