/*
 * The stall monitor: one thread per scheduler, in the role of Go's sysmon
 * (docs/monitor.md). A worker that has not passed a scheduling point for
 * longer than the knob stall_us - its fiber computes, blocks in a system
 * call, or the kernel descheduled its thread - is counted (`stalls`),
 * optionally reported (knob stall_warn: once per fiber, on stderr), and what
 * only its CPU serves is served elsewhere:
 *   - its due timers are fired by the monitor (T1-T3);
 *   - its inbox is moved to the global queue, which every CPU serves (M4),
 *     and so are its next slot and run queue where no CPU steals (a policy
 *     without stealing, or steal=0); bound fibers stay; where CPUs steal,
 *     a parked CPU is woken to steal them (M5);
 *   - a parked CPU is woken when fibers moved, or at the start of a stall
 *     while the I/O poller exists: it serves the global queue, steals,
 *     polls I/O and takes the poller role when it parks again.
 * A healthy worker pays two plain stores per switch (S1, S2) and an
 * uncontended exchange per non-empty inbox drain; nothing interrupts it.
 *
 * Scheduling points (the worker's sched_seq, core.h):
 *   S1. leave() (sched.c) makes it odd when a fiber starts to switch out;
 *   S2. finish_prev() makes it even (release) once it is done with that
 *       fiber: registers saved, run time written, requeued or unlocked. The
 *       monitor's acquire loads pair with it, so what finish_prev wrote
 *       happens before anything the monitor then does with the fiber.
 * A worker is stalled when, for longer than stall_us, sched_seq and the
 * running fiber's id have not changed and it runs a fiber (or is stuck odd,
 * mid-switch). The monitor looks every stall_us / 2, so a stall is seen
 * between stall_us and 1.5 stall_us after the last scheduling point.
 *
 * Firing another CPU's timers. A timer's callback wakes its fiber; waking a
 * fiber that is still on its way out (between its timer_add and the end of
 * its switch) would run it twice. Protocol:
 *   T1. the monitor fires only while the worker's sched_seq is the even
 *       value seen when the stall began, read under the timer heap's lock;
 *   T2. never a timer armed by the stalled fiber itself (task_id);
 *   T3. any other queued timer was armed by a fiber that has switched out
 *       since: a timer armed after the worker moved on is added under the
 *       heap lock after S1 (program order), so T1 sees the new sched_seq.
 *       A fiber woken meanwhile by someone else loses nothing: its timer's
 *       claim fails (src/sync/waitq.h, Q3).
 *
 * Moving a stalled CPU's inbox (M4): the inbox is single-consumer; the owner
 * and the monitor both take its consumer lock (an exchange; the owner only
 * when the inbox is not empty) and the loser leaves it alone this time.
 *
 * Thieves for a stalled CPU's queues (M5): where CPUs steal, its next slot
 * and run queue stay where they are, and on every look that finds fibers
 * there the monitor wakes one parked CPU (wakep: none while a CPU spins or
 * a wake-up is in flight), which steals them in the policy's order. So a
 * fiber queued behind a stalled one waits at most about a look, not until
 * the stall ends, even when every idle CPU had parked (stall_wakes).
 *
 * Sleeping while the scheduler is idle:
 *   M1. the monitor stores mon_idle = 1 (seq_cst);
 *   M2. [model: M2] it re-reads nparked; unless every worker is parked it goes on;
 *   M3. futex_wait(mon_idle, 1).
 *   W-M. a worker leaving PARKED decrements nparked (seq_cst), then reads
 *       mon_idle and, if set, clears it and wakes the monitor.
 * Either M2 sees the decrement or W-M sees mon_idle = 1: no wake-up is lost.
 *
 * Contention: a worker that is not getting its CPU (another process shares
 * it, or the kernel keeps preempting it) makes progress slowly and, between
 * fibers, not at all, without ever holding one fiber for stall_us.
 *   C1. on each look, the monitor reads the worker's run delay and run time
 *       (the first two fields of /proc/self/task/TID/schedstat, through a
 *       file kept open: one pread per CPU per look, none on the worker's
 *       path). Over the looks since the last verdict, once the worker was
 *       runnable for at least CONTEND_MIN_NS, a run delay of contend_pct
 *       percent or more of (run time + run delay) makes it contended, less
 *       than half that ends it; with less evidence (it mostly parked) the
 *       verdict stands. w->contended carries it (relaxed: a hint).
 *   C2. a contended worker parks without spinning (steal.c, find_idle): a
 *       spinner burns its share of a shared CPU, and a sleeper is run
 *       sooner by the kernel when woken (contend_nospin). When its park
 *       re-check finds work with more left, it wakes one more CPU, as the
 *       last spinner would. Only workers of a live, unemulated topology
 *       are judged: virtual ones outnumber the CPUs and wait by design.
 *   C3. wakep wakes it only when no uncontended CPU is parked (park.c;
 *       contend_wake_skips). It stays in the idle masks: a policy that
 *       finds no idle CPU there may queue work on the shared queue and kick
 *       a busy CPU, and a parked CPU it cannot see would not run it.
 *   C4. a contended worker awake between fibers (in its host context:
 *       stealing, polling, about to park) that passed no scheduling point
 *       since the last look, where a stall is never seen, is served like a
 *       stalled one: its due timers
 *       (T1-T3 with the sched_seq and fiber id of this look), its inbox,
 *       and where no CPU steals its queues (contend_served). With the knob
 *       contend_pin=1 a pinned worker's affinity is widened for the episode
 *       to the CPUs of its LLC that run no worker or an uncontended one at
 *       the episode's start, so the kernel may run it on a less busy CPU
 *       (contend_unpins); it stays pinned when there is none, and is pinned
 *       back to its CPU when the episode ends.
 *
 * Packing (knob contend_pack): the kernel runs a one-threaded server on the
 * CPU its one busy client leaves free; usched's workers, one per CPU, each
 * took turns with that client (redis-benchmark against `usched serve
 * redis`, unpinned: 0.68x redis-server with two workers, 0.90x with one).
 * While the uncontended workers have room for all the work, the contended
 * ones take none, as the kernel packs tasks onto fewer CPUs:
 *   K1. on each look the monitor samples whether each worker runs a fiber
 *       (util: a moving average over about 16 looks). The work fits
 *       when the sum of util over every worker is at most PACK_START_PCT
 *       percent of the number of uncontended workers (PACK_STAY_PCT once
 *       packed), with at least one worker contended and one not, and no
 *       CPU stalled. Then every contended worker is packed, with the
 *       nearest uncontended CPU (topology order) standing in for it
 *       (pack_to, stored before packed); else none is (contend_packs).
 *   K2. placement (place.c): an answer naming a packed CPU, for a fiber
 *       that is not bound, goes to its stand-in (contend_pack_moved); a
 *       sync answer is not reused on a packed CPU.
 *   K3. wakep passes packed parked CPUs over, in both passes and in WP3
 *       (contend_pack_skips). Work queued on an awake CPU then waits for
 *       that CPU's next scheduling point, or for the monitor: a stall
 *       unpacks every worker (K1) and kicks it, as does any unpacking.
 *       A packed CPU is still woken by a kick for what is its own (an
 *       inbox put, a bound fiber, its timers and I/O set).
 *   K4. a packed worker neither steals nor takes from the global queue
 *       (steal.c): it runs what is its own (inbox, bound fibers, next
 *       slot, ring, its timers, its I/O set) and parks; when its P3 left
 *       others' work out, it wakes an unpacked CPU for it first (a waker
 *       may have counted on it as a spinner: packed mid-spin).
 *   K5. I/O homes (io_poller=percpu; place.c, fd.c): a descriptor's home
 *       is never a packed CPU (its stand-in instead), and a wait on a
 *       descriptor homed on one asks at once rather than at every
 *       IO_SAMPLE_EVERY-th wait, so it moves within IO_REHOME_TCP waits.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/fault.h"
#include "core/park.h"
#include "core/pin.h"
#include "core/preempt.h"
#include "core/schedtrace.h"
#include "core/statshm.h"

#define MON_WARNED 64          /* fibers remembered as warned about */
#define MON_MIN_PERIOD_NS 500000ull /* 0.5 ms: the monitor's shortest sleep */
#define MON_OFF_PERIOD_NS 100000000ull /* 100 ms: re-read stall_us while it is 0 */

/* C1: the least runnable time (run + run delay) a verdict is based on. At
 * the default look of 5 ms a spinning or computing worker passes it on each
 * look; a worker that mostly parks keeps its verdict. Not tuned. */
#define CONTEND_MIN_NS 1000000ull

/* K1: util is a fixed-point fraction (PACK_ONE: always running a fiber),
 * averaged over about 2^PACK_AVG_SHIFT looks (80 ms at the default look); the work
 * fits on the uncontended workers below PACK_START_PCT percent of their
 * number, and stays packed below PACK_STAY_PCT. Not tuned. */
#define PACK_ONE 65536u
#define PACK_AVG_SHIFT 4
#define PACK_START_PCT 70
#define PACK_STAY_PCT 85

struct mon_cpu {
    uint32_t util;     /* K1: how often it ran a fiber at the recent looks */
    uint32_t seq;      /* sched_seq at the last look */
    uint64_t id;       /* cur_id at the last look */
    uint64_t since_ns; /* when seq or id last changed */
    bool busy;         /* running a fiber (or mid-switch) at the last look */
    bool stalled;      /* counted for the current episode */
    /* C1: run time and run delay (ns) at the last verdict */
    int ss_fd;         /* the worker's schedstat (open_schedstat), -1 none */
    bool ss_have;      /* ss_run, ss_delay hold a reading */
    bool widened;      /* affinity widened for the episode (C4) */
    bool pin_tried;    /* the episode's widening was decided */
    uint64_t ss_run, ss_delay;
};

struct usched__mon {
    pthread_t thread;
    _Atomic uint32_t stop;   /* futex word of the periodic sleep */
    struct mon_cpu *cpu;     /* [ncpus], monitor thread only */
    uint64_t warned[MON_WARNED]; /* ids warned about (a ring) */
    unsigned nwarned;
    struct usched__statshm *shm; /* the live statistics segment, NULL none (statshm.c) */
    struct usched__schedtrace *st; /* the periodic summary, NULL when off (schedtrace.c) */
};

/* The monitor is no worker: its counts go to the outside counters. */
static void mon_stat(usched_t *s, int id, uint64_t n)
{
    if (n) usched__stat_count(NULL, s, id, n);
}

/* Once per fiber (the last MON_WARNED fibers reported are remembered). */
static void warn_stall(struct usched__mon *m, int cpu, uint64_t id, uint64_t ns)
{
    unsigned n = m->nwarned < MON_WARNED ? m->nwarned : MON_WARNED;
    for (unsigned i = 0; i < n; i++)
        if (m->warned[i] == id) return;
    m->warned[m->nwarned++ % MON_WARNED] = id;
    fprintf(stderr,
            "usched: fiber %llu has held CPU %d for %llu ms without a scheduling point "
            "(a long computation or a blocking system call); its CPU's timers and queued "
            "fibers are served elsewhere\n",
            (unsigned long long)id, cpu, (unsigned long long)(ns / 1000000));
}

struct timer_guard {
    usched_t *s;
    struct usched__wk *w;
    uint32_t seq;
    uint64_t id;
};

/* T1, T2: asked under the heap's lock. A timer allowed to fire is counted
 * here, before it fires: whoever sees its fiber's effects (a fiber it woke,
 * run to its end elsewhere, then usched_wait returning) sees the count. */
static bool may_fire(const usched__timer_t *t, void *arg)
{
    const struct timer_guard *g = arg;
    bool ok = atomic_load_explicit(&g->w->sched_seq, memory_order_acquire) == g->seq && t->task_id != g->id;
    if (ok) mon_stat(g->s, USCHED_STAT_stall_timers, 1);
    return ok;
}

/* Into the global queue, counted first (as may_fire counts timers). */
static void move_batch(usched_t *s, struct usched_task **batch, unsigned nb)
{
    mon_stat(s, USCHED_STAT_stall_moved, nb);
    usched__gq_push_many(s, batch, nb);
}

/* Moves what only w serves, bound fibers excepted, to the global queue: its
 * inbox and, when no CPU steals, its next slot and run queue. Returns how
 * many fibers moved. */
static unsigned move_queues(usched_t *s, struct usched__wk *w, bool steals)
{
    struct usched_task *batch[64];
    unsigned nb = 0, moved = 0;
#define MOVE(t)                                                         \
    do {                                                                \
        batch[nb++] = (t);                                              \
        if (nb == 64) move_batch(s, batch, nb), moved += nb, nb = 0;    \
    } while (0)
    /* M4: the inbox, as many as it held when we looked (bound fibers are
     * pushed back behind them, so the loop ends). */
    int32_t n = atomic_load_explicit(&w->inbox_n, memory_order_relaxed);
    if (n > 0 && !atomic_exchange_explicit(&w->inbox_lock, 1, memory_order_acquire)) {
        struct usched_task *bound = NULL;
        usched__mpsc_node_t *node;
        for (int32_t i = 0; i < n && (node = usched__inbox_pop(&w->inbox)); i++) {
            atomic_fetch_sub_explicit(&w->inbox_n, 1, memory_order_relaxed);
            struct usched_task *t = usched__task_of_node(node);
            if (t->bound >= 0) {
                t->qnext = bound;
                bound = t;
            } else {
                MOVE(t);
            }
        }
        atomic_store_explicit(&w->inbox_lock, 0, memory_order_release);
        /* [model: BMV] Bound fibers stay on their CPU: back into its inbox,
         * not to the global queue. With W1-W3: the worker may have parked
         * meanwhile, having found the inbox empty while we held its fibers
         * (a contended worker is served between fibers, C4), so it must be
         * kicked. */
        while (bound) {
            struct usched_task *t = bound;
            bound = t->qnext;
            usched__wk_inbox_put(s, NULL, t, w->cpu); /* W1-W3, the kick included [model: BKH] */
        }
    }
    /* The next slot and the run queue, only where no CPU steals: otherwise
     * idle CPUs take them in topology order, next slot included (steal.c,
     * steal). The next slot's fiber is ours only once the CAS took it. Not
     * from a solo ring (one CPU, api.c: no other CPU could run them, and a
     * solo ring's owner alone consumes it; rq.h, usched__ring_set_solo). */
    struct usched_task *t = NULL;
    if (steals || w->ring.solo) goto out;
    t = atomic_load_explicit(&w->next, memory_order_acquire);
    if (t && usched__wk_next_steal(s, w, t)) {
        if (t->bound >= 0)
            usched__wk_inbox_put(s, NULL, t, t->bound); /* bound: back home */
        else
            MOVE(t);
    }
    /* The run queue (never holds bound fibers). */
    while ((t = usched__ring_steal_one(&w->ring))) MOVE(t);
out:
#undef MOVE
    if (nb) move_batch(s, batch, nb), moved += nb;
    return moved;
}

/* Serves what only c serves while its worker does not: due timers (T1-T3,
 * with this look's seq and id), the inbox, and where no CPU steals its
 * queues; wakes a parked CPU for what moved. */
static void serve_cpu(usched_t *s, struct usched__wk *w, int c, uint32_t seq, uint64_t id, bool first)
{
    /* T1-T3 [model: MT]: nobody else fires a stalled CPU's timers */
    if (!(seq & 1) && usched__timers_pending(&w->timers)) {
        struct timer_guard g = {.s = s, .w = w, .seq = seq, .id = id};
        (void)usched__timers_run_guarded(&w->timers, usched__now_ns(), may_fire, &g);
    }
    bool steals = s->pol_steals && usched__knob_get(&s->knobs, USCHED_KNOB_steal);
    unsigned moved = move_queues(s, w, steals);
    /* Where CPUs steal, the next slot and run queue stay for thieves (M5) [model: M5]:
     * make sure one is awake. Idle CPUs may all be parked with nothing
     * left to wake them: the stalled fiber queued these fibers before it
     * stalled, and the chain of wake-ups that should bring thieves (wakep
     * at the spawn, then each thief that finds work waking the next) can
     * end early, or a wake-up can be held back while another is in flight
     * (policy_place's steal scenario under qemu, 3 of about 70 runs: one
     * thief took two of four fibers and three CPUs stayed parked beside
     * the other three until the test gave up after 30 s; the break in the
     * chain is not found yet). The next slot counts only behind a running
     * fiber, as a thief's last pass takes it. */
    bool queued = steals && (usched__ring_len(&w->ring) ||
                             (atomic_load_explicit(&w->next, memory_order_relaxed) &&
                              atomic_load_explicit(&w->current, memory_order_relaxed)));
    /* A parked CPU looks at the global queue, steals, and polls I/O (then
     * parks in the poller if fibers wait on fds). Not for a stall that left
     * nothing behind: a woken CPU would only disturb the idle ones. With a
     * set per CPU (io_poller=percpu) a descriptor homed on c is seen only
     * by c or by an idle CPU that takes its readiness (poller.c): while
     * fibers wait in c's set, every look wakes one [model: MIO], so
     * readiness waits at most a monitor period behind the stall, not
     * until it ends (a contended CPU woken polls once before it parks
     * again: steal.c, C2). With one set (shared), every look wakes one
     * while fibers wait in it and no CPU holds its role [model: MSH]: the
     * first look's wake-up can miss a CPU in the middle of its park
     * (poller.c, io_unwatched). */
    if (moved || queued || (first && atomic_load_explicit(&s->io, memory_order_acquire)) ||
        usched__park_io_unwatched(w)) {
        if (usched__wk_wakep(s, NULL, c) && queued && !moved) mon_stat(s, USCHED_STAT_stall_wakes, 1);
    }
}

/* C1: reads CPU c's run time and run delay (ns). 0 or a negative errno. */
static int read_schedstat(usched_t *s, struct mon_cpu *mc, int c, uint64_t *run, uint64_t *delay)
{
    char buf[128], path[4200];
    ssize_t n;
    if (s->cfg.schedstat_dir) {
        snprintf(path, sizeof path, "%s/%d", s->cfg.schedstat_dir, c);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return -errno;
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
    } else {
        if (mc->ss_fd < 0) return -ENOENT; /* opened at start (open_schedstat) */
        n = pread(mc->ss_fd, buf, sizeof buf - 1, 0);
    }
    if (n <= 0) return -EIO;
    buf[n] = '\0';
    unsigned long long r, d;
    if (sscanf(buf, "%llu %llu", &r, &d) != 2) return -EINVAL;
    *run = r;
    *delay = d;
    return 0;
}

/* C4, pinning: at the start of an episode, a contended pinned worker's
 * affinity is widened to its CPU and the CPUs usched__wk_widen_set names
 * then (no worker, or an uncontended one); it keeps that set for the
 * episode, and is pinned back when the episode ends or the knob is turned
 * off. Fixed for the episode: once widened, the worker itself makes the
 * sibling it runs beside wait, and shrinking the set on that sibling's
 * verdict pinned it back and forth (redis-benchmark's one client: 13% below
 * the fixed set). With no such CPU it stays pinned. */
static void contend_widen(usched_t *s, struct mon_cpu *mc, struct usched__wk *w, bool on)
{
    bool want = on && s->pinned && !s->emu_os && usched__knob_get(&s->knobs, USCHED_KNOB_contend_pin);
    if (!want) {
        if (mc->widened) {
            mc->widened = false;
            usched__wk_pin(s, w, NULL); /* best effort, as at start */
        }
        return;
    }
    if (mc->pin_tried) return; /* once per episode (widened implies tried) */
    mc->pin_tried = true;
    cpu_set_t set;
    if (usched__wk_widen_set(s, w, &set) <= 1 || usched__wk_pin(s, w, &set) < 0) return;
    mon_stat(s, USCHED_STAT_contend_unpins, 1);
    mc->widened = true;
}

/* C1, C3, C4: the contention verdict on CPU c. */
static void contend_look(usched_t *s, struct mon_cpu *mc, int c)
{
    struct usched__wk *w = s->wk[c];
    int64_t pct = usched__knob_get(&s->knobs, USCHED_KNOB_contend_pct);
    uint64_t run = 0, delay = 0;
    bool on = usched__wk_contended(w), verdict = on;
    /* Only workers that own a real CPU: a virtual topology or SMT emulation
     * runs more workers than CPUs, unpinned, and they wait by design. */
    bool own_cpu = s->cfg.schedstat_dir || (usched__topo_is_live(s->topo) && !s->emu_os);
    if (pct && own_cpu && read_schedstat(s, mc, c, &run, &delay) == 0) {
        if (mc->ss_have && run >= mc->ss_run && delay >= mc->ss_delay) {
            uint64_t dr = run - mc->ss_run, dd = delay - mc->ss_delay;
            if (dr + dd < CONTEND_MIN_NS) { /* too little evidence: keep the baseline */
                contend_widen(s, mc, w, on);
                return;
            }
            uint64_t p100 = dd * 100;
            verdict = on ? p100 >= (uint64_t)pct * (dr + dd) / 2 : p100 >= (uint64_t)pct * (dr + dd);
        }
        mc->ss_have = true, mc->ss_run = run, mc->ss_delay = delay;
    } else {
        verdict = false; /* off, or no reading */
        mc->ss_have = false;
    }
    if (verdict != on) {
        atomic_store_explicit(&w->contended, verdict, memory_order_relaxed);
        if (verdict) mon_stat(s, USCHED_STAT_contend_episodes, 1);
        mc->pin_tried = false; /* a new episode, or the end of one */
    }
    contend_widen(s, mc, w, verdict);
}

/* One look at CPU c; stall_ns 0: the contention verdict only, nothing is
 * served (order tests turn stall_us off so no queue moves under them). */
static void check_cpu(usched_t *s, struct usched__mon *m, int c, uint64_t now, uint64_t stall_ns)
{
    struct usched__wk *w = s->wk[c];
    struct mon_cpu *mc = &m->cpu[c];
    contend_look(s, mc, c);
    uint32_t seq = atomic_load_explicit(&w->sched_seq, memory_order_acquire); /* pairs with S2 */
    uint64_t id = atomic_load_explicit(&w->cur_id, memory_order_relaxed);
    bool running = atomic_load_explicit(&w->current, memory_order_relaxed) != NULL;
    bool busy = running || (seq & 1);
    mc->util = mc->util - (mc->util >> PACK_AVG_SHIFT) + (running ? PACK_ONE >> PACK_AVG_SHIFT : 0); /* K1 */
    bool same = seq == mc->seq && id == mc->id;
    if (busy && mc->busy && same) { /* preemption (preempt.c, R1-R2) */
        usched__preempt_run_seen(s, now - mc->since_ns);
        if (!(seq & 1)) usched__preempt_look(s, c, id, now - mc->since_ns, now);
    }
    if (!busy || !mc->busy || !same) {
        if (mc->stalled) atomic_store_explicit(&w->stalled, 0, memory_order_relaxed); /* V7 */
        mc->seq = seq, mc->id = id, mc->since_ns = now, mc->busy = busy, mc->stalled = false;
    } else if (stall_ns && now - mc->since_ns >= stall_ns) {
        bool first = !mc->stalled;
        if (first) {
            mc->stalled = true;
            /* V7 (steal.c): thieves that left its queue to it take it now;
             * stored before serve_cpu's wakep, whose fence publishes it */
            atomic_store_explicit(&w->stalled, 1, memory_order_relaxed);
            mon_stat(s, USCHED_STAT_stalls, 1);
            /* In the outside threads' buffer (the monitor is not c's worker),
             * drawn on c's track. */
            USCHED__TRACE(s, NULL, stall, id, now - mc->since_ns, c, 0);
            if (s->tracing) usched__trace_stalled(s); /* trace_stall_dump */
            if (usched__knob_get(&s->knobs, USCHED_KNOB_stall_warn))
                warn_stall(m, c, id, now - mc->since_ns);
        }
        serve_cpu(s, w, c, seq, id, first);
        return;
    }
    /* C4: contended, awake between fibers, and no scheduling point since
     * the last look (a fiber held longer is a stall, above). */
    uint32_t st = atomic_load_explicit(&w->state, memory_order_relaxed);
    if (stall_ns && same && !busy && usched__wk_contended(w) && st != WK_PARKED && st != WK_PARKED_POLL) {
        mon_stat(s, USCHED_STAT_contend_served, 1);
        serve_cpu(s, w, c, seq, id, false);
    }
}

/* K1: the CPU that stands in for packed CPU c, the nearest uncontended
 * one; c itself when there is none (then nothing is packed). */
static int pack_target(usched_t *s, int c)
{
    const int *order = usched__topo_order(s->topo, c);
    for (int i = 0; i < s->ncpus; i++)
        if (!usched__wk_contended(s->wk[order[i]])) return order[i];
    return c;
}

/* K1: packs every contended worker while the uncontended ones have room for
 * all the work, and unpacks them all otherwise. */
static void pack_look(usched_t *s, struct usched__mon *m)
{
    int n = s->ncpus, nfree = 0;
    uint64_t demand = 0;
    bool stalled = false;
    for (int c = 0; c < n; c++) {
        demand += m->cpu[c].util;
        nfree += !usched__wk_contended(s->wk[c]);
        stalled |= m->cpu[c].stalled;
    }
    bool was = atomic_load_explicit(&s->pack.n, memory_order_relaxed) != 0;
    uint64_t room = (uint64_t)(was ? PACK_STAY_PCT : PACK_START_PCT) * (uint64_t)nfree * PACK_ONE;
    /* A stall unpacks every worker [model: PKS]: M5's wakep (serve_cpu)
     * passes packed CPUs over, and the stalled CPU's queues wait for one. */
    bool on = usched__knob_get(&s->knobs, USCHED_KNOB_contend_pack) && nfree > 0 && nfree < n && !stalled &&
              demand * 100 <= room;
    for (int c = 0; c < n; c++) {
        struct usched__wk *w = s->wk[c];
        bool want = on && usched__wk_contended(w);
        if (want) {
            int to = pack_target(s, c);
            if (to != usched__wk_pack_to(w)) atomic_store_explicit(&w->pack_to, to, memory_order_relaxed);
        }
        if (want == usched__wk_packed(w)) continue;
        atomic_store_explicit(&w->packed, want, memory_order_relaxed);
        if (want) {
            atomic_fetch_add_explicit(&s->pack.n, 1, memory_order_relaxed);
            mon_stat(s, USCHED_STAT_contend_packs, 1);
        } else {
            atomic_fetch_sub_explicit(&s->pack.n, 1, memory_order_relaxed);
            /* K3: wakep passed it over while it was packed, so work may
             * wait beside it (what a stalled CPU's serve just moved to
             * the global queue, this very look): woken, it looks (P3)
             * [model: PKU]. */
            usched__wk_kick(s, NULL, c);
        }
    }
}

/* M1-M3: sleeps while every worker is parked; with the periodic summary
 * on, at most until its next line (ts), as Go's sysmon keeps waking for
 * its schedtrace. */
static void sleep_if_idle(usched_t *s, struct usched__mon *m, const struct timespec *ts)
{
    atomic_store_explicit(&s->park.mon_idle, 1, memory_order_seq_cst);                 /* M1 */
    usched__full_fence(); /* before M2's load, under emulators too (park.c, P2) */
    if (atomic_load_explicit(&s->park.nparked, memory_order_seq_cst) == (uint32_t)s->ncpus && /* M2 */
        !atomic_load_explicit(&m->stop, memory_order_seq_cst)) {
        mon_stat(s, USCHED_STAT_monitor_sleeps, 1);
        usched__statshm_publish(m->shm, s, true); /* the final counts */
        usched__futex(&s->park.mon_idle, FUTEX_WAIT, 1, ts);                            /* M3 */
    }
    atomic_store_explicit(&s->park.mon_idle, 0, memory_order_relaxed);
}

static void *monitor_main(void *arg)
{
    usched_t *s = arg;
    struct usched__mon *m = s->mon;
    while (!atomic_load_explicit(&m->stop, memory_order_acquire)) {
        uint64_t stall_ns = (uint64_t)usched__knob_get(&s->knobs, USCHED_KNOB_stall_us) * 1000;
        uint64_t period = stall_ns ? stall_ns / 2 : MON_OFF_PERIOD_NS;
        if (period < MON_MIN_PERIOD_NS) period = MON_MIN_PERIOD_NS;
        uint64_t pre = usched__preempt_period_ns(s); /* preempt_us / 2, 0 when off */
        if (pre && pre < period) period = pre;
        uint64_t now = usched__now_ns();
        if (stall_ns || pre || usched__knob_get(&s->knobs, USCHED_KNOB_contend_pct))
            for (int c = 0; c < s->ncpus; c++) check_cpu(s, m, c, now, stall_ns);
        pack_look(s, m); /* K1 */
        usched__statshm_publish(m->shm, s, false); /* the live statistics */
        /* The periodic summary: its line when due; the monitor sleeps at
         * most until the next one, idle or not. */
        uint64_t line_in = m->st ? usched__schedtrace_tick(s, m->st, now) : 0;
        if (m->st && line_in < period) period = line_in;
        if (atomic_load_explicit(&s->park.nparked, memory_order_relaxed) == (uint32_t)s->ncpus) {
            struct timespec until = usched__ns_timespec(line_in);
            sleep_if_idle(s, m, m->st ? &until : NULL);
            continue;
        }
        struct timespec ts = usched__ns_timespec(period);
        usched__futex(&m->stop, FUTEX_WAIT, 0, &ts);
    }
    return NULL;
}

/* C1's files, opened before usched_start returns: a file descriptor the
 * library opened later would take a number the program had just closed
 * (a program may rightly expect a read on a number it closed to fail with
 * EBADF until it opens something itself). Live topologies only, where
 * contention is judged; each worker publishes its thread id first thing. */
static void open_schedstat(usched_t *s, struct usched__mon *m)
{
    if (s->cfg.schedstat_dir || !usched__topo_is_live(s->topo) || s->emu_os) return;
    for (int c = 0; c < s->ncpus; c++) {
        int32_t tid;
        while (!(tid = atomic_load_explicit(&s->wk[c]->tid, memory_order_acquire))) sched_yield();
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)tid);
        m->cpu[c].ss_fd = open(path, O_RDONLY | O_CLOEXEC); /* -1: no schedstat (no SCHED_INFO) */
    }
}

int usched__monitor_start(usched_t *s)
{
    struct usched__mon *m = usched__calloc(1, sizeof *m);
    if (!m) return -ENOMEM;
    m->cpu = usched__calloc((size_t)s->ncpus, sizeof *m->cpu);
    if (!m->cpu) {
        free(m);
        return -ENOMEM;
    }
    int rc = usched__schedtrace_new(s, &m->st);
    if (rc < 0) {
        free(m->cpu);
        free(m);
        return rc;
    }
    /* K1: each worker counts as always running until looks say otherwise,
     * so a scheduler packs only after about 2^PACK_AVG_SHIFT looks of light
     * work (from 0, a computation beside a busy process started packed) */
    for (int c = 0; c < s->ncpus; c++) m->cpu[c].ss_fd = -1, m->cpu[c].util = PACK_ONE;
    open_schedstat(s, m);
    m->shm = usched__statshm_create(s);
    s->mon = m;
    rc = -pthread_create(&m->thread, NULL, monitor_main, s);
    if (rc < 0) {
        usched__schedtrace_free(m->st);
        for (int c = 0; c < s->ncpus; c++)
            if (m->cpu[c].ss_fd >= 0) close(m->cpu[c].ss_fd);
        usched__statshm_destroy(m->shm);
        free(m->cpu);
        free(m);
        s->mon = NULL;
    }
    return rc;
}

void usched__monitor_stop(usched_t *s)
{
    struct usched__mon *m = s->mon;
    if (!m) return;
    atomic_store_explicit(&m->stop, 1, memory_order_seq_cst);
    usched__futex(&m->stop, FUTEX_WAKE, 1, NULL);
    usched__park_wake_monitor(s);
    pthread_join(m->thread, NULL);
    for (int c = 0; c < s->ncpus; c++)
        if (m->cpu[c].ss_fd >= 0) close(m->cpu[c].ss_fd);
    usched__statshm_destroy(m->shm);
    usched__schedtrace_free(m->st);
    free(m->cpu);
    free(m);
    s->mon = NULL;
}
