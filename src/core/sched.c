/*
 * usched core: fibers on per-CPU workers.
 *
 * Glossary
 *   fiber (task)  a user-level thread: stack, saved registers, last CPU, bound
 *                 CPU. Its descriptor lives at the top of its own stack.
 *   worker        the OS thread running fibers for one CPU; pinned to it on
 *                 the live machine, unpinned on virtual topologies.
 *   CPU           a dense usched CPU number of the loaded topology.
 *   run queue     the CPU's 256-slot ring (owner push/pop, thieves take half)
 *                 plus its next slot and, for bound fibers, an owner-only list.
 *   inbox         the CPU's MPSC list: other CPUs hand it fibers there.
 *   idle masks    idle_cpus (a bit per idle CPU) and idle_cores (the bits of
 *                 every CPU of a fully idle core); hints, claimed with a CAS.
 *   global queue  one locked FIFO for outside spawns, ring overflow and the
 *                 shared run queue of the 4BSD-style policies.
 *
 * Finding work, on each CPU, in order (find_work):
 *   inbox -> next slot (at most next_cap runs in a row) -> bound list / ring
 *   (the global queue first every 61st pick) -> global queue -> steal in the
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
 * more parked CPU when work remains (chained wake-ups, Go's rule).
 * Parking protocol (the numbers are referred to below):
 *   P1. state = PARKED (seq_cst store);
 *   P2. full fence (the store above is seq_cst);
 *   P3. re-check inbox, next slot, ring, bound list, global queue, and the
 *       other CPUs' rings; if anything is there, CAS PARKED->RUNNING and go on;
 *   P4. futex_wait(state, PARKED), with a timeout at the earliest timer.
 * A waker handing a fiber to CPU c:
 *   W1. pushes the fiber into c's inbox (or the global queue);
 *   W2. full fence;
 *   W3. if c's state is PARKED, CASes it to RUNNING and futex-wakes c.
 * Either the parker sees the fiber at P3, or the waker sees PARKED at W3: no
 * wake-up is lost. A spawn onto the local ring wakes one parked CPU when no
 * CPU spins (wakep); the woken CPU spins and steals.
 *
 * Blocking (sched.h): a fiber parks with usched__block(after, arg); the
 * context it switches to calls after(arg) (typically a wait-queue unlock)
 * only once the fiber's registers are saved, so no waker can resume a fiber
 * still on its stack.
 *
 * Fork-join. Under the default policy a spawned fiber goes to the
 * spawner's next slot (the child it displaces goes to the ring, where idle
 * CPUs steal); joining a child that still waits there, unstarted, runs it
 * inline; a joiner woken by its exiting child takes that CPU's next slot.
 *
 * Designs rejected
 *   - One global run queue (4BSD): every pick takes one lock; kept only as
 *     the `global` and `bsd4` policies to measure against.
 *   - Waking the wakee on the waker's CPU always (Go's ready()): ignores
 *     where the wakee's cache is; the policy decides instead.
 *   - A mutex-protected remote queue (Tokio's inject queue) for cross-CPU
 *     wake-ups: the MPSC inbox costs one exchange and no lock.
 *   - Separately allocated descriptors: the descriptor at the top of the
 *     stack saves a malloc/free per spawn and keeps the two together.
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

#include "core/core.h"
#include "core/error.h"
#include "core/export.h"

static __thread struct usched__wk *tls_wk;
_Atomic uint32_t usched__fence_word;

struct usched__wk *usched__self_wk(void) __attribute__((noinline));
struct usched__wk *usched__self_wk(void)
{
    __asm__ volatile("" ::: "memory");
    return tls_wk;
}

uint64_t usched__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, addr, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, 0);
}

static inline struct usched__wk *wk_of(usched_t *s, int cpu)
{
    return s->wk[cpu];
}

static inline void stat_inc(struct usched__wk *w, usched_t *s, int id)
{
    if (w && w->s == s)
        usched__stat_add(&w->stats, id, 1);
    else
        usched__stat_add_atomic(&s->outside_stats, id, 1);
}

/* ---- idle masks --------------------------------------------------------- */

void usched__mark_idle(usched_t *s, int cpu)
{
    usched__idlemask_set(&s->idle_cpus, cpu);
    /* If the whole core is idle now, publish the core. */
    int core = usched__topo_group(s->topo, cpu, TOPO_SMT);
    const uint64_t *m = usched__topo_group_mask(s->topo, TOPO_SMT, core);
    int words = usched__topo_mask_words(s->topo);
    if (usched__topo_group_weight(s->topo, TOPO_SMT, core) == 1) {
        usched__idlemask_set(&s->idle_cores, cpu);
        return;
    }
    for (int i = 0; i < words; i++) {
        uint64_t cur = atomic_load_explicit(&s->idle_cpus.w[i], memory_order_seq_cst);
        if ((cur & m[i]) != m[i]) return;
    }
    for (int i = 0; i < words; i++)
        if (m[i]) atomic_fetch_or_explicit(&s->idle_cores.w[i], m[i], memory_order_seq_cst);
}

void usched__mark_busy(usched_t *s, int cpu)
{
    usched__idlemask_clear(&s->idle_cpus, cpu);
    int core = usched__topo_group(s->topo, cpu, TOPO_SMT);
    if (usched__topo_group_weight(s->topo, TOPO_SMT, core) == 1) {
        usched__idlemask_clear(&s->idle_cores, cpu);
        return;
    }
    const uint64_t *m = usched__topo_group_mask(s->topo, TOPO_SMT, core);
    int words = usched__topo_mask_words(s->topo);
    for (int i = 0; i < words; i++)
        if (m[i]) atomic_fetch_and_explicit(&s->idle_cores.w[i], ~m[i], memory_order_seq_cst);
}

/* ---- global queue --------------------------------------------------------- */

static void gq_push_many(usched_t *s, struct usched_task **v, unsigned n)
{
    if (!n) return;
    pthread_mutex_lock(&s->gq_lock);
    for (unsigned i = 0; i < n; i++) {
        v[i]->qnext = NULL;
        if (s->gq_tail)
            s->gq_tail->qnext = v[i];
        else
            s->gq_head = v[i];
        s->gq_tail = v[i];
    }
    atomic_store_explicit(&s->gq_n, atomic_load_explicit(&s->gq_n, memory_order_relaxed) + n,
                          memory_order_seq_cst);
    pthread_mutex_unlock(&s->gq_lock);
}

static struct usched_task *gq_pop(usched_t *s)
{
    if (atomic_load_explicit(&s->gq_n, memory_order_acquire) == 0) return NULL;
    pthread_mutex_lock(&s->gq_lock);
    struct usched_task *t = s->gq_head;
    if (t) {
        s->gq_head = t->qnext;
        if (!s->gq_head) s->gq_tail = NULL;
        atomic_store_explicit(&s->gq_n, atomic_load_explicit(&s->gq_n, memory_order_relaxed) - 1,
                              memory_order_release);
    }
    pthread_mutex_unlock(&s->gq_lock);
    return t;
}

/* ---- waking workers -------------------------------------------------------- */

/* W3: wake CPU `cpu` if it is parked. */
static void kick(usched_t *s, struct usched__wk *from, int cpu)
{
    struct usched__wk *w = wk_of(s, cpu);
    uint32_t st = atomic_load_explicit(&w->state, memory_order_seq_cst);
    if (st == WK_PARKED) {
        uint32_t exp = WK_PARKED;
        if (atomic_compare_exchange_strong(&w->state, &exp, WK_RUNNING)) {
            atomic_fetch_sub(&s->nparked, 1); /* busy from the kick on */
            futex(&w->state, FUTEX_WAKE, 1, NULL);
            stat_inc(from, s, USCHED_STAT_futex_wakes);
        }
    }
}

/* Wakes one parked CPU, nearest to `near` first, when nobody spins and no
 * such wake-up is in flight (Go's wakep): the woken CPU spins and steals.
 * s->waking (0/1) keeps a burst of spawns from waking every CPU at once;
 * the woken worker clears it. */
static void wakep(usched_t *s, struct usched__wk *from, int near)
{
    if (atomic_load_explicit(&s->nspinning, memory_order_seq_cst) != 0) return;
    if (atomic_load_explicit(&s->nparked, memory_order_relaxed) == 0) return;
    if (atomic_load_explicit(&s->waking, memory_order_relaxed)) return;
    uint32_t zero = 0;
    if (!atomic_compare_exchange_strong(&s->waking, &zero, 1)) return;
    int n = s->ncpus;
    const int *order = near >= 0 ? usched__topo_order(s->topo, near) : NULL;
    for (int i = 0; i < n; i++) {
        int c = order ? order[i] : i;
        struct usched__wk *w = wk_of(s, c);
        if (atomic_load_explicit(&w->state, memory_order_relaxed) != WK_PARKED) continue;
        uint32_t exp = WK_PARKED;
        if (atomic_compare_exchange_strong(&w->state, &exp, WK_RUNNING)) {
            atomic_fetch_sub(&s->nparked, 1);
            futex(&w->state, FUTEX_WAKE, 1, NULL);
            stat_inc(from, s, USCHED_STAT_futex_wakes);
            return; /* the woken worker clears s->waking */
        }
    }
    atomic_store(&s->waking, 0);
}

/* ---- enqueueing ------------------------------------------------------------- */

static void ring_put(usched_t *s, struct usched__wk *w, struct usched_task *t)
{
    /* The spill buffer lives in the worker, not on the (fiber) stack: a
     * 1 KiB array there would touch another page of every fiber's stack. */
    unsigned n = usched__ring_push_or_spill(&w->ring, t, (void **)w->spill);
    if (n) {
        gq_push_many(s, w->spill, n);
        usched__stat_add(&w->stats, USCHED_STAT_ring_overflows, 1);
    }
}

static void bound_put(struct usched__wk *w, struct usched_task *t)
{
    t->qnext = NULL;
    if (w->bound_tail)
        w->bound_tail->qnext = t;
    else
        w->bound_head = t;
    w->bound_tail = t;
    atomic_store_explicit(&w->nbound, atomic_load_explicit(&w->nbound, memory_order_relaxed) + 1,
                          memory_order_release);
}

static struct usched_task *bound_get(struct usched__wk *w)
{
    struct usched_task *t = w->bound_head;
    if (!t) return NULL;
    w->bound_head = t->qnext;
    if (!w->bound_head) w->bound_tail = NULL;
    atomic_store_explicit(&w->nbound, atomic_load_explicit(&w->nbound, memory_order_relaxed) - 1,
                          memory_order_release);
    return t;
}

/* On the owner: queue t locally at `slot`. Returns true when a fiber other
 * CPUs may steal landed in the ring (then an idle CPU should look). */
static bool local_put(usched_t *s, struct usched__wk *w, struct usched_task *t, int slot)
{
    if (slot == USCHED_SLOT_NEXT || slot == USCHED_SLOT_HEAD) {
        /* An empty slot takes a plain release store: only the owner writes
         * it, and thieves only CAS a fiber out, never into an empty slot.
         * (It saves a locked exchange per hand-off.) */
        struct usched_task *old = atomic_load_explicit(&w->next, memory_order_relaxed);
        if (!old) {
            atomic_store_explicit(&w->next, t, memory_order_release);
            return false;
        }
        old = atomic_exchange_explicit(&w->next, t, memory_order_acq_rel);
        if (!old) return false;
        t = old; /* the displaced fiber goes to the tail */
    }
    if (t->bound >= 0) {
        bound_put(w, t);
        return false;
    }
    ring_put(s, w, t);
    return true;
}

/* W1-W3: hand t to CPU cpu from another thread. */
static void remote_put(usched_t *s, struct usched__wk *from, struct usched_task *t, int cpu)
{
    struct usched__wk *w = wk_of(s, cpu);
    if (from) from->handoff = 1; /* the partner is likely to answer: spin for it */
    atomic_fetch_add_explicit(&w->inbox_n, 1, memory_order_relaxed);
    usched__inbox_push(&w->inbox, &t->node); /* W1 */
    usched__full_fence(); /* W2 */
    kick(s, from, cpu);                        /* W3 */
}

static void fill_info(const struct usched_task *t, struct usched_task_info *ti, uint32_t flags)
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

static void warn_fallback(usched_t *s, const char *why, int cpu)
{
    pthread_mutex_lock(&s->lock);
    if (!s->warned_fallback) {
        s->warned_fallback = 1;
        fprintf(stderr, "usched: policy '%s' %s (cpu %d); using the core's fallback (warned once)\n",
                s->ops->name, why, cpu);
    }
    pthread_mutex_unlock(&s->lock);
}

/* Quality counters (DESIGN section 7), judged at decision time. */
static void judge(usched_t *s, struct usched__wk *from, int cpu, int prev, int waker)
{
    if (usched__topo_smt_width(s->topo) > 1) {
        int core = usched__topo_group(s->topo, cpu, TOPO_SMT);
        const uint64_t *cm = usched__topo_group_mask(s->topo, TOPO_SMT, core);
        int words = usched__topo_mask_words(s->topo);
        bool sibling_busy = false;
        for (int i = 0; i < words && !sibling_busy; i++) {
            uint64_t others = cm[i];
            if (i == cpu / 64) others &= ~(1ull << (cpu % 64));
            uint64_t idle = atomic_load_explicit(&s->idle_cpus.w[i], memory_order_relaxed);
            if (others & ~idle) sibling_busy = true;
        }
        if (sibling_busy) {
            int llc = usched__topo_group(s->topo, cpu, TOPO_LLC);
            if (usched__idlemask_find(&s->idle_cores, usched__topo_group_mask(s->topo, TOPO_LLC, llc), 0) >= 0)
                stat_inc(from, s, USCHED_STAT_smt_busy_sibling);
        }
    }
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
            stat_inc(from, s, USCHED_STAT_wake_cross_llc);
            return;
        }
    }
}

/*
 * Places a runnable fiber: bound fibers on their CPU; otherwise the policy's
 * answer, checked; shared-queue policies put it on the global queue and kick
 * the CPU the policy chose.
 */
static void place(usched_t *s, struct usched_task *t, unsigned flags)
{
    struct usched__wk *self = usched__self_wk();
    if (self && self->s != s) self = NULL;
    int waker = self ? self->cpu : -1;
    if (!self) flags |= USCHED_SEL_OUTSIDE;

    struct usched_select_result r = {.cpu = -1, .reason = USCHED_REASON_FALLBACK,
                                     .slot = USCHED_SLOT_TAIL};
    if (t->bound >= 0) {
        r.cpu = t->bound;
        r.reason = USCHED_REASON_BOUND;
        r.slot = (flags & USCHED_SEL_SYNC) ? USCHED_SLOT_NEXT : USCHED_SLOT_TAIL;
    } else if (s->ops->select_cpu) {
        struct usched_task_info ti;
        fill_info(t, &ti, flags);
        struct usched_select_args a = {
            .size = sizeof a, .flags = flags, .waker_cpu = waker,
            .waker_id = self && self->cur ? self->cur->id : 0,
            .waker_pstate = self && self->cur ? (void *)self->cur->pstate : NULL,
            .task = &ti};
        s->ops->select_cpu(&s->pol, &a, &r);
        if (r.cpu < 0 || r.cpu >= s->ncpus) {
            warn_fallback(s, "returned a CPU out of range", r.cpu);
            r.cpu = -1;
        }
        if (r.reason < 0 || r.reason >= USCHED_NREASONS) r.reason = USCHED_REASON_FALLBACK;
    }
    if (r.cpu < 0) {
        r.cpu = waker >= 0 ? waker : (t->cpu >= 0 ? t->cpu : 0);
        r.reason = USCHED_REASON_FALLBACK;
        r.slot = USCHED_SLOT_TAIL;
        stat_inc(self, s, USCHED_STAT_pol_fallback);
    }
    stat_inc(self, s, USCHED_STAT_place_bound + r.reason);
    if ((flags & USCHED_SEL_WAKE) && t->bound < 0) judge(s, self, r.cpu, t->cpu, waker);

    if ((s->ops->flags & USCHED_OPS_SHARED_RQ) && t->bound < 0) {
        struct usched_task *one = t;
        gq_push_many(s, &one, 1);
        stat_inc(self, s, USCHED_STAT_wake_shared);
        usched__full_fence();
        if (r.cpu != waker) kick(s, self, r.cpu);
        return;
    }
    if (r.cpu == waker) {
        stat_inc(self, s, USCHED_STAT_wake_local);
        /* Others may steal it: make sure an idle CPU is looking. A new
         * fiber in the next slot counts too (Go wakes a P on every spawn):
         * its parent may run on for long, and an idle CPU takes next slots
         * on its last steal pass. */
        if (local_put(s, self, t, r.slot) || (flags & USCHED_SEL_FORK)) wakep(s, self, waker);
    } else {
        remote_put(s, self, t, r.cpu);
        stat_inc(self, s, USCHED_STAT_wake_remote);
    }
}

void usched__wake(usched_task_t *t, unsigned flags)
{
    if (t->s->ops->flags & USCHED_OPS_TRACK_TIME) {
        t->woke_ns = usched__now_ns();
        t->ran_ns = 0;
    }
    place(t->s, t, USCHED_SEL_WAKE | (flags & (USCHED_SEL_SYNC | USCHED_SEL_EXIT)));
}

/* ---- fibers --------------------------------------------------------------- */

static void finish_prev(usched_t *s, struct usched__wk *w);
static inline void poll_timers(struct usched__wk *w);
static void leave(int post, void (*fn)(void *), void *arg);

static void fiber_entry(void *arg)
{
    struct usched_task *t = arg;
    usched__fctx_started(&t->fctx);
    struct usched__wk *w = usched__self_wk();
    finish_prev(t->s, w);
    poll_timers(w);
    t->fn(t->arg);
    leave(POST_EXIT, NULL, NULL);
    __builtin_unreachable();
}

/* Per-CPU stack cache in front of the shared pool; it moves half of
 * itself at a time, under one pool lock. */
static void stack_put(struct usched__wk *w, usched__stack_t *st)
{
    if (!w) {
        usched__stack_free(st);
        return;
    }
    if (w->ncache == USCHED_STACK_CACHE) {
        w->ncache -= USCHED_STACK_CACHE / 2;
        usched__stack_free_many(&w->cache[w->ncache], USCHED_STACK_CACHE / 2);
    }
    w->cache[w->ncache++] = *st;
}

static int stack_get(usched_t *s, struct usched__wk *w, usched__stack_t *st)
{
    if (!w) return usched__stack_alloc(s->stack_size, st);
    if (!w->ncache) {
        int n = usched__stack_alloc_many(s->stack_size, w->cache, USCHED_STACK_CACHE / 4);
        if (n < 0) return n;
        w->ncache = n;
    }
    *st = w->cache[--w->ncache];
    return 0;
}

/* Drops one reference; the last one returns the stack (and descriptor). */
static void task_release(struct usched_task *t)
{
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
    usched__fctx_destroy(&t->fctx);
    usched__stack_t st = t->stack;
    /* Atomic: a second (wrong) join may read it from another thread. */
    __atomic_store_n(&t->magic, USCHED_TASK_DEAD, __ATOMIC_RELAXED);
    struct usched__wk *w = usched__self_wk();
    stack_put(w && w->s == t->s ? w : NULL, &st);
}

/* One fiber fewer alive; the last one wakes usched_wait/destroy. */
static void live_done(usched_t *s)
{
    if (atomic_fetch_sub_explicit(&s->live, 1, memory_order_acq_rel) == 1 &&
        atomic_load_explicit(&s->nwaiting, memory_order_seq_cst)) {
        atomic_fetch_add(&s->live_seq, 1);
        futex(&s->live_seq, FUTEX_WAKE, INT_MAX, NULL);
    }
}

static void task_exit(usched_t *s, struct usched__wk *w, struct usched_task *t)
{
    usched__stat_add(&w->stats, USCHED_STAT_exits, 1);
    usched__spin_lock(&t->jlock);
    t->done = 1;
    struct usched_task *j = t->joiner;
    struct usched__owaiter *ow = t->owaiter;
    usched__spin_unlock(&t->jlock);
    if (j) usched__wake(j, USCHED_SEL_SYNC | USCHED_SEL_EXIT); /* a hand-off: this fiber is gone */
    if (ow) {
        atomic_store_explicit(&ow->done, 1, memory_order_release);
        futex(&ow->done, FUTEX_WAKE, 1, NULL);
    }
    task_release(t);
    live_done(s);
}

static uint64_t next_id(usched_t *s, struct usched__wk *w)
{
    if (w) {
        if (w->id_next == w->id_end) {
            w->id_next = atomic_fetch_add(&s->next_id_block, 1024);
            w->id_end = w->id_next + 1024;
        }
        return w->id_next++;
    }
    return atomic_fetch_add(&s->next_id_block, 1);
}

static int spawn(usched_t *s, usched_task_t **out, int bound, void (*fn)(void *), void *arg)
{
    if (!s) return usched__error(EINVAL, "spawn: scheduler is NULL");
    if (!fn) return usched__error(EINVAL, "spawn: function is NULL");
    if (!atomic_load_explicit(&s->started, memory_order_acquire))
        return usched__error(ESRCH, "spawn: scheduler not started");
    if (atomic_load_explicit(&s->stopping, memory_order_acquire))
        return usched__error(ESRCH, "spawn: scheduler is being destroyed");
    if (bound >= s->ncpus || bound < -1)
        return usched__error(EINVAL, "spawn_on: cpu %d out of range [0, %d)", bound, s->ncpus);

    struct usched__wk *w = usched__self_wk();
    if (w && w->s != s) w = NULL;
    usched__stack_t st;
    int rc = stack_get(s, w, &st);
    if (rc < 0) return usched__error(-rc, "spawn: cannot allocate a %zu-byte stack", s->stack_size);
    /* The descriptor sits at the top of the stack, 64-byte aligned. */
    uintptr_t top = (uintptr_t)st.lo + st.size;
    struct usched_task *t = (struct usched_task *)((top - sizeof(struct usched_task)) & ~(uintptr_t)63);
    memset(t, 0, sizeof *t);
    t->s = s;
    t->fn = fn;
    t->arg = arg;
    t->stack = st;
    t->cpu = -1;
    t->bound = bound;
    __atomic_store_n(&t->magic, USCHED_TASK_MAGIC, __ATOMIC_RELAXED);
    t->id = next_id(s, w);
    atomic_store_explicit(&t->refs, out ? 2 : 1, memory_order_relaxed);
    if (!out) atomic_store_explicit(&t->joined, 1, memory_order_relaxed);
    usched__fctx_make(&t->fctx, st.lo, (size_t)((uintptr_t)t - (uintptr_t)st.lo), fiber_entry, t);
    atomic_fetch_add_explicit(&s->live, 1, memory_order_relaxed);
    if (out) *out = t;
    stat_inc(w, s, w ? USCHED_STAT_spawns : USCHED_STAT_spawns_outside);

    if (!w && bound < 0 && !(s->ops->flags & USCHED_OPS_SHARED_RQ) && !s->ops->select_cpu) {
        struct usched_task *one = t;
        gq_push_many(s, &one, 1);
        wakep(s, NULL, -1);
        return 0;
    }
    place(s, t, USCHED_SEL_FORK);
    return 0;
}

USCHED_EXPORT int usched_spawn(usched_t *s, usched_task_t **out, void (*fn)(void *), void *arg)
{
    return spawn(s, out, -1, fn, arg);
}

USCHED_EXPORT int usched_spawn_on(usched_t *s, usched_task_t **out, int cpu, void (*fn)(void *),
                                  void *arg)
{
    /* spawn() checks the upper bound; -1 would mean "not bound" there. */
    if (cpu < 0) return usched__error(EINVAL, "spawn_on: cpu %d is negative", cpu);
    return spawn(s, out, cpu, fn, arg);
}

usched_task_t *usched__current(void)
{
    struct usched__wk *w = usched__self_wk();
    return w ? w->cur : NULL;
}

void usched__block(void (*after)(void *), void *arg)
{
    leave(POST_BLOCK, after, arg);
}

USCHED_EXPORT void usched_yield(void)
{
    struct usched__wk *w = usched__self_wk();
    if (!w || !w->cur) {
        sched_yield();
        return;
    }
    leave(POST_YIELD, NULL, NULL);
}

USCHED_EXPORT int usched_self_cpu(void)
{
    struct usched__wk *w = usched__self_wk();
    return w && w->cur ? w->cpu : -1;
}

USCHED_EXPORT usched_t *usched_self(void)
{
    struct usched__wk *w = usched__self_wk();
    return w && w->cur ? w->s : NULL;
}

USCHED_EXPORT uint64_t usched_self_id(void)
{
    struct usched__wk *w = usched__self_wk();
    return w && w->cur ? w->cur->id : 0;
}

void **usched__task_slot(usched_task_t *t)
{
    return &t->slot;
}

uint64_t usched__task_id(const usched_task_t *t)
{
    return t->id;
}

usched_task_t **usched__task_link(usched_task_t *t)
{
    return &t->link;
}

static void unlock_jlock(void *arg)
{
    usched__spin_unlock(&((struct usched_task *)arg)->jlock);
}

/* Outside joiners are listed so that destroy can cancel them (-ECANCELED)
 * when their fiber is blocked forever. */
static void owaiter_link(usched_t *s, struct usched__owaiter *ow)
{
    pthread_mutex_lock(&s->lock);
    ow->prev = NULL;
    ow->next = s->owaiters;
    if (ow->next) ow->next->prev = ow;
    s->owaiters = ow;
    ow->linked = 1;
    pthread_mutex_unlock(&s->lock);
}

static void owaiter_unlink(usched_t *s, struct usched__owaiter *ow)
{
    pthread_mutex_lock(&s->lock);
    if (ow->linked) {
        if (ow->prev) ow->prev->next = ow->next;
        else s->owaiters = ow->next;
        if (ow->next) ow->next->prev = ow->prev;
        ow->linked = 0;
    }
    pthread_mutex_unlock(&s->lock);
}

void usched__cancel_owaiters(usched_t *s);
void usched__cancel_owaiters(usched_t *s)
{
    pthread_mutex_lock(&s->lock);
    struct usched__owaiter *ow = s->owaiters;
    s->owaiters = NULL;
    while (ow) {
        struct usched__owaiter *next = ow->next;
        ow->linked = 0;
        ow->result = -ECANCELED;
        atomic_store_explicit(&ow->done, 1, memory_order_release);
        futex(&ow->done, FUTEX_WAKE, 1, NULL);
        ow = next;
    }
    pthread_mutex_unlock(&s->lock);
}

/*
 * Join of a fiber still waiting in this CPU's next slot that never ran (the
 * child spawned last): take it out with the same CAS a thief would use and
 * run its function right here, on the joiner's stack, instead of blocking,
 * switching to it and being woken back (TBB's wait runs tasks the same
 * way). Only with half of the joiner's stack still free, so that nesting
 * cannot overflow it. Inside, usched_self_id() reports the joiner.
 */
static bool join_inline(struct usched__wk *w, struct usched_task *t)
{
    struct usched_task *me = w->cur;
    if (atomic_load_explicit(&w->next, memory_order_relaxed) != t) return false;
    size_t used = (size_t)((char *)me->stack.lo + me->stack.size - (char *)__builtin_frame_address(0));
    if (used > me->stack.size / 2) return false;
    struct usched_task *exp = t;
    if (!atomic_compare_exchange_strong_explicit(&w->next, &exp, NULL, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return false;
    if (t->cpu != -1) {
        /* It ran already (woken back into the next slot): it resumes on its
         * own stack, not here. The slot was ours and is empty again. */
        atomic_store_explicit(&w->next, t, memory_order_release);
        return false;
    }
    usched_t *s = t->s;
    t->fn(t->arg);
    w = usched__self_wk(); /* the joiner may have moved while fn blocked */
    usched__stat_add(&w->stats, USCHED_STAT_exits, 1);
    usched__stat_add(&w->stats, USCHED_STAT_joins_inline, 1);
    t->done = 1; /* nobody else looks: the join is ours and no worker has it */
    atomic_store_explicit(&t->refs, 1, memory_order_relaxed); /* no exit will come */
    task_release(t);
    live_done(s);
    return true;
}

USCHED_EXPORT int usched_join(usched_task_t *t)
{
    if (!t) return usched__error(EINVAL, "join: task is NULL");
    if (__atomic_load_n(&t->magic, __ATOMIC_RELAXED) != USCHED_TASK_MAGIC)
        return usched__error(EINVAL, "join: not a live task (joined already, or detached and finished)");
    struct usched__wk *w = usched__self_wk();
    if (w && w->cur == t) return usched__error(EDEADLK, "join: a fiber cannot join itself");
    if (atomic_exchange_explicit(&t->joined, 1, memory_order_acq_rel))
        return usched__error(EINVAL, "join: task %llu is detached or joined already",
                             (unsigned long long)t->id);
    if (w && w->cur && t->s == w->s && join_inline(w, t)) return 0;
    usched__spin_lock(&t->jlock);
    int result = 0;
    if (t->done) {
        usched__spin_unlock(&t->jlock);
    } else if (w && w->cur) {
        t->joiner = w->cur;
        usched__stat_add(&w->stats, USCHED_STAT_blocks, 1);
        usched__block(unlock_jlock, t);
    } else {
        struct usched__owaiter ow = {.done = 0, .result = 0};
        usched_t *s = t->s;
        owaiter_link(s, &ow);
        t->owaiter = &ow;
        usched__spin_unlock(&t->jlock);
        while (!atomic_load_explicit(&ow.done, memory_order_acquire))
            futex(&ow.done, FUTEX_WAIT, 0, NULL);
        result = ow.result;
        /* Cancelled waiters were unlinked by destroy, which may have freed s. */
        if (result == 0) owaiter_unlink(s, &ow);
    }
    if (result == 0) task_release(t);
    return result;
}

/* ---- the worker ------------------------------------------------------------ */

static struct usched_task *task_of(usched__mpsc_node_t *n)
{
    return (struct usched_task *)((char *)n - offsetof(struct usched_task, node));
}

static void drain_inbox(usched_t *s, struct usched__wk *w)
{
    if (!atomic_load_explicit(&w->inbox_n, memory_order_relaxed)) return;
    usched__mpsc_node_t *n;
    while ((n = usched__inbox_pop(&w->inbox))) {
        atomic_fetch_sub_explicit(&w->inbox_n, 1, memory_order_relaxed);
        struct usched_task *t = task_of(n);
        if (t->bound >= 0)
            bound_put(w, t);
        else
            ring_put(s, w, t);
    }
}

/* Fires due timers now and then while busy (every 16th call). Only from a
 * context that is not leaving: the host, or a fiber right after finish_prev,
 * so that a timer never wakes a fiber still on its way out. */
static inline void poll_timers(struct usched__wk *w)
{
    if (atomic_load_explicit(&w->ntimers, memory_order_relaxed) && (++w->tpoll & 15) == 0)
        usched__timers_run(w, usched__now_ns());
}

static struct usched_task *find_local(usched_t *s, struct usched__wk *w)
{
    drain_inbox(s, w);
    w->tick++;
    struct usched_task *t;
    if (w->tick % USCHED_GLOBAL_EVERY == 0 && (t = gq_pop(s))) {
        usched__stat_add(&w->stats, USCHED_STAT_global_pulls, 1);
        return t;
    }
    if (atomic_load_explicit(&w->next, memory_order_relaxed)) {
        uint32_t cap = (uint32_t)usched__knob_get(&s->knobs, USCHED_KNOB_next_cap);
        t = atomic_exchange_explicit(&w->next, NULL, memory_order_acq_rel);
        if (t) {
            if (w->next_runs < cap) {
                w->next_runs++;
                return t;
            }
            /* Demote: a ping-pong pair must not starve the queue. */
            usched__stat_add(&w->stats, USCHED_STAT_next_demoted, 1);
            if (t->bound >= 0)
                bound_put(w, t);
            else
                ring_put(s, w, t);
        }
    }
    w->next_runs = 0;
    if (w->bound_head && ((w->tick & 1) || !usched__ring_len(&w->ring))) return bound_get(w);
    if ((t = usched__ring_pop(&w->ring))) return t;
    return bound_get(w);
}

static const int steal_stat[TOPO_NLEVELS] = {
    USCHED_STAT_steal_smt, USCHED_STAT_steal_l2, USCHED_STAT_steal_llc,
    USCHED_STAT_steal_package, USCHED_STAT_steal_numa, USCHED_STAT_steal_machine};

static bool may_steal(usched_t *s)
{
    return usched__knob_get(&s->knobs, USCHED_KNOB_steal) && s->ncpus > 1 &&
           !(s->ops->flags & (USCHED_OPS_NO_STEAL | USCHED_OPS_SHARED_RQ));
}

/* How many fibers thief may take from victim (0 none, -1 half): the policy's
 * want_steal, or within the LLC any load, beyond it load >= steal_thresh. */
static int steal_want(usched_t *s, int thief, int victim, int level, unsigned load)
{
    if (s->ops->want_steal) return s->ops->want_steal(&s->pol, thief, victim, level, load);
    int thresh = (int)usched__knob_get(&s->knobs, USCHED_KNOB_steal_thresh);
    return (level <= TOPO_LLC || (int)load >= thresh) ? -1 : 0;
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
        n = s->ops->steal_order(&s->pol, w->cpu, order, s->ncpus);
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
    for (int i = 0; i < n; i++) {
        int v = order[i];
        if (v == w->cpu || v < 0 || v >= s->ncpus) continue;
        struct usched__wk *vw = wk_of(s, v);
        int level = usched__topo_level_shared(s->topo, w->cpu, v);
        unsigned load = usched__ring_len(&vw->ring);
        if (load) {
            int want = steal_want(s, w->cpu, v, level, load);
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
                        ring_put(s, w, x);
                }
                if (t) {
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
                /* Back off ~3 us: the victim is likely about to run it. */
                uint64_t until = usched__now_ns() + 3000;
                while (usched__now_ns() < until) usched__cpu_relax();
                if (atomic_compare_exchange_strong(&vw->next, &t, NULL)) {
                    if (t->bound < 0) {
                        usched__stat_add(&w->stats, USCHED_STAT_steal_next, 1);
                        return t;
                    }
                    remote_put(s, w, t, t->bound); /* bound: back home, by its inbox */
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
        unsigned load = usched__ring_len(&wk_of(s, c)->ring);
        if (load && steal_want(s, w->cpu, c, usched__topo_level_shared(s->topo, w->cpu, c), load))
            return true;
    }
    return false;
}

static struct usched_task *try_all(usched_t *s, struct usched__wk *w, bool last_pass)
{
    struct usched_task *t = find_local(s, w);
    if (!t && (t = gq_pop(s))) usched__stat_add(&w->stats, USCHED_STAT_global_pulls, 1);
    if (!t) t = steal(s, w, last_pass);
    return t;
}

static void go_idle(usched_t *s, struct usched__wk *w)
{
    if (w->idle) return;
    w->idle = 1;
    usched__mark_idle(s, w->cpu);
    if (s->ops->idle) s->ops->idle(&s->pol, w->cpu);
}

static void go_busy(usched_t *s, struct usched__wk *w)
{
    if (!w->idle) return;
    w->idle = 0;
    usched__mark_busy(s, w->cpu);
    if (s->ops->busy) s->ops->busy(&s->pol, w->cpu);
}

/* Leaves PARKED (timeout, spurious wake-up, or work seen at P3): whoever
 * moves a worker out of PARKED decrements nparked - a kicker or itself. */
static void unpark(usched_t *s, struct usched__wk *w)
{
    uint32_t exp = WK_PARKED;
    if (atomic_compare_exchange_strong(&w->state, &exp, WK_RUNNING)) atomic_fetch_sub(&s->nparked, 1);
}

/* Returns a fiber to run, or NULL when the scheduler stops. */
static struct usched_task *find_work(usched_t *s, struct usched__wk *w)
{
    struct usched_task *t;
    poll_timers(w);
    if ((t = find_local(s, w))) return t;
    if ((t = gq_pop(s))) {
        usched__stat_add(&w->stats, USCHED_STAT_global_pulls, 1);
        return t;
    }
    go_idle(s, w);
    bool spinning = false;
    for (;;) {
        if (atomic_load_explicit(&w->ntimers, memory_order_relaxed))
            usched__timers_run(w, usched__now_ns());
        /* Spin if fewer than half of the CPUs that are not parked spin
         * already (Go's rule; this CPU and those just kicked count as not
         * parked, so a CPU that handed work to a partner spins for the
         * answer instead of parking at once). */
        uint32_t awake = (uint32_t)s->ncpus - atomic_load(&s->nparked);
        if (!spinning) {
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
                t = try_all(s, w, (pass & 3) == 3);
                if (t) {
                    go_busy(s, w);
                    /* The last spinner to find work wakes another (chaining). */
                    if (atomic_fetch_sub(&s->nspinning, 1) == 1 && work_visible(s, w))
                        wakep(s, w, w->cpu);
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
        if (!usched__idlemask_test(&s->idle_cpus, w->cpu)) usched__mark_idle(s, w->cpu);
        /* P1, P2 (nparked first: a kicker decrements it only after it saw
         * PARKED) */
        atomic_fetch_add(&s->nparked, 1);
        atomic_store_explicit(&w->state, WK_PARKED, memory_order_seq_cst);
        /* P3 */
        if (work_visible(s, w) || atomic_load(&s->stopping)) {
            unpark(s, w);
            atomic_store_explicit(&s->waking, 0, memory_order_relaxed);
            if ((t = try_all(s, w, true))) {
                go_busy(s, w);
                return t;
            }
            continue;
        }
        /* P4 */
        usched__stat_add(&w->stats, USCHED_STAT_parks, 1);
        /* Going to sleep: give back a few cold free stacks' pages. */
        usched__stack_trim(-1, 64);
        uint64_t dl = usched__timers_next(w);
        if (dl == UINT64_MAX) {
            futex(&w->state, FUTEX_WAIT, WK_PARKED, NULL);
        } else {
            uint64_t now = usched__now_ns();
            if (dl > now) {
                uint64_t d = dl - now;
                struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
                futex(&w->state, FUTEX_WAIT, WK_PARKED, &ts);
            }
        }
        unpark(s, w);
        atomic_store_explicit(&s->waking, 0, memory_order_relaxed);
    }
}

static const int migrate_stat[TOPO_NLEVELS] = {
    -1, USCHED_STAT_migrate_l2, USCHED_STAT_migrate_llc,
    USCHED_STAT_migrate_package, USCHED_STAT_migrate_numa, USCHED_STAT_migrate_machine};

/* Makes t the running fiber of w (just before switching to it). */
static void prologue(usched_t *s, struct usched__wk *w, struct usched_task *t)
{
    if (t->cpu != w->cpu && t->cpu >= 0) {
        int l = usched__topo_level_shared(s->topo, t->cpu, w->cpu);
        usched__stat_add(&w->stats, l == TOPO_SMT ? USCHED_STAT_migrate_smt : migrate_stat[l], 1);
    }
    t->cpu = w->cpu;
    w->cur = t;
    if (s->ops->flags & USCHED_OPS_TRACK_TIME) {
        t->run_start_ns = usched__now_ns();
        atomic_store_explicit(&w->cur_ran_ns, t->ran_ns, memory_order_relaxed);
        atomic_store_explicit(&w->cur_start_ns, t->run_start_ns, memory_order_relaxed);
    }
    atomic_store_explicit(&w->cur_id, t->id, memory_order_relaxed);
    atomic_store_explicit(&w->current, t, memory_order_release);
    if (s->ops->running) {
        struct usched_task_info ti;
        fill_info(t, &ti, 0);
        s->ops->running(&s->pol, w->cpu, &ti);
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
static void finish_prev(usched_t *s, struct usched__wk *w)
{
    struct usched_task *t = w->prev;
    if (!t) return;
    w->prev = NULL;
    int post = w->post;
    w->post = POST_NONE;
    if (!t->stack.guarded) usched__stack_check(&t->stack, t->id);
    if (s->ops->flags & USCHED_OPS_TRACK_TIME) {
        t->last_ran_ns = usched__now_ns();
        t->ran_ns += t->last_ran_ns - t->run_start_ns;
    }
    if (s->ops->stopping) {
        struct usched_task_info ti;
        fill_info(t, &ti, 0);
        s->ops->stopping(&s->pol, w->cpu, &ti, post == POST_YIELD);
    }
    switch (post) {
    case POST_YIELD:
        usched__stat_add(&w->stats, USCHED_STAT_yields, 1);
        if (s->ops->flags & USCHED_OPS_SHARED_RQ && t->bound < 0) {
            struct usched_task *one = t;
            gq_push_many(s, &one, 1);
        } else if (t->bound >= 0) {
            bound_put(w, t);
        } else {
            ring_put(s, w, t);
        }
        break;
    case POST_BLOCK:
        if (w->post_fn) w->post_fn(w->post_arg);
        break;
    case POST_EXIT:
        task_exit(s, w, t);
        break;
    default:
        fprintf(stderr, "usched: fiber %llu switched out without a reason\n",
                (unsigned long long)t->id);
        abort();
    }
}

/*
 * The running fiber gives up its CPU (yield, block or exit). If this CPU has
 * other work queued locally, switch straight to it (one switch, not two via
 * the host); otherwise to the host, which steals, spins or parks. Either way
 * the switched-to context calls finish_prev() for this fiber.
 */
static void leave(int post, void (*fn)(void *), void *arg)
{
    struct usched__wk *w = usched__self_wk();
    struct usched_task *t = w->cur;
    usched_t *s = t->s;
    struct usched_task *next = find_local(s, w);
    if (!next && post == POST_YIELD) return; /* nothing else to run here */
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

void *usched__worker_main(void *arg);
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
    usched__stack_free_many(w->cache, w->ncache);
    w->ncache = 0;
    usched__stack_thread_fini();
    tls_wk = NULL;
    return NULL;
}

/* Wakes every worker (shutdown). */
void usched__kick_all(usched_t *s);
void usched__kick_all(usched_t *s)
{
    for (int c = 0; c < s->ncpus; c++) {
        struct usched__wk *w = wk_of(s, c);
        atomic_store(&w->state, WK_RUNNING);
        futex(&w->state, FUTEX_WAKE, 1, NULL);
    }
}

/* Outside thread: waits until no fiber is alive, or until the scheduler is
 * quiescent (every worker parked, nothing queued, no timers) with fibers
 * still blocked - those can never finish. Returns 0 or -EDEADLK. */
int usched__wait_live(usched_t *s, bool detect_deadlock);
int usched__wait_live(usched_t *s, bool detect_deadlock)
{
    atomic_fetch_add(&s->nwaiting, 1);
    int rc = 0, quiet = 0;
    for (;;) {
        uint32_t seq = atomic_load(&s->live_seq);
        if (atomic_load(&s->live) == 0) break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        futex(&s->live_seq, FUTEX_WAIT, seq, &ts);
        if (!detect_deadlock || atomic_load(&s->live) == 0) continue;
        bool all_parked = atomic_load(&s->gq_n) == 0;
        for (int c = 0; c < s->ncpus && all_parked; c++) {
            struct usched__wk *w = wk_of(s, c);
            if (atomic_load(&w->state) != WK_PARKED || atomic_load(&w->ntimers) ||
                atomic_load(&w->inbox_n) || usched__ring_len(&w->ring) || atomic_load(&w->nbound))
                all_parked = false;
        }
        quiet = all_parked ? quiet + 1 : 0;
        if (quiet >= 3) {
            rc = -EDEADLK;
            break;
        }
    }
    atomic_fetch_sub(&s->nwaiting, 1);
    return rc;
}
