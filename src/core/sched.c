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
 * This file is the worker loop: find work, steal, spin, park, switch. The
 * queues are in queue.h, placement in place.c, the idle masks in idle.c,
 * the fiber lifecycle in fiber.c (map: docs/architecture.md).
 *
 * Finding work, on each CPU, in order (find_work):
 *   inbox -> next slot (at most next_cap runs in a row while other fibers
 *   wait here) -> bound list / ring, newest first (the oldest every 31st
 *   pick; the global queue first every 61st) -> global queue -> steal in the
 *   policy's order -> spin -> park.
 *
 * Switching. A fiber that yields, blocks or exits switches straight to the
 * next fiber of its CPU (find_local) when there is one, else to its worker's
 * host context, which steals, spins or parks. The context switched to runs
 * finish_prev() for the fiber that left: requeue it, call its blocking
 * `after` function, or retire it. One switch per hand-off, not two.
 *
 * Spin, then park. A CPU without work first publishes itself idle in the
 * masks, then spins for spin_us looking for work (at least one full steal
 * round), if fewer than half of the CPUs that are not parked spin already,
 * or if it has just handed a fiber to another CPU (the answer is likely to
 * come back). A spinner that finds work and was the last spinner wakes one
 * more parked CPU when work remains (chained wake-ups, Go's rule), and so
 * does a CPU that finds work at its park re-check (P3).
 * Parking protocol (the numbers are referred to below):
 *   P1. state = PARKED (seq_cst store);
 *   P2. full fence;
 *   P3. re-check inbox, next slot, ring, bound list, global queue, and the
 *       other CPUs' rings and spawns in their next slots; if anything is
 *       there, CAS PARKED->RUNNING and go on;
 *   P4. futex_wait(state, PARKED), with a timeout at the earliest timer.
 *       (This is the one place a worker sleeps; the I/O poller's variant,
 *       P1'/P4'/W3', follows below.)
 * A waker handing a fiber to CPU c:
 *   W1. pushes the fiber into c's inbox (or the global queue);
 *   W2. full fence (the push's exchange in W1 is a seq_cst read-modify-
 *       write, which is one);
 *   W3. if c's state is PARKED, CASes it to RUNNING and futex-wakes c.
 * Either the parker sees the fiber at P3, or the waker sees PARKED at W3: no
 * wake-up is lost. A spawn onto the local ring or next slot wakes one
 * parked CPU when no CPU spins (wakep, which begins with W2's fence: those
 * puts are plain stores); the woken CPU spins and steals. Under the policy's smt
 * rule (USCHED_OPS_SMT_RULE) wakep prefers a CPU of a whole idle core, and a
 * thief beside a busy sibling defers to one (steal's S1-S4).
 * I/O (src/io/poller.c has the full protocol; core/poller.h the hooks):
 * while fibers wait on fds, one parking CPU at a time takes the poller role
 * and parks in epoll_wait instead of on its futex:
 *   P1'. claim the role, state = PARKED_POLL (seq_cst store);
 *   P2, P3 as above (P3 finding work gives the role back);
 *   P4'. epoll_wait until the earliest timer; then unpark, and only then
 *       wake the fibers of the ready fds (through the policy);
 *   W3'. a waker that sees PARKED_POLL CASes it to RUNNING and writes the
 *       poller's eventfd (one write per sleep, deduplicated by a CAS flag);
 *       the eventfd is level-triggered, so epoll_wait returns even if the
 *       write came before it.
 * Idle CPUs poll without blocking before they steal, one at a time; busy
 * CPUs poll every io_tick picks or after io_poll_us.
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
 *     same one CAS (ring.c, T1-T4).
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
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/export.h"
#include "core/poller.h"
#include "core/preempt.h"
#include "core/queue.h"

static USCHED_TLS struct usched__wk *tls_wk;
_Atomic uint32_t usched__fence_word;

struct usched__wk *usched__self_wk(void) __attribute__((noinline));
struct usched__wk *usched__self_wk(void)
{
    __asm__ volatile("" ::: "memory");
    return tls_wk;
}

/* ---- waking workers -------------------------------------------------------- */

/* W3, once the caller saw `cpu` PARKED or PARKED_POLL (queue.h,
 * usched__wk_kick): claim the wake-up with a CAS and wake it, on its futex or
 * (W3') through the poller's eventfd. True if this caller woke it. */
bool usched__wk_wake_parked(usched_t *s, struct usched__wk *from, int cpu)
{
    struct usched__wk *w = s->wk[cpu];
    uint32_t exp = atomic_load_explicit(&w->state, memory_order_seq_cst);
    if (exp != WK_PARKED && exp != WK_PARKED_POLL) return false;
    uint32_t st = exp;
    if (!atomic_compare_exchange_strong(&w->state, &exp, WK_RUNNING)) return false;
    atomic_fetch_sub(&s->nparked, 1); /* busy from the kick on */
    usched__monitor_wake_idle(s);      /* W-M (monitor.c) [model: WM] */
    if (st == WK_PARKED_POLL) {
        usched__io_break(s); /* W3' (src/io/poller.c) */
        return true;
    }
    usched__futex(&w->state, FUTEX_WAKE, 1, NULL);
    usched__stat_inc(from, s, USCHED_STAT_futex_wakes);
    return true;
}

/* Wakes one parked CPU, nearest to `near` first, when nobody spins and no
 * such wake-up is in flight (Go's wakep): the woken CPU spins and steals.
 * Under the policy's smt rule (idle.c) a CPU of a whole idle core goes
 * first, nearest first: the new work then starts beside no busy sibling.
 * s->waking (0/1) keeps a burst of spawns from waking every CPU at once;
 * the woken worker clears it. */
bool usched__wk_wakep(usched_t *s, struct usched__wk *from, int near)
{
    /* W2 for work published with plain stores [model: WP1] (an owner's put into its
     * empty next slot, its ring's tail): without it the store could still
     * sit in this CPU's store buffer while the loads below read a spinner
     * that then parks - whose P3 misses the store - and the fiber waits for
     * its spawner to yield (core_nextslot's stranded case under load: 3 runs
     * of 20). The fence is cheap beside a spawn; callers that published with
     * a locked instruction pay it twice. */
    usched__full_fence();
    if (atomic_load_explicit(&s->nspinning, memory_order_seq_cst) != 0) return false;
    if (atomic_load_explicit(&s->nparked, memory_order_relaxed) == 0) return false;
    if (atomic_load_explicit(&s->waking, memory_order_relaxed)) return false;
    uint32_t zero = 0;
    if (!atomic_compare_exchange_strong(&s->waking, &zero, 1)) return false;
    int n = s->ncpus;
    const int *order = near >= 0 ? usched__topo_order(s->topo, near) : NULL;
    /* Contended CPUs (monitor.c, C3) last: the kernel runs them late. */
    bool skipped = false;
    for (int calm = 1; calm >= 0; calm--) {
        for (int whole = usched__idle_smt_rule(s); whole >= 0; whole--) {
            for (int i = 0; i < n; i++) {
                int c = order ? order[i] : i;
                uint32_t st = atomic_load_explicit(&s->wk[c]->state, memory_order_relaxed);
                if (st != WK_PARKED && st != WK_PARKED_POLL) continue;
                if (whole && !usched__idlemask_test(&s->idle_cores, c)) continue;
                if (calm && usched__wk_contended(s->wk[c])) {
                    skipped = true;
                    continue;
                }
                if (usched__wk_wake_parked(s, from, c)) { /* the woken worker clears s->waking */
                    if (whole) usched__stat_inc(from, s, USCHED_STAT_wake_idle_core);
                    if (calm && skipped) usched__stat_inc(from, s, USCHED_STAT_contend_wake_skips);
                    return true;
                }
            }
        }
        if (!skipped) break;
    }
    atomic_store(&s->waking, 0);
    /* WP3 [model: WP3]: a CPU that stored PARKED after the scan above (its
     * nparked++ came first, so this call went on) re-checked the queues
     * before another waker published its fiber; that waker then saw
     * `waking` set and left the wake-up to this call, which found nobody.
     * Look once more after clearing the flag (a seq_cst store, then
     * seq_cst loads): that CPU's PARKED is visible now. Without it the
     * fiber waited beside the parked CPU until its waker's CPU came round
     * or the stall monitor moved it (model/park.pml finds the
     * interleaving). Rare: only a wakep that found no parked CPU pays. */
    for (int i = 0; i < n; i++) {
        int c = order ? order[i] : i;
        uint32_t st = atomic_load_explicit(&s->wk[c]->state, memory_order_seq_cst);
        if ((st == WK_PARKED || st == WK_PARKED_POLL) && usched__wk_wake_parked(s, from, c)) return true;
    }
    return false;
}

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

/* I/O: a busy CPU polls on a tick and a time bound (src/io/poller.c);
 * acquire pairs with the release that publishes the poller. Same contexts
 * as run_timers_tick, and only on a CPU that has a fiber to run next. */
static inline void io_tick(struct usched__wk *w)
{
    if (atomic_load_explicit(&w->s->io, memory_order_acquire)) usched__io_tick_slow(w);
}

static inline void poll_timers(struct usched__wk *w)
{
    run_timers_tick(w);
    io_tick(w);
}

static struct usched_task *gq_pull(usched_t *s, struct usched__wk *w);

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
static bool yield_look(usched_t *s, struct usched__wk *w)
{
    if (++w->ypoll < w->yevery) return false;
    w->ypoll = 0;
    if (usched__timers_pending(&w->timers)) usched__timers_run(&w->timers, usched__now_ns());
    if (atomic_load_explicit(&s->io, memory_order_acquire)) usched__io_poll_idle(w);
    return true;
}

/* The look woke a fiber here (found) or not: the next look's distance. */
static void yield_looked(struct usched__wk *w, bool found)
{
    uint32_t e = 2 * w->yevery;
    w->yevery = found || e < YIELD_LOOK_MIN ? YIELD_LOOK_MIN : e > YIELD_LOOK_MAX ? YIELD_LOOK_MAX : e;
}

/* The fiber this CPU's ring gives next: its descriptor's first two lines,
 * which its prologue writes (cpu, the stack it trades), asked for while the
 * one just popped runs. Stolen fibers and fibers woken elsewhere come with
 * those lines in another CPU's cache. */
static inline void prefetch_next(struct usched__wk *w)
{
    const char *n = usched__ring_peek_lifo(&w->ring);
    if (n) {
        usched__prefetch_w(n);
        usched__prefetch_w(n + 64);
    }
}

/* find_local, prologue and finish_prev are forced inline: each switch runs
 * all three, and their own frames (six saved registers each) were 139 of a
 * rendezvous round trip's 1,133 instructions (bench/micro/count_locked.py). */
#define USCHED__HOT_INLINE inline __attribute__((always_inline))

static USCHED__HOT_INLINE struct usched_task *find_local(usched_t *s, struct usched__wk *w)
{
    usched__wk_inbox_drain(s, w);
    w->tick++;
    struct usched_task *t;
    if (w->tick % USCHED_GLOBAL_EVERY == 0 && (t = gq_pull(s, w))) return t;
    if (atomic_load_explicit(&w->next, memory_order_relaxed)) {
        uint32_t cap = (uint32_t)usched__knob_get(&s->knobs, USCHED_KNOB_next_cap);
        t = usched__wk_next_swap(s, w, NULL);
        if (t) {
            /* Past the cap with nothing else queued here, demoting would
             * only pop it back (a ring push and a CAS for nothing). */
            if (w->next_runs < cap || (!usched__ring_len(&w->ring) && !w->bound_head)) {
                w->next_runs++;
                return t;
            }
            /* Demote: a ping-pong pair must not starve the queue. */
            usched__stat_add(&w->stats, USCHED_STAT_next_demoted, 1);
            usched__wk_queue_oldest(s, w, t);
        }
    }
    w->next_runs = 0;
    if (w->bound_head && ((w->tick & 1) || !usched__ring_len(&w->ring))) return usched__wk_bound_get(w);
    /* Work first: the newest fiber (the child spawned last, the fiber woken
     * last), so fork-join trees unfold depth first; every 31st pick the
     * oldest, so no fiber waits forever behind newer ones. */
    if (w->tick % USCHED_FIFO_EVERY == 0 && (t = usched__ring_pop(&w->ring))) return t;
    if ((t = usched__ring_pop_lifo(&w->ring))) {
        prefetch_next(w);
        return t;
    }
    return usched__wk_bound_get(w);
}

static const int steal_stat[TOPO_NLEVELS] = {
    USCHED_STAT_steal_smt, USCHED_STAT_steal_l2, USCHED_STAT_steal_llc,
    USCHED_STAT_steal_package, USCHED_STAT_steal_numa, USCHED_STAT_steal_machine};

static bool may_steal(usched_t *s)
{
    return s->pol_steals && usched__knob_get(&s->knobs, USCHED_KNOB_steal);
}

/* How many fibers thief may take from victim (0 none, -1 half): the policy's
 * want_steal, or within the LLC any load, beyond it load >= steal_thresh or
 * any load when the victim's LLC has no idle CPU (no nearer thief will take
 * it, and an LLC must not idle while fibers queue elsewhere). */
static int steal_want(usched_t *s, int thief, int victim, int level, unsigned load)
{
    if (s->ops->want_steal) {
        struct usched_victim_args a = {.size = sizeof a, .thief = thief, .victim = victim,
                                       .level = level, .load = load};
        return s->ops->want_steal(&s->pol, &a);
    }
    int thresh = (int)usched__knob_get(&s->knobs, USCHED_KNOB_steal_thresh);
    if (level <= TOPO_LLC || (int)load >= thresh) return -1;
    int llc = usched__topo_group(s->topo, victim, TOPO_LLC);
    return usched__idlemask_find(&s->idle_cpus, usched__topo_group_mask(s->topo, TOPO_LLC, llc), 0) < 0 ? -1
                                                                                                       : 0;
}

/* The smt rule (idle.c): a thief beside a busy sibling that found work to
 * steal leaves it to a whole idle core of its LLC (true: do not take it).
 * Progress (S1-S4): S1. the idle core's CPU is woken here if parked, so it
 * is awake and will look; S2. a CPU of a whole idle core never defers; S3.
 * a deferring CPU's own core is never whole idle, so deferrals cannot go
 * round in a circle while the cores stay as they are; S4. a deferring CPU
 * does not park while it sees the work (P3 counts it visible; find_work
 * yields the real CPU instead, for the woken one): once the idle core took
 * its share and is busy, the rest is the deferring CPU's to steal. */
static bool defer_counted(usched_t *s, struct usched__wk *w, int stat)
{
    int instead = usched__idle_core_instead(s, w->cpu);
    if (instead < 0) return false;
    usched__wk_kick(s, w, instead); /* S1 */
    usched__stat_add(&w->stats, stat, 1);
    w->deferred = 1;
    return true;
}

static bool defer(usched_t *s, struct usched__wk *w)
{
    return defer_counted(s, w, USCHED_STAT_steal_deferred);
}

/* The oldest fiber of the global queue (spills of full rings, outside
 * spawns), under the smt rule like a steal: a CPU beside a busy sibling
 * leaves it to a whole idle core of its LLC (S1-S4 hold as for steals: P3
 * counts a non-empty global queue as visible work, so a deferring CPU
 * yields instead of parking while it waits). The fairness pull of a busy
 * CPU (find_local, every USCHED_GLOBAL_EVERY picks) follows the same rule:
 * it has local work to run meanwhile. A pull beside a busy sibling is
 * judged (global_busy_sibling), so a miss of the rule shows. */
static struct usched_task *gq_pull(usched_t *s, struct usched__wk *w)
{
    if (atomic_load_explicit(&s->gq_n, memory_order_acquire) == 0) return NULL;
    if (defer_counted(s, w, USCHED_STAT_global_deferred)) return NULL;
    struct usched_task *t = usched__gq_pop_locked(s);
    if (!t) return NULL;
    usched__stat_add(&w->stats, USCHED_STAT_global_pulls, 1);
    if (usched__idle_beside_busy(s, w->cpu)) usched__stat_add(&w->stats, USCHED_STAT_global_busy_sibling, 1);
    return t;
}

/* Judges a successful steal (STYLE 17), as place.c judges wake-ups. */
static void stolen(usched_t *s, struct usched__wk *w)
{
    if (usched__idle_beside_busy(s, w->cpu)) usched__stat_add(&w->stats, USCHED_STAT_steal_busy_sibling, 1);
}

/* Steals from victims in the policy's order (the topology order by default,
 * rotating the start inside each distance band). On the last pass it may
 * take a victim's next slot, after a short back-off (Go's runnext rule). */
static struct usched_task *steal(usched_t *s, struct usched__wk *w, bool last_pass)
{
    if (!may_steal(s)) return NULL;
    int order[s->ncpus];
    int n;
    if (s->ops->steal_order) {
        struct usched_steal_args a = {.size = sizeof a, .cpu = w->cpu, .max = s->ncpus};
        n = s->ops->steal_order(&s->pol, &a, order);
        if (n < 0 || n > s->ncpus) n = 0;
    } else {
        const int *o = usched__topo_order(s->topo, w->cpu);
        const int *band = usched__topo_band_end(s->topo, w->cpu);
        n = 0;
        int lo = 1; /* o[0] is this CPU */
        for (int l = 0; l < TOPO_NLEVELS; l++) {
            int hi = band[l];
            int len = hi - lo;
            if (len > 0) {
                int r = (int)(w->rng = w->rng * 1103515245u + 12345u) >> 8;
                r = (r & 0x7fffff) % len;
                for (int i = 0; i < len; i++) order[n++] = o[lo + (r + i) % len];
            }
            if (hi > lo) lo = hi;
        }
    }
    /* The smt rule, beside a busy sibling: see the owner test below. */
    bool beside = usched__idle_rule_beside_busy(s, w->cpu);
    for (int i = 0; i < n; i++) {
        int v = order[i];
        if (v == w->cpu || v < 0 || v >= s->ncpus) continue;
        struct usched__wk *vw = s->wk[v];
        int level = usched__topo_level_shared(s->topo, w->cpu, v);
        unsigned load = usched__ring_len(&vw->ring);
        /* A victim that is awake between two fibers (not running one, not
         * parked, not contended) takes its own queue next; when no other
         * CPU of its core is busy, the work starts there beside no busy
         * sibling, so a thief beside a busy sibling leaves it. That victim
         * was typically just claimed for a wake-up: its idle bit is clear,
         * so its core no longer counts as whole idle and defer() would let
         * the thief take the fiber from under it (policy_place's sync
         * hand-off on 2x6x2 under qemu: the wakee ran beside P's busy
         * sibling in about 1 run of 6). Progress: the victim does not park
         * while its own queue holds work (P3), and this thief keeps
         * looking (the work stays visible to it). */
        if (load && beside && !atomic_load_explicit(&vw->current, memory_order_relaxed) &&
            atomic_load_explicit(&vw->state, memory_order_relaxed) == WK_RUNNING && !usched__wk_contended(vw) &&
            !usched__idle_sibling_busy(s, v)) {
            usched__stat_add(&w->stats, USCHED_STAT_steal_left_owner, 1);
            continue;
        }
        if (load) {
            int want = steal_want(s, w->cpu, v, level, load);
            if (want != 0 && defer(s, w)) return NULL;
            if (want != 0) {
                unsigned taken = 0;
                struct usched_task *t;
                if (want < 0 || (unsigned)want >= load - load / 2) {
                    t = usched__ring_steal(&vw->ring, &w->ring, &taken);
                } else {
                    /* The policy asked for fewer than half: one CAS each. */
                    t = usched__ring_steal_one(&vw->ring);
                    taken = t != NULL;
                    for (struct usched_task *x; (int)taken < want &&
                                                (x = usched__ring_steal_one(&vw->ring));
                         taken++)
                        usched__wk_ring_put(s, w, x);
                }
                if (t) {
                    prefetch_next(w);
                    USCHED__TRACE(s, w, steal, t->id, taken, v, level);
                    stolen(s, w);
                    usched__stat_add(&w->stats, steal_stat[level], 1);
                    usched__stat_add(&w->stats, USCHED_STAT_stolen_fibers, taken);
                    return t;
                }
            }
        }
        if (last_pass) {
            /* The fiber in the slot is read only once the CAS made it ours:
             * before that it may finish and its descriptor be reused. */
            struct usched_task *t = atomic_load_explicit(&vw->next, memory_order_acquire);
            if (t && atomic_load_explicit(&vw->current, memory_order_relaxed)) {
                if (defer(s, w)) return NULL;
                /* Back off ~3 us: the victim is likely about to run it
                 * (Go's runqgrab sleeps 3 us before taking a runnext). */
                uint64_t until = usched__now_ns() + 3000;
                while (usched__now_ns() < until) usched__cpu_relax();
                /* Another fiber in the slot now: its owner is cycling
                 * through it (a spawner displacing each child into its
                 * ring, where the next steal finds them), so no fiber is
                 * stranded there, and the take's membarrier - an IPI to
                 * every CPU of the process - would buy nothing. */
                if (atomic_load_explicit(&vw->next, memory_order_relaxed) != t) {
                    usched__stat_add(&w->stats, USCHED_STAT_steal_next_moved, 1);
                    continue;
                }
                if (usched__wk_next_steal(s, vw, t)) {
                    if (t->bound < 0) {
                        USCHED__TRACE(s, w, steal, t->id, 1, v, level);
                        stolen(s, w);
                        usched__stat_add(&w->stats, USCHED_STAT_steal_next, 1);
                        return t;
                    }
                    usched__wk_inbox_put(s, w, t, t->bound); /* bound: back home, by its inbox */
                }
            }
        }
    }
    usched__stat_add(&w->stats, USCHED_STAT_steal_failed, 1);
    return NULL;
}

/* Anything this CPU could run, or steal (P3)? */
static bool work_visible(usched_t *s, struct usched__wk *w)
{
    if (!usched__inbox_empty(&w->inbox) || atomic_load(&w->next) || usched__ring_len(&w->ring) ||
        w->bound_head || atomic_load(&s->gq_n))
        return true;
    if (!may_steal(s)) return false;
    for (int c = 0; c < s->ncpus; c++) {
        if (c == w->cpu) continue;
        struct usched__wk *vw = s->wk[c];
        unsigned load = usched__ring_len(&vw->ring);
        if (load && steal_want(s, w->cpu, c, usched__topo_level_shared(s->topo, w->cpu, c), load))
            return true;
        /* A spawn in the next slot behind a fiber that keeps running (a
         * spawner that does not join at once) is the last pass's to take
         * (Go's runqempty counts runnext too): without this, it waits for
         * the spawner while this CPU parks. A sync hand-off there is not:
         * its waker blocks at once, and a parking CPU must not keep
         * breaking pairs up. */
        if (atomic_load_explicit(&vw->next, memory_order_relaxed) &&
            atomic_load_explicit(&vw->next_spawn, memory_order_relaxed) &&
            atomic_load_explicit(&vw->current, memory_order_relaxed))
            return true;
    }
    return false;
}

static struct usched_task *try_all(usched_t *s, struct usched__wk *w, bool last_pass)
{
    struct usched_task *t = find_local(s, w);
    if (!t) t = gq_pull(s, w);
    if (!t) t = steal(s, w, last_pass);
    return t;
}

static void go_idle(usched_t *s, struct usched__wk *w)
{
    if (w->idle) return;
    w->idle = 1;
    usched__idle_set(s, w->cpu);
    if (s->ops->idle) {
        struct usched_cpu_event ev = {.size = sizeof ev, .cpu = w->cpu};
        s->ops->idle(&s->pol, &ev);
    }
}

static void go_busy(usched_t *s, struct usched__wk *w)
{
    if (!w->idle) return;
    w->idle = 0;
    usched__idle_clear(s, w->cpu);
    if (s->ops->busy) {
        struct usched_cpu_event ev = {.size = sizeof ev, .cpu = w->cpu};
        s->ops->busy(&s->pol, &ev);
    }
}

/* Leaves PARKED (timeout, spurious wake-up, or work seen at P3): whoever
 * moves a worker out of PARKED decrements nparked - a kicker or itself. */
static void unpark(usched_t *s, struct usched__wk *w)
{
    uint32_t exp = atomic_load(&w->state);
    if ((exp == WK_PARKED || exp == WK_PARKED_POLL) &&
        atomic_compare_exchange_strong(&w->state, &exp, WK_RUNNING)) {
        atomic_fetch_sub(&s->nparked, 1);
        usched__monitor_wake_idle(s); /* W-M (monitor.c) [model: WM] */
    }
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
    if ((t = find_local(s, w)) || (t = gq_pull(s, w))) {
        io_tick(w);
        return t;
    }
    go_idle(s, w);
    usched__live_flush(s, w); /* L3 (fiber.c) */
    bool spinning = false;
    bool recheck = false; /* P1': woke at a poller deferral's end */
    for (;;) {
        bool renew = false; /* this pass follows a poller deferral that ran out */
        if (usched__timers_pending(&w->timers)) usched__timers_run(&w->timers, usched__now_ns());
        /* Spin if fewer than half of the CPUs that are not parked spin
         * already (Go's rule; this CPU and those just kicked count as not
         * parked, so a CPU that handed work to a partner spins for the
         * answer instead of parking at once). */
        uint32_t awake = (uint32_t)s->ncpus - atomic_load(&s->nparked);
        if (!spinning && recheck) {
            /* Straight to the park checks: a spin here would poll and take
             * the spinning CPU's events (and fibers) after every deferral. */
            recheck = false;
            renew = true;
        } else if (!spinning && usched__wk_contended(w)) {
            /* C2 (monitor.c): no spinning on a contended CPU. */
            w->handoff = 0;
            usched__stat_add(&w->stats, USCHED_STAT_contend_nospin, 1);
        } else if (!spinning) {
            uint32_t sp = atomic_load(&s->nspinning);
            /* ...or if it just handed a fiber to another CPU, whose answer
             * (a cross-CPU ping-pong) would otherwise cost a park and a
             * futex wake-up each way. */
            bool handoff = w->handoff;
            w->handoff = 0;
            if (2 * sp < awake || handoff) {
                atomic_fetch_add(&s->nspinning, 1);
                spinning = true;
            }
        }
        if (spinning) {
            usched__stat_add(&w->stats, USCHED_STAT_spins, 1);
            uint64_t spin_ns = (uint64_t)usched__knob_get(&s->knobs, USCHED_KNOB_spin_us) * 1000;
            uint64_t until = usched__now_ns() + spin_ns;
            for (unsigned pass = 0;; pass++) {
                /* I/O: a non-blocking poll before stealing, every 4th pass
                 * while spinning (one CPU at a time; src/io/poller.c). */
                if ((pass & 3) == 0 && atomic_load_explicit(&s->io, memory_order_acquire))
                    usched__io_poll_idle(w);
                t = try_all(s, w, (pass & 3) == 3);
                if (t) {
                    go_busy(s, w);
                    /* The last spinner to find work wakes another (chaining) [model: SC]. */
                    if (atomic_fetch_sub(&s->nspinning, 1) == 1 && work_visible(s, w))
                        usched__wk_wakep(s, w, w->cpu);
                    return t;
                }
                if (atomic_load_explicit(&s->stopping, memory_order_relaxed)) break;
                /* At least one full round (4 passes, the last of which may
                 * take next slots) even with spin_us=0. */
                if (pass >= 3 && usched__now_ns() >= until) break;
                for (int i = 0; i < 32; i++) usched__cpu_relax();
            }
            atomic_fetch_sub(&s->nspinning, 1);
            spinning = false;
        }
        if (atomic_load_explicit(&s->stopping, memory_order_acquire)) {
            go_busy(s, w);
            return NULL;
        }
        /* A waker may have claimed this CPU and then found its fiber taken
         * by someone else: publish it idle again before sleeping. */
        if (!usched__idlemask_test(&s->idle_cpus, w->cpu)) usched__idle_set(s, w->cpu);
        /* P1 [model: P1], P2 (nparked first: a kicker decrements it only after it saw
         * PARKED) */
        atomic_fetch_add(&s->nparked, 1);
        /* P1': the CPU that takes the poller role parks in epoll (src/io);
         * while another CPU spins (and polls), the role waits (defer_dl) */
        uint64_t defer_dl = UINT64_MAX;
        bool in_poller = atomic_load_explicit(&s->io, memory_order_acquire) &&
                         usched__io_claim_poller(s, w->cpu, renew, &defer_dl);
        atomic_store_explicit(&w->state, in_poller ? WK_PARKED_POLL : WK_PARKED, memory_order_seq_cst);
        /* P2 [model: P2]: an explicit fence, though C11 orders a seq_cst store before
         * the seq_cst loads of P3 without one: qemu-user's aarch64 emulation
         * on x86-64 translates stlr and ldar with fences before the store
         * and after the load, so the store could pass P3's loads there and
         * a wake-up was lost (core_wakeloss under make aarch64: 6 of 51
         * runs on a loaded machine, none in 600 with the fence). One fence
         * per park costs nothing beside the futex wait. */
        usched__full_fence();
        /* P3 [model: P3] */
        if (work_visible(s, w) || atomic_load(&s->stopping)) {
            if (in_poller) usched__io_unclaim(s);
            unpark(s, w);
            atomic_store_explicit(&s->waking, 0, memory_order_relaxed);
            w->deferred = 0;
            if ((t = try_all(s, w, true))) {
                go_busy(s, w);
                /* [model: P3C] Chains the wake-up a spinner would (work left: wake
                 * one), as Go's findrunnable does after its last check. A
                 * CPU gets here without spinning (C2, monitor.c: it is
                 * contended) or with work that came after its spin: a
                 * burst of spawns while it spun out, whose wakep saw it
                 * spinning and woke nobody. Without this it took one
                 * fiber and the others waited beside parked CPUs
                 * (policy_place's steal scenario under qemu: 2 runs of 25,
                 * the same 3 fibers stranded each time). */
                if (work_visible(s, w)) usched__wk_wakep(s, w, w->cpu);
                return t;
            }
            if (w->deferred) sched_yield(); /* S4 */
            continue;
        }
        /* P4: sleep until kicked or the earliest timer (an I/O poller, when
         * there is one, waits here instead; see docs/architecture.md). */
        usched__stat_add(&w->stats, USCHED_STAT_parks, 1);
        USCHED__TRACE(s, w, park, 0, 0, 0, in_poller);
        /* Going to sleep: give back a few cold free stacks' pages (64 per
         * park bounds the madvise work a parking CPU does; not tuned). */
        usched__stack_trim(-1, 64);
        uint64_t dl = usched__timers_next(&w->timers);
        bool deferred = defer_dl < dl;
        if (deferred) dl = defer_dl;
        if (in_poller) {
            /* P4': epoll until the earliest timer; events go out after unpark */
            usched__io_park(w, dl);
            unpark(s, w);
            USCHED__TRACE(s, w, unpark, 0, 0, 0, 1);
            atomic_store_explicit(&s->waking, 0, memory_order_relaxed);
            usched__io_dispatch(w);
            continue;
        }
        if (dl == UINT64_MAX) {
            usched__futex(&w->state, FUTEX_WAIT, WK_PARKED, NULL);
        } else {
            uint64_t now = usched__now_ns();
            if (dl > now) {
                uint64_t d = dl - now;
                struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
                usched__futex(&w->state, FUTEX_WAIT, WK_PARKED, &ts);
            }
        }
        /* The deferral's end, not a kick: look at the poller role again */
        recheck = deferred && atomic_load_explicit(&w->state, memory_order_relaxed) == WK_PARKED &&
                  usched__now_ns() >= defer_dl;
        unpark(s, w);
        USCHED__TRACE(s, w, unpark, 0, 0, 0, 0);
        atomic_store_explicit(&s->waking, 0, memory_order_relaxed);
    }
}

static const int migrate_stat[TOPO_NLEVELS] = {
    -1, USCHED_STAT_migrate_l2, USCHED_STAT_migrate_llc,
    USCHED_STAT_migrate_package, USCHED_STAT_migrate_numa, USCHED_STAT_migrate_machine};

/*
 * A fiber's first run: its context is made here, on the CPU that runs it,
 * on that CPU's most recently freed stack, whose top is warm in this CPU's
 * cache; the stack reserved at spawn takes that one's place in the cache.
 * So a child another CPU took runs without pulling its spawner's stack
 * lines over, and the spawner's reserved stacks are never touched. The
 * stacks of one worker all have the scheduler's size.
 */
static void first_run(struct usched__wk *w, struct usched_task *t)
{
    usched__stack_cache_trade(&w->stacks, &t->stack);
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
        struct usched_cpu_event ev = {.size = sizeof ev, .flags = post == POST_YIELD ? USCHED_EV_RUNNABLE : 0,
                                      .cpu = w->cpu, .task = &ti};
        s->ops->stopping(&s->pol, &ev);
    }
    switch (post) {
    case POST_YIELD:
        usched__stat_add(&w->stats, USCHED_STAT_yields, 1);
        if (s->yield_shared && t->bound < 0)
            usched__gq_push(s, t);
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
    struct usched_task *next = find_local(s, w);
    if (!next && post == POST_YIELD) {
        if (!yield_look(s, w)) return; /* nothing else to run here */
        next = find_local(s, w);
        yield_looked(w, next != NULL);
        if (!next) return;
    }
    sched_seq_bump(w, memory_order_relaxed); /* S1: a switch starts (monitor.c) */
    /* t->blk is set by every block (usched__block_on), read only for one */
    USCHED__TRACE(s, w, stop, t->id, 0, post == POST_BLOCK ? t->blk : 0, post); /* before the next run's event */
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
    leave(w, POST_YIELD, NULL, NULL);
}

void *usched__worker_main(void *arg)
{
    struct usched__wk *w = arg;
    usched_t *s = w->s;
    tls_wk = w;
    usched__stack_thread_init();
    usched__fctx_host(&w->host);
    struct usched_task *t;
    while ((t = find_work(s, w))) {
        prologue(s, w, t);
        usched__fctx_switch(&w->host, &t->fctx);
        /* Back on the host: the fiber that switched here is in w->prev. */
        finish_prev(s, w);
    }
    usched__stack_cache_drain(&w->stacks);
    usched__desc_cache_drain(&w->descs);
    usched__stack_thread_fini();
    tls_wk = NULL;
    return NULL;
}

/* Wakes every worker (shutdown). */
void usched__wk_kick_all(usched_t *s)
{
    for (int c = 0; c < s->ncpus; c++) {
        struct usched__wk *w = s->wk[c];
        atomic_store(&w->state, WK_RUNNING);
        usched__futex(&w->state, FUTEX_WAKE, 1, NULL);
    }
    if (atomic_load(&s->io)) usched__io_break(s); /* a worker blocked in the poller */
}

