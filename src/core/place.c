/*
 * The placement referee: every runnable fiber that is not simply requeued
 * by its own CPU (spawns and wake-ups) is placed here. Bound fibers go to
 * their CPU; the others where the policy's select_cpu answers, once the core
 * has checked the answer; an answer it cannot use is replaced by the core's
 * fallback, counted and warned about once. The quality counters of each
 * decision (STYLE 17) are judged here too.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/idle.h"
#include "core/park.h"
#include "core/place.h"

_Static_assert(USCHED__WAKE_SYNC == USCHED_SEL_SYNC && USCHED__WAKE_EXIT == USCHED_SEL_EXIT &&
                   USCHED__WAKE_IO == USCHED_SEL_IO,
               "core/sched.h wake flags must equal the USCHED_SEL_* flags");

void usched__task_info_fill(const struct usched_task *t, struct usched_task_info *ti, uint32_t flags)
{
    ti->size = sizeof *ti;
    ti->flags = flags;
    ti->id = t->id;
    ti->prev_cpu = t->cpu;
    ti->bound_cpu = t->bound;
    ti->last_ran_ns = t->last_ran_ns;
    ti->woke_ns = t->woke_ns;
    ti->ran_ns = t->ran_ns;
    ti->pstate = (void *)t->pstate;
    memset(ti->reserved, 0, sizeof ti->reserved);
}

void usched__pol_warn(struct usched *s, const char *fmt, ...)
{
    pthread_mutex_lock(&s->out.lock);
    if (!s->out.warned_fallback) {
        s->out.warned_fallback = 1;
        char what[160];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        fprintf(stderr, "usched: policy '%s' %s; using the core's fallback (warned once)\n",
                s->ops->name, what);
    }
    pthread_mutex_unlock(&s->out.lock);
}

/* Quality counters (docs/policies.md), judged at decision time: a fiber put
 * beside a busy SMT sibling while a whole core of the LLC was idle (a SYNC
 * waker's CPU counted idle: it blocks right after, so its core is whole
 * idle by the time the fiber runs if its siblings are), and a wake-up that
 * left both its own and its waker's LLC while one had an idle CPU. */
static void judge(usched_t *s, struct usched__wk *from, int cpu, int prev, int waker, bool sync)
{
    if (usched__idle_beside_busy(s, cpu, sync ? waker : -1)) usched__stat_inc(from, s, USCHED_STAT_smt_busy_sibling);
    /* On prev's or the waker's own CPU it is in their LLC (the sync
     * hand-off's case: no topology look-ups on that path). */
    if (cpu == prev || cpu == waker) return;
    int ref = prev >= 0 ? prev : waker;
    if (ref < 0) return;
    int llc = usched__topo_group(s->topo, cpu, TOPO_LLC);
    int pl = prev >= 0 ? usched__topo_group(s->topo, prev, TOPO_LLC) : -1;
    int wl = waker >= 0 ? usched__topo_group(s->topo, waker, TOPO_LLC) : -1;
    if (llc == pl || llc == wl) return;
    for (int k = 0; k < 2; k++) {
        int home = k ? pl : wl;
        if (home >= 0 &&
            usched__idlemask_find(&s->idle_cpus, usched__topo_group_mask(s->topo, TOPO_LLC, home), 0) >= 0) {
            usched__stat_inc(from, s, USCHED_STAT_wake_cross_llc);
            return;
        }
    }
}

/* K5 (monitor.c): CPU c, or the CPU standing in for it while it is
 * packed. */
static int stand_in(usched_t *s, int c)
{
    return usched__wk_packed(s->wk[c]) ? usched__wk_pack_to(s->wk[c]) : c;
}

int usched__place_home(usched_t *s, struct usched__wk *me, int fd, unsigned flags, int packet, int home)
{
    int rule = packet >= 0 ? packet : me->cpu, c = -1;
    if (s->ops->io_home) {
        struct usched_home_args a = {.size = sizeof a, .flags = flags, .fd = fd, .packet_cpu = packet,
                                     .fiber_cpu = me->cpu, .home = home};
        atomic_fetch_add_explicit(&me->nopreempt, 1, memory_order_relaxed); /* P3 (preempt_sig.c) */
        c = s->ops->io_home(&s->pol, &a);
        atomic_fetch_sub_explicit(&me->nopreempt, 1, memory_order_relaxed);
        if (c < -1 || c >= s->ncpus) {
            usched__pol_warn(s, "returned a home out of range (cpu %d)", c);
            c = -1;
        }
    }
    return stand_in(s, c < 0 ? rule : c); /* K5: never a packed CPU */
}

/* The decision: where t goes, and why. */
static struct usched_select_result decide(usched_t *s, struct usched__wk *self, struct usched_task *t,
                                          unsigned flags, int waker)
{
    struct usched_select_result r = {.cpu = -1, .reason = USCHED_REASON_FALLBACK,
                                     .slot = USCHED_SLOT_TAIL};
    if (t->bound >= 0) {
        r.cpu = t->bound;
        r.reason = USCHED_REASON_BOUND;
        r.slot = (flags & USCHED_SEL_SYNC) ? USCHED_SLOT_NEXT : USCHED_SLOT_TAIL;
        return r;
    }
    if (!s->ops->select_cpu) {
        /* No policy answer: a spawn from outside goes to the global queue,
         * which every CPU reads; anything else is the core's fallback. */
        if ((flags & USCHED_SEL_OUTSIDE) && (flags & USCHED_SEL_FORK)) {
            r.reason = USCHED_REASON_SHARED;
            r.slot = USCHED_SLOT_SHARED;
            return r;
        }
    } else {
        struct usched_task_info ti;
        usched__task_info_fill(t, &ti, flags);
        struct usched_select_args a = {
            .size = sizeof a, .flags = flags, .waker_cpu = waker,
            .waker_id = self && self->cur ? self->cur->id : 0,
            .waker_pstate = self && self->cur ? (void *)self->cur->pstate : NULL,
            .task = &ti};
        if (self) atomic_fetch_add_explicit(&self->nopreempt, 1, memory_order_relaxed); /* P3 (preempt_sig.c) */
        s->ops->select_cpu(&s->pol, &a, &r);
        if (self) atomic_fetch_sub_explicit(&self->nopreempt, 1, memory_order_relaxed);
        if (r.cpu < 0 || r.cpu >= s->ncpus) {
            usched__pol_warn(s, "returned a CPU out of range (cpu %d)", r.cpu);
            r.cpu = -1;
        }
        if (r.reason < 0 || r.reason >= USCHED_NREASONS) r.reason = USCHED_REASON_FALLBACK;
        if (r.slot < 0 || r.slot >= USCHED_NSLOTS) r.slot = USCHED_SLOT_TAIL;
    }
    if (r.cpu < 0) {
        r.cpu = waker >= 0 ? waker : (t->cpu >= 0 ? t->cpu : 0);
        r.reason = USCHED_REASON_FALLBACK;
        if (r.slot != USCHED_SLOT_SHARED) r.slot = USCHED_SLOT_TAIL;
        usched__stat_inc(self, s, USCHED_STAT_pol_fallback);
    }
    /* K2 (monitor.c): a packed CPU takes no new work; its stand-in does. */
    if (__builtin_expect(atomic_load_explicit(&s->pack.n, memory_order_relaxed) != 0, 0) &&
        usched__wk_packed(s->wk[r.cpu])) {
        r.cpu = usched__wk_pack_to(s->wk[r.cpu]);
        usched__stat_inc(self, s, USCHED_STAT_contend_pack_moved);
    }
    return r;
}

/*
 * The sync hand-off reuse (USCHED_OPS_SYNC_REUSE): a ping-pong pair asks the
 * policy once in REUSE_EVERY wake-ups; a decision cost a round trip of two
 * wake-ups 650 of its 1,590 instructions (bench/micro/count_locked.py).
 * Hinted (SYNC) and plain wake-ups alike: a pair on a rendezvous channel
 * whose senders park first wakes each side plainly, from the receiver, and
 * the policy answers SYNC by its pair test; an answer is reused only for a
 * wake-up with the same hint (memo_sync), as the policy may answer the two
 * differently. Reused only while nothing the answer read has changed:
 *   - the two fibers woke only each other: the waker's last wake-up was of t
 *     (last_wakee), t's was of the waker, and t's last waker - the one the
 *     answer is for - was the waker (a wake-up by anyone else is decided,
 *     and clears the memo). So neither made a wakee flip since, and a
 *     policy's flip counts (its wide test) stand as they were;
 *   - the knobs (their generation);
 *   - the waker's CPU still has nothing queued (the answer's "the waker's CPU
 *     has nothing else to run");
 *   - with knob smt, the waker's CPU is not beside a busy sibling while a
 *     whole core idles (idle state changes at any time).
 * A descriptor's memo fields are never read from a previous life: reuse_left
 * is 0 at spawn, and memo_waker is written (with the waker's id, unique) only
 * by a decision that also wrote the waker's last_wakee; a previous life's
 * last_wakee cannot match either, as a new fiber's memo needs such a
 * decision first.
 */
#define REUSE_EVERY 16

static bool reuse_ok(usched_t *s, struct usched__wk *self, const struct usched_task *w,
                     const struct usched_task *t, bool sync, bool *beside_busy)
{
    if (!t->reuse_left || t->memo_waker != w->id || t->memo_sync != sync || w->last_wakee != t->id ||
        t->last_wakee != w->id ||
        t->memo_gen != atomic_load_explicit(&s->knobs.gen, memory_order_relaxed) ||
        atomic_load_explicit(&self->next, memory_order_relaxed) || !usched__ring_empty_owner(&self->ring) ||
        atomic_load_explicit(&self->inbox_n, memory_order_relaxed) ||
        atomic_load_explicit(&self->nbound, memory_order_relaxed) || usched__wk_packed(self) /* K2 */)
        return false;
    *beside_busy = usched__idle_beside_busy(s, self->cpu, -1);
    return !(*beside_busy && usched__knob_get(&s->knobs, USCHED_KNOB_smt));
}

/* A reused sync answer (reuse_ok said yes; self is a worker of s): t into
 * the waker's empty next slot, counted as the decision it repeats. */
static void place_reused(usched_t *s, struct usched__wk *self, struct usched_task *wf, struct usched_task *t,
                         bool beside)
{
    if (usched__lat_sample(self)) t->wake_ns = usched__now_ns(); /* trace.h */
    t->reuse_left--;
    USCHED__TRACE_T(s, self, USCHED__TEV_wake, t->id, wf->id, self->cpu, USCHED_REASON_SYNC);
    usched__stat_add(&self->stats, USCHED_STAT_place_bound + USCHED_REASON_SYNC, 1);
    usched__stat_add(&self->stats, USCHED_STAT_sync_reused, 1);
    usched__stat_add(&self->stats, USCHED_STAT_wake_local, 1);
    if (beside) usched__stat_add(&self->stats, USCHED_STAT_smt_busy_sibling, 1); /* knob smt off */
    atomic_store_explicit(&self->next_spawn, 0, memory_order_relaxed);
    usched__wk_local_put(s, self, t, USCHED_SLOT_NEXT); /* the slot is empty: nothing displaced */
}

/* t on self's own queues (r.slot: the next slot or the ring), for a spawn
 * (fork) or a wake-up decided on the waker's CPU (io: an I/O readiness). */
static inline void place_local(usched_t *s, struct usched__wk *self, struct usched_task *t, int slot, bool fork,
                               bool io)
{
    usched__stat_add(&self->stats, USCHED_STAT_wake_local, 1);
    /* Others may steal it: make sure an idle CPU is looking. A new fiber
     * in the next slot counts too (Go wakes a P on every spawn): its
     * parent may run on for long, and an idle CPU takes next slots on its
     * last steal pass. Not for a burst, though: a spawn into a ring that
     * held fibers already, after an earlier spawn of the same fiber in the
     * same run called wakep for the ring. Then a thief is awake, a wake-up
     * is in flight, or no CPU was parked; a thief that goes idle looks at
     * the ring before it parks (P3), one that steals wakes the next while
     * work is left, and a stalled spawner's queue gets one from the
     * monitor (M5). wakep's fence and its read of nspinning, a line every
     * spinning thief writes, were 11% of spawn's samples (perf, two CPUs). */
    atomic_store_explicit(&self->next_spawn, fork, memory_order_relaxed);
    /* [model: IOW] An I/O wake-up decided while this CPU runs no fiber
     * (its poll while idle, or after its park) that is its only work: it
     * runs the fiber next, as Go's netpoll runs the first goroutine it
     * readies, and it looks at its own queues before it could park (P3).
     * Waking another CPU only sent it to steal the fiber from the CPU its
     * packets arrive on: tbench's server beside two clients woke the other
     * worker about 16,000 times a second through its eventfd, each a
     * cross-CPU interrupt (docs/io.md). A second such fiber still wakes
     * one, as before. Judged before the put: the policy may name the next
     * slot, which this CPU's next pick empties without a locked
     * instruction (N1-N4), where the ring's last fiber costs a CAS. */
    bool owner = io && !self->cur && usched__ring_empty_owner(&self->ring) &&
                 !atomic_load_explicit(&self->next, memory_order_relaxed);
    bool stealable = usched__wk_local_put(s, self, t, slot);
    if (owner) {
        usched__stat_add(&self->stats, USCHED_STAT_io_wake_owner, 1);
    } else if (stealable) {
        if (!fork || !self->spawn_woke || usched__ring_len(&self->ring) <= 1) {
            self->spawn_woke |= fork;
            usched__wk_wakep(s, self, self->cpu);
        }
    } else if (fork) {
        usched__wk_wakep(s, self, self->cpu);
    }
}

/* The placement of a spawn (the spawner knows its worker) or a wake-up
 * (usched__wake looks it up, and tries a reused sync answer first). */
void usched__place_on(usched_t *s, struct usched__wk *self, struct usched_task *t, unsigned flags)
{
    int waker = self ? self->cpu : -1;
    if (!self) flags |= USCHED_SEL_OUTSIDE;
    struct usched_task *wf = self ? self->cur : NULL; /* the waking fiber, if any */
    /* a wake-up by a fiber, with or without the SYNC hint: its answer may be reused */
    bool pairable = (flags & (USCHED_SEL_WAKE | USCHED_SEL_IO | USCHED_SEL_EXIT)) == USCHED_SEL_WAKE && wf;
    uint32_t gen = 0;
    if (flags & USCHED_SEL_WAKE) {
        if (usched__lat_sample(self)) t->wake_ns = usched__now_ns(); /* trace.h */
        if (t->reuse_left) t->reuse_left = 0;
        if (wf) wf->last_wakee = t->id;
        gen = atomic_load_explicit(&s->knobs.gen, memory_order_acquire); /* before the decision reads knobs */
    }

    /* (a spawn by a fiber under USCHED_OPS_FORK_NEXT takes usched__place_fork) */
    struct usched_select_result r = decide(s, self, t, flags, waker);
    if (pairable && r.reason == USCHED_REASON_SYNC && r.slot == USCHED_SLOT_NEXT && r.cpu == waker &&
        t->bound < 0 && (s->ops->flags & USCHED_OPS_SYNC_REUSE)) {
        t->memo_waker = wf->id;
        t->memo_gen = gen;
        t->memo_sync = (flags & USCHED_SEL_SYNC) != 0;
        t->reuse_left = REUSE_EVERY - 1;
    }
    USCHED__TRACE_T(s, self, (flags & USCHED_SEL_FORK) ? USCHED__TEV_spawn : (flags & USCHED_SEL_IO) ? USCHED__TEV_io_ready : USCHED__TEV_wake,
                    t->id, self && self->cur ? self->cur->id : 0, r.cpu, r.reason); /* before t is queued */
    if (r.slot == USCHED_SLOT_SHARED && r.cpu < 0) {
        /* No CPU to kick: any parked one looks. */
        usched__gq_push(s, t);
        usched__wk_wakep(s, NULL, -1);
        return;
    }
    /* Counted and judged before t is queued: from then on another CPU may
     * run it and rewrite t->cpu. */
    usched__stat_inc(self, s, USCHED_STAT_place_bound + r.reason);
    if ((flags & USCHED_SEL_WAKE) && t->bound < 0) judge(s, self, r.cpu, t->cpu, waker, (flags & USCHED_SEL_SYNC) != 0);
    if (flags & USCHED_SEL_IO) { /* I/O: where the wake-up went, from the fiber's previous CPU */
        usched__stat_inc(self, s, r.cpu == t->cpu ? USCHED_STAT_io_wake_same_cpu
                                  : t->cpu >= 0 && usched__topo_level_shared(s->topo, r.cpu, t->cpu) <= TOPO_LLC
                                      ? USCHED_STAT_io_wake_same_llc
                                      : USCHED_STAT_io_wake_elsewhere);
        /* and from the descriptor's home, the CPU its packets arrive on */
        int home = self ? self->io_home : -1;
        if (home >= 0) {
            int l = r.cpu == home ? -1 : usched__topo_level_shared(s->topo, r.cpu, home);
            usched__stat_inc(self, s, l < 0 ? USCHED_STAT_io_wake_home_cpu
                                      : l <= TOPO_SMT ? USCHED_STAT_io_wake_home_core
                                      : l <= TOPO_LLC ? USCHED_STAT_io_wake_home_llc
                                                      : USCHED_STAT_io_wake_home_far);
        }
    }
    if (r.slot == USCHED_SLOT_SHARED) {
        /* The shared run queue: every CPU reads it; r.cpu is the CPU to
         * kick when it is parked. */
        usched__gq_push(s, t);
        usched__stat_inc(self, s, USCHED_STAT_wake_shared);
        usched__full_fence();
        /* [model: GQW] r.cpu == waker: the policy saw no idle CPU, and this CPU will
         * take it at its next scheduling point - which may be far off (a
         * fiber that computes or spins without yielding). A CPU that
         * parked since the policy looked has re-checked the queue before
         * this push (P3) and sleeps: wake one (wakep: nothing when no CPU
         * is parked, or one spins and will look). Without it the fiber
         * waited for the spinner; core_nextslot's stranded case under
         * `global` hung on qemu in 1 to 5 runs of 10. */
        if (r.cpu == waker || !usched__wk_kick(s, self, r.cpu))
            /* [model: GQK] The named CPU was not parked: it took other work
             * since the policy looked (a burst of pushes all named the
             * first idle CPU; it runs the first). Wake one that is parked,
             * or this fiber waits beside it until a CPU comes round (the
             * model's gq3 with three workers under `global`). */
            usched__wk_wakep(s, self, r.cpu);
        return;
    }
    if (r.cpu == waker) {
        place_local(s, self, t, r.slot, (flags & USCHED_SEL_FORK) != 0, (flags & USCHED_SEL_IO) != 0);
    } else {
        usched__wk_inbox_put(s, self, t, r.cpu);
        usched__stat_inc(self, s, USCHED_STAT_wake_remote);
    }
}

/* A spawn by a fiber under a policy whose answer to it is declared
 * (USCHED_OPS_FORK_NEXT): the spawner's next slot, without the decision's
 * general path (spawn() calls this instead of usched__place_on). */
void usched__place_fork(usched_t *s, struct usched__wk *self, struct usched_task *t)
{
    USCHED__TRACE_OOL_T(s, self, USCHED__TEV_spawn, t->id, self->cur ? self->cur->id : 0, self->cpu,
                        USCHED_REASON_LOCAL); /* before t is queued */
    usched__stat_add(&self->stats, USCHED_STAT_place_bound + USCHED_REASON_LOCAL, 1);
    place_local(s, self, t, USCHED_SLOT_NEXT, true, false);
}

usched__near_t usched__near_cpu(void)
{
    struct usched__wk *w = usched__self_wk();
    if (!w || !w->cur || !usched__knob_get(&w->s->knobs, USCHED_KNOB_near_wake))
        return (usched__near_t){NULL, -1};
    return (usched__near_t){w, w->cpu};
}

int usched__near_dist(usched__near_t n, const usched_task_t *t)
{
    if (!t || t->s != n.wk->s || t->cpu < 0) return USCHED__NEAR_FAR;
    if (t->cpu == n.cpu) return 0;
    return 1 + usched__topo_level_shared(n.wk->s->topo, t->cpu, n.cpu);
}

void usched__near_taken(usched__near_t n)
{
    usched__stat_add(&n.wk->stats, USCHED_STAT_near_wakes, 1); /* owner-only: the caller's worker */
}

void usched__wake(usched_task_t *t, unsigned flags)
{
    usched_t *s = t->s;
    if (s->track_time) {
        t->woke_ns = usched__now_ns();
        t->ran_ns = 0;
    }
    struct usched__wk *self = usched__self_wk(); /* decided here if it is a worker of t's scheduler */
    if (self && self->s != s) self = NULL;
    flags = USCHED_SEL_WAKE | (flags & (USCHED_SEL_SYNC | USCHED_SEL_EXIT | USCHED_SEL_IO));
    /* io_poller=percpu: this CPU polled the descriptor's home set, so it is
     * where the descriptor's packets arrive (its peer, on loopback) */
    if ((flags & USCHED_SEL_IO) && self && self->io_home == self->cpu) flags |= USCHED_SEL_IO_HOME;
    bool beside = false;
    if ((flags & ~USCHED_SEL_SYNC) == USCHED_SEL_WAKE && self && self->cur &&
        reuse_ok(s, self, self->cur, t, flags & USCHED_SEL_SYNC, &beside)) {
        place_reused(s, self, self->cur, t, beside);
        return;
    }
    usched__place_on(s, self, t, flags);
}
