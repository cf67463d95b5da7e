/*
 * The idle path of a worker that found nothing local: take the oldest fiber
 * of the global queue, steal from other CPUs' rings (in the policy's order),
 * spin while that may pay, and park (the park protocol and its steps are
 * park.c's: this room calls it, it never calls this room). The steal
 * deferral of the policy's smt rule (D1-D4) is here too.
 *
 * Spin, then park. A CPU without work first publishes itself idle in the
 * masks (sched.c, before it comes here), then spins for spin_us looking for
 * work (at least one full steal round), if fewer than half of the CPUs that
 * are not parked spin already, or if it has just handed a fiber to another
 * CPU (the answer is likely to come back). A spinner that finds work and
 * was the last spinner wakes one more parked CPU when work remains (chained
 * wake-ups, Go's rule), and so does a CPU that finds work at its park
 * re-check (P3).
 */
#include <sched.h>
#include <time.h>

#include "core/idle.h"
#include "core/local.h"
#include "core/steal.h"

static const int steal_stat[TOPO_NLEVELS] = {
    USCHED_STAT_steal_smt, USCHED_STAT_steal_l2, USCHED_STAT_steal_llc,
    USCHED_STAT_steal_package, USCHED_STAT_steal_numa, USCHED_STAT_steal_machine};

bool usched__may_steal(usched_t *s)
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
 * Progress (D1-D4): D1. the idle core's CPU is woken here if parked, so it
 * is awake and will look; D2. a CPU of a whole idle core never defers; D3.
 * a deferring CPU's own core is never whole idle, so deferrals cannot go
 * round in a circle while the cores stay as they are; D4. a deferring CPU
 * does not park while it sees the work (P3 counts it visible; find_idle
 * yields the real CPU instead, for the woken one): once the idle core took
 * its share and is busy, the rest is the deferring CPU's to steal. */
static bool defer_counted(usched_t *s, struct usched__wk *w, int stat)
{
    int instead = usched__idle_core_instead(s, w->cpu);
    if (instead < 0) return false;
    usched__wk_kick(s, w, instead); /* D1 (park.c, W3) */
    usched__stat_add(&w->stats, stat, 1);
    w->deferred |= USCHED__LEFT_IDLE_CORE;
    return true;
}

static bool defer(usched_t *s, struct usched__wk *w)
{
    return defer_counted(s, w, USCHED_STAT_steal_deferred);
}

/* The oldest fiber of the global queue (spills of full rings, outside
 * spawns), under the smt rule like a steal: a CPU beside a busy sibling
 * leaves it to a whole idle core of its LLC (D1-D4 hold as for steals: P3
 * counts a non-empty global queue as visible work, so a deferring CPU
 * yields instead of parking while it waits). The fairness pull of a busy
 * CPU (find_local, every USCHED_GLOBAL_EVERY picks) follows the same rule:
 * it has local work to run meanwhile. A pull beside a busy sibling is
 * judged (global_busy_sibling), so a miss of the rule shows. */
struct usched_task *usched__gq_pull(usched_t *s, struct usched__wk *w)
{
    if (atomic_load_explicit(&s->gq.n, memory_order_acquire) == 0) return NULL;
    if (usched__wk_packed(w)) return NULL; /* K4 (monitor.c): for the CPUs that are not packed */
    if (defer_counted(s, w, USCHED_STAT_global_deferred)) return NULL;
    struct usched_task *t = usched__gq_pop_locked(s);
    if (!t) return NULL;
    usched__stat_add(&w->stats, USCHED_STAT_global_pulls, 1);
    if (usched__idle_beside_busy(s, w->cpu, -1)) usched__stat_add(&w->stats, USCHED_STAT_global_busy_sibling, 1);
    return t;
}

/* Judges a successful steal (STYLE 17), as place.c judges wake-ups. */
static void stolen(usched_t *s, struct usched__wk *w)
{
    if (usched__idle_beside_busy(s, w->cpu, -1)) usched__stat_add(&w->stats, USCHED_STAT_steal_busy_sibling, 1);
}

/* The cheap-victim rule (knob steal_cost_ns). A stolen fiber costs the
 * thief cache misses for its descriptor, its stack and what it touches, and
 * its owner a remote line at the join; a fiber that its owner takes in less
 * time than that is better left to the owner. A spawner that joins the
 * children it just queued is the case: on two CPUs, `usched bench spawn`
 * took 181 ns/op with stealing and 37 without, 2.6 million children stolen
 * and 7.6 thousand joins that had to wait. Linux weighs the same at its
 * idle balance: a CPU that expects to be idle for less than the migration
 * cost (avg_idle < sysctl_sched_migration_cost) does not pull.
 * V1. The thief measures, two ways. The fibers it stole: back in this
 *     room with nothing local, the time since the steal over the fibers
 *     taken is the victim's cost (misses included: they are the price).
 *     Its owner's takes: at each look at a victim's ring it keeps the ends
 *     and the time; when head moved since a look at most 8 steal_cost_ns
 *     earlier, the time between the looks over the fibers taken is the
 *     cost (its own steals are not counted: it looks again after).
 * V2. It leaves the ring and the next slot while that cost is below
 *     steal_cost_ns and the ends moved within the last steal_cost_ns (the
 *     owner takes or queues fibers). A ring that stood still that long is
 *     stolen from as before: its owner runs something longer meanwhile.
 * V3. Progress: usched__work_visible does not apply the rule, so a thief
 *     that leaves work does not park (P3 sees it); it yields its CPU (D4's
 *     sched_yield) and looks again, until the owner took the work or stood
 *     still for steal_cost_ns.
 * V4. Each look reads the lines the owner writes at each spawn and take
 *     (its ring's ends), and the owner's next write then waits for them:
 *     a thief that looked every pass made the owner slower than no
 *     stealing at all (`spawn --no-inline`, 206 against 184 ns/op, 109
 *     with steal=0). So a victim left once is looked at again only after
 *     steal_cost_ns, doubling while it is left, up to 64 times that. A
 *     look after such a pause that finds the ends where they were says the
 *     owner stood still at least that long: V2 lets the steal go.
 * V5. Between two looks the thief sleeps rather than spins: when its last
 *     pass left work to cheap victims only, it sleeps until the earliest of
 *     its next looks (cheap_nap). A spinning or yielding thief is a busy
 *     process to the kernel: beside another program on the same CPUs it
 *     took the CPU time the spawner it left needed. It sleeps awake (not
 *     parked: no step of the park protocol), so no wake-up can be lost;
 *     while it sleeps it is not idle in the masks, so wake-ups are placed
 *     elsewhere, and what reaches it anyway (a fiber bound to it, the
 *     global queue, its descriptors) waits at most one sleep, 1 ms: after
 *     each it goes through the park checks (P3 sees such work). */
static bool cheap_look(struct usched__vlook *L, uint32_t h, uint32_t t, uint64_t now, uint64_t cost)
{
    if (h != L->head || t != L->tail) {
        uint32_t took = h - L->head;
        uint64_t dt = now - L->at;
        if (took && took <= RQ_RING_SIZE && L->at && dt <= 8 * cost) /* V1 */
            L->cost = (uint32_t)(dt / took) | 1;
        L->changed = now;
    }
    L->head = h;
    L->tail = t;
    L->at = now;
    return L->cost && L->cost < cost && now - L->changed < cost; /* V2 */
}

static bool cheap_leave(struct usched__wk *w, int v, uint32_t h, uint32_t t, uint64_t now, uint64_t cost)
{
    struct usched__vlook *L = &w->vlook[v];
    bool leave = cheap_look(L, h, t, now, cost);
    if (leave) { /* V4 */
        L->backoff = !L->backoff ? (uint32_t)cost : L->backoff < 32 * cost ? 2 * L->backoff : (uint32_t)(64 * cost);
        L->next_look = now + L->backoff;
    } else {
        L->backoff = 0;
    }
    return leave;
}

/* The busy-victim rule (V6). A server's worker whose CPU it shares with
 * the server's clients (io_poller=percpu, tbench beside `usched serve`): a
 * fiber queued behind the fiber its home runs was woken by a packet that
 * arrived there, and its client waits there for the answer. A thief that
 * took it ran it away from that client and its cache, on a CPU whose own
 * clients then waited for the thief (tbench, 4 clients on 2 CPUs: 100,000
 * steals in 5 s, 0.89x tbench_srv; with steal=0, 0.95x).
 * V6. A contended thief (monitor.c, C1) with fibers waiting on descriptors
 *     of its own set leaves to its owner the queue of a victim that runs
 *     a fiber and holds at most USCHED__BUSY_LEFT_MAX fibers behind it,
 *     and does not count that work at its park re-check (P3): it parks in
 *     its set, where its own descriptors wake it.
 * V7. Progress: the owner runs that queue at its next scheduling point;
 *     a fiber that holds it for stall_us is a stall, which the monitor
 *     marks (w->stalled) before M5's wakep, and a stalled victim is never
 *     left, so the woken thief steals its queue. The rule is off while
 *     stall_us is 0 (no M5), and a longer queue is taken as before. */
#define USCHED__BUSY_LEFT_MAX 4

static bool busy_leaves(usched_t *s, struct usched__wk *w)
{
    return usched__wk_contended(w) && usched__knob_get(&s->knobs, USCHED_KNOB_stall_us) &&
           usched__park_io_own_waiters(w);
}

/* V6: whether thief w leaves vw's queue (load fibers in its ring) to it,
 * counted when there is work to leave; never a stalled victim's (V7)
 * [model: HLS]. */
static bool busy_left(struct usched__wk *w, struct usched__wk *vw, unsigned load)
{
    if (!atomic_load_explicit(&vw->current, memory_order_relaxed) ||
        atomic_load_explicit(&vw->stalled, memory_order_relaxed))
        return false;
    unsigned queued = load + (atomic_load_explicit(&vw->next, memory_order_relaxed) != NULL);
    if (queued > USCHED__BUSY_LEFT_MAX) return false;
    if (queued) usched__stat_add(&w->stats, USCHED_STAT_steal_left_busy, 1);
    return true;
}

/* Steals from victims in the policy's order (the topology order by default,
 * rotating the start inside each distance band). On the last pass it may
 * take a victim's next slot, after a short back-off (Go's runnext rule). */
struct usched_task *usched__steal(usched_t *s, struct usched__wk *w, bool last_pass)
{
    if (!usched__may_steal(s)) return NULL;
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
    bool leave_busy = busy_leaves(s, w); /* V6 */
    uint64_t cost = (uint64_t)usched__knob_get(&s->knobs, USCHED_KNOB_steal_cost_ns);
    uint64_t now = cost && w->vlook ? usched__now_ns() : 0;
    if (w->steal_n) { /* V1: the fibers of the last steal ran (or left) */
        if (now) {
            uint64_t per = (now - w->steal_at) / w->steal_n; /* a long fiber: saturate, never wrap */
            w->vlook[w->steal_v].cost = per > UINT32_MAX ? UINT32_MAX : (uint32_t)per | 1;
        }
        w->steal_n = 0;
    }
    for (int i = 0; i < n; i++) {
        int v = order[i];
        if (v == w->cpu || v < 0 || v >= s->ncpus) continue;
        struct usched__wk *vw = s->wk[v];
        int level = usched__topo_level_shared(s->topo, w->cpu, v);
        if (now && now < w->vlook[v].next_look) { /* V4: left a moment ago */
            w->deferred |= USCHED__LEFT_CHEAP; /* V3 */
            continue;
        }
        uint32_t h, tl;
        usched__ring_ends(&vw->ring, &h, &tl);
        unsigned load = usched__ring_count(h, tl);
        if (leave_busy && busy_left(w, vw, load)) continue; /* V6 */
        if (now && cheap_leave(w, v, h, tl, now, cost)) { /* V2 */
            if (load || atomic_load_explicit(&vw->next, memory_order_relaxed)) {
                usched__stat_add(&w->stats, USCHED_STAT_steal_left_cheap, 1);
                w->deferred |= USCHED__LEFT_CHEAP; /* V3 */
            }
            continue;
        }
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
                    if (now) { /* V1: this steal is not the owner's take */
                        usched__ring_ends(&vw->ring, &h, &tl);
                        w->vlook[v].head = h;
                        w->vlook[v].tail = tl;
                        w->steal_v = v;
                        w->steal_n = taken;
                        w->steal_at = now;
                    }
                    usched__wk_prefetch_next(w);
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
                    /* [model: BST] bound: back home, by its inbox (W1-W3: its
                     * CPU may have parked since), never run here */
                    usched__wk_inbox_put(s, w, t, t->bound);
                }
            }
        }
    }
    usched__stat_add(&w->stats, USCHED_STAT_steal_failed, 1);
    return NULL;
}

/* V5: sleeps until the earliest next look at a victim left by the rule (or
 * this CPU's earliest timer), 1 ms at most; false when that is too close to
 * be worth a sleep (the kernel's timer slack alone is 50 us) or the
 * scheduler stops, and the caller yields. */
static bool cheap_nap(usched_t *s, struct usched__wk *w)
{
    uint64_t now = usched__now_ns(), dl = usched__timers_next(&w->timers);
    for (int c = 0; c < s->ncpus; c++)
        if (c != w->cpu && w->vlook[c].next_look > now && w->vlook[c].next_look < dl) dl = w->vlook[c].next_look;
    if (dl == UINT64_MAX || dl < now + USCHED__NAP_MIN_NS || atomic_load_explicit(&s->stopping, memory_order_relaxed))
        return false;
    if (dl > now + USCHED__NAP_MAX_NS) dl = now + USCHED__NAP_MAX_NS; /* a destroy waits for it */
    usched__wk_go_busy(s, w); /* placement leaves a sleeping CPU alone */
    usched__stat_add(&w->stats, USCHED_STAT_steal_naps, 1);
    uint64_t ns = dl - now;
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
    nanosleep(&ts, NULL); /* EINTR (a preemption signal): it looks again sooner */
    usched__wk_go_idle(s, w);
    return true;
}

/* Work in the global queue or on other CPUs that w could take. */
static bool others_visible(usched_t *s, struct usched__wk *w);

bool usched__work_visible(usched_t *s, struct usched__wk *w)
{
    if (!usched__inbox_empty(&w->inbox) || atomic_load(&w->next) || usched__ring_len(&w->ring) ||
        w->bound_head)
        return true;
    if (!usched__wk_packed(w)) return others_visible(s, w);
    /* K4 (monitor.c): a packed CPU leaves the global queue and others' work
     * to the CPUs that are not, and parks beside it: their owners run it,
     * and the monitor unpacks it, and kicks it, if one stalls. It wakes an
     * unpacked CPU for that work first [model: PKW]: a waker that saw it
     * spinning left the wake-up to it (it was packed mid-spin), and an
     * unpacked CPU may have parked since, its P3 before the waker's
     * store. */
    if (others_visible(s, w)) usched__wk_wakep(s, w, w->cpu);
    return false;
}

static bool others_visible(usched_t *s, struct usched__wk *w)
{
    if (atomic_load(&s->gq.n)) return true;
    if (!usched__may_steal(s)) return false;
    /* The cheap-victim rule is not applied here (V3) [model: CHV]: work a
     * thief leaves to a cheap victim stays visible, so the thief does not
     * park beside it (P3) but looks again; were it hidden, a victim whose
     * fiber then computes for ever would keep that work from a parked
     * thief. The busy-victim rule is applied (V6): such a victim is a
     * stall, which the monitor marks and serves with a wake-up (V7). */
    bool leave_busy = busy_leaves(s, w);
    for (int c = 0; c < s->ncpus; c++) {
        if (c == w->cpu) continue;
        struct usched__wk *vw = s->wk[c];
        unsigned load = usched__ring_len(&vw->ring);
        if (leave_busy && busy_left(w, vw, load)) continue;
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
    struct usched_task *t = usched__find_local(s, w);
    if (!t) t = usched__gq_pull(s, w);
    if (!t && !usched__wk_packed(w)) t = usched__steal(s, w, last_pass); /* K4 (monitor.c) */
    return t;
}

struct usched_task *usched__find_idle(usched_t *s, struct usched__wk *w)
{
    struct usched_task *t;
    bool spinning = false;
    bool recheck = false; /* P1': woke at a poller deferral's end */
    bool napped = false;  /* V5: woke from a sleep between looks */
    for (;;) {
        bool renew = false; /* this pass follows a poller deferral that ran out */
        if (usched__timers_pending(&w->timers)) usched__timers_run(&w->timers, usched__now_ns());
        /* Spin if fewer than half of the CPUs that are not parked spin
         * already (Go's rule; this CPU and those just kicked count as not
         * parked, so a CPU that handed work to a partner spins for the
         * answer instead of parking at once). */
        uint32_t awake = (uint32_t)s->ncpus - atomic_load(&s->park.nparked);
        if (!spinning && napped) {
            /* V5: straight to the park checks and one look; a spin would
             * use up the CPU time the sleep gave back. */
            napped = false;
        } else if (!spinning && recheck) {
            /* Straight to the park checks: a spin here would poll and take
             * the spinning CPU's events (and fibers) after every deferral. */
            recheck = false;
            renew = true;
        } else if (!spinning && usched__wk_contended(w)) {
            /* C2 (monitor.c): no spinning on a contended CPU, but the
             * non-blocking poll of a spinner's first pass [model: CP]: its
             * park claims only its own set, so without this poll readiness
             * in a stalled CPU's set (io_poller=percpu) waited until the
             * stall ended whenever every idle CPU was contended (the
             * monitor's wake-ups found a CPU that parked again at once).
             * Not of its own set (percpu): it blocks there next when fibers
             * wait on it, and that poll was a system call for nothing once
             * per request of a server beside its client. */
            w->handoff = 0;
            usched__stat_add(&w->stats, USCHED_STAT_contend_nospin, 1);
            usched__park_io_poll_others(w);
        } else if (!spinning) {
            uint32_t sp = atomic_load(&s->park.nspinning);
            /* ...or if it just handed a fiber to another CPU, whose answer
             * (a cross-CPU ping-pong) would otherwise cost a park and a
             * futex wake-up each way. */
            bool handoff = w->handoff;
            w->handoff = 0;
            if (2 * sp < awake || handoff) {
                atomic_fetch_add(&s->park.nspinning, 1);
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
                if ((pass & 3) == 0) usched__park_io_poll(w);
                t = try_all(s, w, (pass & 3) == 3);
                if (t) {
                    usched__wk_go_busy(s, w);
                    /* The last spinner to find work wakes another (chaining) [model: SC]. */
                    if (atomic_fetch_sub(&s->park.nspinning, 1) == 1 && usched__work_visible(s, w))
                        usched__wk_wakep(s, w, w->cpu);
                    return t;
                }
                if (atomic_load_explicit(&s->stopping, memory_order_relaxed)) break;
                /* At least one full round (4 passes, the last of which may
                 * take next slots) even with spin_us=0. */
                if (pass >= 3 && usched__now_ns() >= until) break;
                for (int i = 0; i < 32; i++) usched__cpu_relax();
            }
            atomic_fetch_sub(&s->park.nspinning, 1);
            spinning = false;
        }
        if (atomic_load_explicit(&s->stopping, memory_order_acquire)) {
            usched__wk_go_busy(s, w);
            return NULL;
        }
        /* P1-P4 (park.c) */
        bool woke = !usched__park(s, w, renew, usched__work_visible, &recheck);
        /* [model: WKL] Woken (a kick, readiness, a timer, a deferral's
         * end): what woke it is most often on its own queues already - the
         * fiber a waker pushed to its inbox (W1), the fibers its own poll
         * readied (P4', dispatch). It takes that at once. The next pass
         * used to park again only for P3 to find it: a second P1-P3 (the
         * parked count's add and subtract, the poller role's CAS and
         * give-back, the state's exchange and CAS, a fence) and, on a
         * contended CPU, a second poll of the others' sets, for every
         * request of a server (contend_nospin counted two a request). As
         * after P3, work left beside it is chained [model: P3C]. */
        if (woke) {
            if (!(t = usched__find_local(s, w))) continue;
        } else { /* P3 saw work */
            w->deferred = 0;
            t = try_all(s, w, true);
        }
        if (t) {
            usched__wk_go_busy(s, w);
            /* [model: P3C] Chains the wake-up a spinner would (work left: wake
             * one), as Go's findrunnable does after its last check. A
             * CPU gets here without spinning (C2, monitor.c: it is
             * contended) or with work that came after its spin: a
             * burst of spawns while it spun out, whose wakep saw it
             * spinning and woke nobody. Without this it took one
             * fiber and the others waited beside parked CPUs
             * (policy_place's steal scenario under qemu: 2 runs of 25,
             * the same 3 fibers stranded each time). */
            if (usched__work_visible(s, w)) usched__wk_wakep(s, w, w->cpu);
            return t;
        }
        if (w->deferred == USCHED__LEFT_CHEAP && cheap_nap(s, w)) napped = true; /* V5 */
        else if (w->deferred) sched_yield(); /* D4 */
    }
}
