/*
 * The park room: a worker without work parks, and any thread that gives it
 * work wakes it. The whole protocol is here (the model: model/park.pml, its
 * steps named "[model: ...]" in these comments); the idle path that decides
 * to park (spin, steal: steal.c) and the hand-offs that wake (place.c,
 * monitor.c) call into this room and never around it.
 *
 * Parking (usched__park):
 *   P1. state = PARKED (seq_cst store), after nparked++;
 *   P2. full fence;
 *   P3. re-check inbox, next slot, ring, bound list, global queue, and the
 *       other CPUs' rings and spawns in their next slots (the caller's
 *       `visible`: steal.c); if anything is there, CAS PARKED->RUNNING and
 *       go on;
 *   P4. wait in the backend the state names, until kicked or the earliest
 *       timer: the futex backend's futex_wait(state, PARKED).
 * A waker handing a fiber to CPU c:
 *   W1. pushes the fiber into c's inbox (or the global queue);
 *   W2. full fence (the push's exchange in W1 is a seq_cst read-modify-
 *       write, which is one);
 *   W3. if c's state is PARKED, CASes it to RUNNING and wakes c through its
 *       backend (futex_wake).
 * Either the parker sees the fiber at P3, or the waker sees PARKED at W3: no
 * wake-up is lost. A spawn onto the local ring or next slot wakes one
 * parked CPU when no CPU spins (wakep, which begins with W2's fence: those
 * puts are plain stores); the woken CPU spins and steals. Under the policy's
 * smt rule (USCHED_OPS_SMT_RULE) wakep prefers a CPU of a whole idle core,
 * and a thief beside a busy sibling defers to one (steal.c, D1-D4).
 * W-M. whoever moves a worker out of its parked state (a waker at W3, or
 * the worker itself) decrements nparked, then wakes the stall monitor if it
 * sleeps because every worker was parked (monitor.c, M1-M3).
 *
 * The I/O backend (src/io/poller.c has its side of the protocol): while
 * fibers wait on descriptors, one parking CPU at a time takes the poller
 * role and waits in epoll_wait instead of on its futex:
 *   P1'. claim the role (the backend's claim), state = PARKED_POLL
 *        (seq_cst store);
 *   P2, P3 as above (P3 finding work gives the role back: unclaim);
 *   P4'. the backend's wait, until the earliest timer; then unpark, and only
 *        then wake the fibers of the ready descriptors (dispatch, through
 *        the policy);
 *   W3'. a waker that sees PARKED_POLL CASes it to RUNNING and calls the
 *        backend's wake (an eventfd write, deduplicated by a CAS flag; the
 *        eventfd is level-triggered, so epoll_wait returns even if the
 *        write came before it).
 * Idle CPUs poll without blocking before they steal, one at a time; busy
 * CPUs poll every io_tick picks or after io_poll_us (the backend's tick).
 */
#include <sched.h>

#include "base/futex.h"
#include "core/idle.h"
#include "core/park.h"

const struct usched__park_backend *usched__park_io;

/* ---- the futex backend ----------------------------------------------------- */

static void futex_wait(struct usched__wk *w, uint64_t deadline_ns)
{
    if (deadline_ns == UINT64_MAX) {
        usched__futex(&w->state, FUTEX_WAIT, WK_PARKED, NULL);
        return;
    }
    uint64_t now = usched__now_ns();
    if (deadline_ns > now) {
        struct timespec ts = usched__ns_timespec(deadline_ns - now);
        usched__futex(&w->state, FUTEX_WAIT, WK_PARKED, &ts);
    }
}

static bool futex_wake(struct usched *s, struct usched__wk *w)
{
    (void)s;
    usched__futex(&w->state, FUTEX_WAKE, 1, NULL);
    return true;
}

/* No descriptors: only the wait and the wake-up of one worker. */
static const struct usched__park_backend park_futex = {
    .name = "futex",
    .wake_stat = USCHED_STAT_futex_wakes,
    .wait = futex_wait,
    .wake = futex_wake,
};

/* ---- backends ---------------------------------------------------------------- */

void usched__park_register(const struct usched__park_backend *b)
{
    usched__park_io = b;
}

void usched__park_start(struct usched *s)
{
    if (usched__park_io && usched__park_io->start) usched__park_io->start(s);
}

void usched__park_fini(struct usched *s)
{
    if (usched__park_io && usched__park_io->fini) usched__park_io->fini(s);
}

static inline const struct usched__park_backend *backend_of(uint32_t state)
{
    return state == WK_PARKED_POLL ? usched__park_io : &park_futex;
}

/* ---- waking workers ---------------------------------------------------------- */

/* W-M [model: WM] (monitor.c, M1-M3): wakes the stall monitor if it sleeps. */
static inline void wake_monitor(struct usched *s)
{
    if (atomic_load_explicit(&s->park.mon_idle, memory_order_seq_cst)) usched__park_wake_monitor(s);
}

void usched__park_wake_monitor(struct usched *s)
{
    if (atomic_exchange_explicit(&s->park.mon_idle, 0, memory_order_seq_cst))
        usched__futex(&s->park.mon_idle, FUTEX_WAKE, 1, NULL);
}

bool usched__wk_wake_parked(usched_t *s, struct usched__wk *from, int cpu)
{
    struct usched__wk *w = s->wk[cpu];
    uint32_t exp = atomic_load_explicit(&w->state, memory_order_seq_cst);
    if (exp != WK_PARKED && exp != WK_PARKED_POLL) return false;
    const struct usched__park_backend *be = backend_of(exp);
    if (!atomic_compare_exchange_strong(&w->state, &exp, WK_RUNNING)) return false;
    atomic_fetch_sub(&s->park.nparked, 1); /* busy from the kick on */
    wake_monitor(s);                  /* W-M */
    if (be->wake(s, w)) usched__stat_inc(from, s, be->wake_stat); /* W3, W3' */
    return true;
}

/* Wakes one parked CPU, nearest to `near` first, when nobody spins and no
 * such wake-up is in flight (Go's wakep): the woken CPU spins and steals.
 * Under the policy's smt rule (idle.c) a CPU of a whole idle core goes
 * first, nearest first: the new work then starts beside no busy sibling.
 * s->park.waking (0/1) keeps a burst of spawns from waking every CPU at once;
 * the woken worker clears it. */
bool usched__wk_wakep_any(usched_t *s, struct usched__wk *from, int near)
{
    /* W2 for work published with plain stores [model: WP1] (an owner's put into its
     * empty next slot, its ring's tail): without it the store could still
     * sit in this CPU's store buffer while the loads below read a spinner
     * that then parks - whose P3 misses the store - and the fiber waits for
     * its spawner to yield (core_nextslot's stranded case under load: 3 runs
     * of 20). The fence is cheap beside a spawn; callers that published with
     * a locked instruction pay it twice. */
    usched__full_fence();
    if (atomic_load_explicit(&s->park.nspinning, memory_order_seq_cst) != 0) return false;
    if (atomic_load_explicit(&s->park.nparked, memory_order_relaxed) == 0) return false;
    if (atomic_load_explicit(&s->park.waking, memory_order_relaxed)) return false;
    uint32_t zero = 0;
    if (!atomic_compare_exchange_strong(&s->park.waking, &zero, 1)) return false;
    int n = s->ncpus;
    const int *order = near >= 0 ? usched__topo_order(s->topo, near) : NULL;
    /* Contended CPUs (monitor.c, C3) last: the kernel runs them late; the
     * second pass wakes one when no uncontended CPU is parked [model: C3]
     * (the look after clearing `waking`, WP3, would also wake it). */
    bool skipped = false, packed = false;
    for (int calm = 1; calm >= 0; calm--) {
        for (int whole = usched__idle_smt_rule(s); whole >= 0; whole--) {
            for (int i = 0; i < n; i++) {
                int c = order ? order[i] : i;
                uint32_t st = atomic_load_explicit(&s->wk[c]->state, memory_order_relaxed);
                if (st != WK_PARKED && st != WK_PARKED_POLL) continue;
                if (usched__wk_packed(s->wk[c])) { /* K3 (monitor.c) */
                    packed = true;
                    continue;
                }
                if (whole && !usched__idlemask_test(usched__idle_cores(s), c)) continue;
                if (calm && usched__wk_contended(s->wk[c])) {
                    skipped = true;
                    continue;
                }
                if (usched__wk_wake_parked(s, from, c)) { /* the woken worker clears s->park.waking */
                    if (packed) usched__stat_inc(from, s, USCHED_STAT_contend_pack_skips);
                    if (whole) usched__stat_inc(from, s, USCHED_STAT_wake_idle_core);
                    if (calm && skipped) usched__stat_inc(from, s, USCHED_STAT_contend_wake_skips);
                    return true;
                }
            }
        }
        if (!skipped) break;
    }
    atomic_store(&s->park.waking, 0);
    if (packed) usched__stat_inc(from, s, USCHED_STAT_contend_pack_skips);
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
        if ((st == WK_PARKED || st == WK_PARKED_POLL) && !usched__wk_packed(s->wk[c]) /* K3 */ &&
            usched__wk_wake_parked(s, from, c))
            return true;
    }
    return false;
}

void usched__wk_kick_all(usched_t *s)
{
    for (int c = 0; c < s->ncpus; c++) {
        struct usched__wk *w = s->wk[c];
        atomic_store(&w->state, WK_RUNNING);
        park_futex.wake(s, w);
    }
    /* a worker blocked in the I/O backend [model: KIO]: also one whose
     * waiters are gone (a spinner's poll took their events) */
    if (atomic_load(&s->io) && usched__park_io->wake(s, NULL))
        usched__stat_inc(NULL, s, usched__park_io->wake_stat);
}

/* ---- parking ----------------------------------------------------------------- */

/* The woken worker clears `waking` (wakep). A load first: the CPUs that
 * park and wake at every request of a server would otherwise write the
 * park counters' line each time, with no wake-up in flight. */
static inline void clear_waking(usched_t *s)
{
    if (atomic_load_explicit(&s->park.waking, memory_order_relaxed))
        atomic_store_explicit(&s->park.waking, 0, memory_order_relaxed);
}

/* Leaves PARKED (timeout, spurious wake-up, or work seen at P3): whoever
 * moves a worker out of PARKED decrements nparked - a kicker or itself. */
static void unpark(usched_t *s, struct usched__wk *w)
{
    uint32_t exp = atomic_load(&w->state);
    if ((exp == WK_PARKED || exp == WK_PARKED_POLL) &&
        atomic_compare_exchange_strong(&w->state, &exp, WK_RUNNING)) {
        atomic_fetch_sub(&s->park.nparked, 1);
        wake_monitor(s); /* W-M */
    }
}

bool usched__park(usched_t *s, struct usched__wk *w, bool renew,
                  bool (*visible)(usched_t *s, struct usched__wk *w), bool *recheck)
{
    /* A waker may have claimed this CPU and then found its fiber taken
     * by someone else: publish it idle again before sleeping. */
    if (!usched__idlemask_test(&s->idle_cpus, w->cpu)) usched__idle_set(s, w->cpu);
    /* P1 [model: P1], P2 (nparked first: a kicker decrements it only after it saw
     * PARKED) */
    atomic_fetch_add(&s->park.nparked, 1);
    /* P1': the CPU that takes the poller role parks in the I/O backend;
     * while another CPU spins (and polls), the role waits (defer_dl) */
    uint64_t defer_dl = UINT64_MAX;
    const struct usched__park_backend *be = &park_futex;
    if (atomic_load_explicit(&s->io, memory_order_acquire)) {
        int c = usched__park_io->claim(s, w, renew, &defer_dl);
        if (c == USCHED__PARK_CLAIMED) be = usched__park_io;
        else if (c == USCHED__PARK_DEFERRED) usched__stat_add(&w->stats, USCHED_STAT_io_poller_deferred, 1);
        else if (c == USCHED__PARK_RENEWED) {
            usched__stat_add(&w->stats, USCHED_STAT_io_poller_renewed, 1);
            usched__stat_add(&w->stats, USCHED_STAT_io_poller_deferred, 1);
        }
    }
    bool in_poller = be != &park_futex;
    atomic_store_explicit(&w->state, in_poller ? WK_PARKED_POLL : WK_PARKED, memory_order_seq_cst);
    /* P2 [model: P2]: an explicit fence, though C11 orders a seq_cst store before
     * the seq_cst loads of P3 without one: qemu-user's aarch64 emulation
     * on x86-64 translates stlr and ldar with fences before the store
     * and after the load, so the store could pass P3's loads there and
     * a wake-up was lost (core_wakeloss under make aarch64: 6 of 51
     * runs on a loaded machine, none in 600 with the fence). One fence
     * per park costs nothing beside the futex wait. */
    usched__full_fence();
    /* P3 [model: P3]; P3'' (the backend's pending: poller.c). The scheduler
     * stopping counts as work seen [model: STP]: usched__wk_kick_all may
     * have stored RUNNING before this CPU's store of PARKED above, and no
     * other wake-up comes. */
    if (visible(s, w) || atomic_load(&s->stopping) ||
        (!in_poller && usched__park_io && usched__park_io->pending &&
         atomic_load_explicit(&s->io, memory_order_acquire) && usched__park_io->pending(s, w))) {
        if (in_poller) be->unclaim(s, w);
        unpark(s, w);
        clear_waking(s);
        return true;
    }
    /* P4: sleep until kicked or the earliest timer. */
    usched__stat_add(&w->stats, USCHED_STAT_parks, 1);
    USCHED__TRACE(s, w, park, 0, 0, 0, in_poller);
    /* Going to sleep: give back a few cold free stacks' pages (64 per
     * park bounds the madvise work a parking CPU does; not tuned). */
    usched__stack_trim(-1, 64);
    /* until the earliest timer: only this CPU's fibers add to its heap, so
     * none comes while it sleeps [model: TMR] */
    uint64_t dl = usched__timers_next(&w->timers);
    bool deferred = defer_dl < dl;
    if (deferred) dl = defer_dl;
    if (in_poller) usched__stat_add(&w->stats, USCHED_STAT_io_poll_blocks, 1);
    be->wait(w, dl); /* P4, P4' */
    /* The deferral's end, not a kick: look at the poller role again */
    *recheck = deferred && atomic_load_explicit(&w->state, memory_order_relaxed) == WK_PARKED &&
               usched__now_ns() >= defer_dl;
    unpark(s, w);
    USCHED__TRACE(s, w, unpark, 0, 0, 0, in_poller);
    clear_waking(s);
    /* P4': the events go out after unpark, so the wake-ups they cause never
     * target this CPU's own eventfd */
    if (in_poller) be->dispatch(w);
    return false;
}
