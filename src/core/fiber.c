/*
 * The fiber lifecycle: spawn (a descriptor from the pool and a reserved
 * stack, placed by place.c), join (inline when the child has not started,
 * else block), and waiting for every fiber to finish (usched_wait,
 * usched_destroy). A fiber's exit and the release of its descriptor and
 * stack are retire.c's, below the worker loop that calls them.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>

#include "base/error.h"
#include "base/export.h"
#include "core/place.h"
#include "core/queue.h"
#include "core/retire.h"
#include "core/sched.h"

/*
 * The join protocol: one atomic word (jstate, USCHED__J_* in core.h) in place
 * of a reference count, a joined flag and a lock - one locked instruction on
 * each side (an exit's fetch-or, a join's CAS), where the lock cost five on
 * a child that a thief ran and its spawner joined.
 *   J1. spawn: 0, or JOINED|DETACHED without a handle (no join can begin).
 *   J2. join: a fiber joining a child that never started and still waits
 *       on the joiner's CPU takes it out of the queue first (join_take: the
 *       next slot's or the ring's own take, as the run would); then no exit
 *       will come and nobody else can start it, so the joiner sets JOINED
 *       with a plain store and runs it inline. (Two joins of one fiber at
 *       the same moment are the caller's bug, as for pthread_join; a join
 *       that comes after another began fails.) Otherwise a CAS sets JOINED
 *       (a second join sees it and fails). If DONE was set, the child has
 *       exited: the joiner frees it. Otherwise it
 *       writes joiner (or owaiter) and then sets WAIT with a fetch-or - for
 *       a fiber only once it is switched out (the block's `after` step), so
 *       that the exit's wake-up cannot come before it is off its stack.
 *   J3. exit: fetch-or DONE (acq_rel: the fiber's effects happen before the
 *       joiner's acquire of DONE). Old value DETACHED: the exit frees it.
 *       WAIT: it wakes the joiner, and the joiner frees it. Neither: the
 *       joiner that comes frees it (J2 or J4 sees DONE).
 *   J4. WAIT set by a fetch-or whose old value had DONE: the exit came
 *       first and did not see WAIT, so nobody will wake the joiner; it does
 *       not wait (a fiber is woken by its own `after` step).
 *   J5. Exactly one side frees: the exit only for a detached fiber (no
 *       joiner ever touches it), the joiner otherwise, after it saw DONE.
 *       The exit touches the descriptor last at its fetch-or (it reads
 *       joiner and owaiter before, once WAIT is seen, after it).
 */

static uint64_t next_id(usched_t *s, struct usched__wk *w)
{
    if (w) {
        if (w->id_next == w->id_end) {
            w->id_next = atomic_fetch_add(&s->life.next_id_block, 1024);
            w->id_end = w->id_next + 1024;
        }
        return w->id_next++;
    }
    return atomic_fetch_add(&s->life.next_id_block, 1);
}

/* The newest of w's spare fibers (w->nspare > 0), with the stack it kept. */
static inline struct usched_task *spare_take(struct usched__wk *w)
{
    struct usched_task *t = w->spare[--w->nspare];
    /* for the spawn after the next one, as the descriptor cache does */
    if (w->nspare >= 2) usched__desc_prefetch(w->spare[w->nspare - 2]);
    return t;
}

/*
 * A new fiber's descriptor, field by field (task.h): the join line (the
 * join state, fn and arg), then the id; the run times and the policy state
 * are left to the first run (fresh) unless the caller zeroes them; the
 * context, the links and the rest are written where they are first used.
 * joiner and owaiter are written by a join before it sets WAIT (J2). Then
 * the live count and the handle.
 */
static inline void task_begin(usched_t *s, struct usched__wk *w, struct usched_task *t, usched_task_t **out,
                              int bound, void (*fn)(void *), void *arg)
{
    __atomic_store_n(&t->magic, USCHED_TASK_MAGIC, __ATOMIC_RELAXED);
    atomic_store_explicit(&t->jstate, out ? 0 : USCHED__J_JOINED | USCHED__J_DETACHED,
                          memory_order_relaxed); /* J1 */
    t->cpu = -1;
    t->reuse_left = 0;
    t->fresh = 1;
    t->bound = bound;
    atomic_store_explicit(&t->in_gq, 0, memory_order_relaxed);
    t->s = s;
    t->fn = fn;
    t->arg = arg;
    t->id = next_id(s, w);
    usched__live_add(s, w);
    if (out) *out = t;
}

static int spawn(usched_t *s, struct usched__wk *w, usched_task_t **out, int bound, void (*fn)(void *),
                 void *arg)
{
    if (out) *out = NULL; /* on any failure, as usched_create and usched_chan_create */
    if (!s) return usched__error(EINVAL, "spawn: scheduler is NULL");
    if (!fn) return usched__error(EINVAL, "spawn: function is NULL");
    if (!atomic_load_explicit(&s->started, memory_order_acquire))
        return usched__error(ESRCH, "spawn: scheduler not started");
    if (atomic_load_explicit(&s->stopping, memory_order_acquire))
        return usched__error(ESRCH, "spawn: scheduler is being destroyed");
    if (bound >= s->ncpus || bound < -1)
        return usched__error(EINVAL, "spawn_on: cpu %d out of range [0, %d)", bound, s->ncpus);

    if (w && w->s != s) w = NULL;
    struct usched_task *t;
    /* The stack is reserved here, so that a spawn fails rather than a
     * fiber later; the CPU that first runs the fiber may trade it for its
     * own warmest one (sched.c, first_run), and one joined inline never
     * touches it. A spare fiber of this worker comes with both, a stack of
     * this scheduler's size (usched__task_free, retire.h). */
    usched__stack_t st;
    if (w && w->nspare) {
        t = spare_take(w);
        st = t->stack;
    } else {
        if (usched__desc_get(w ? &w->descs : NULL, &t) < 0)
            return usched__error(ENOMEM, "spawn: cannot allocate a fiber descriptor");
        int rc = usched__stack_cache_get(w ? &w->stacks : NULL, s->cfg.stack_size, &st);
        if (rc < 0) {
            usched__desc_put(w ? &w->descs : NULL, t);
            return usched__error(-rc, "spawn: cannot allocate a %zu-byte stack", s->cfg.stack_size);
        }
    }
    task_begin(s, w, t, out, bound, fn, arg);
    t->stack = st;
    usched__task_fresh_zero(s, t); /* the policy may see it now (place_on) */
    usched__stat_inc(w, s, w ? USCHED_STAT_spawns : USCHED_STAT_spawns_outside);

    if (w && bound < 0 && s->fork_next)
        usched__place_fork(s, w, t); /* the policy's declared answer to a spawn by a fiber (policy.h) */
    else
        usched__place_on(s, w, t, USCHED_SEL_FORK);
    return 0;
}

/*
 * The short path of a spawn by a fiber of this scheduler under a policy
 * whose answer is the next slot (USCHED_OPS_FORK_NEXT), with a spare fiber
 * at hand: the spare's stack is already in it, and only the descriptor's
 * first line (the join state, fn and arg) and the id are written - the run
 * times and the policy state wait for a first run (fresh), which a child
 * joined inline never has. The checks that spawn() makes are implied here:
 * the caller is a fiber of s, so s is started; `stopping` is still read
 * (destroy waits for this fiber).
 */
static int spawn_next(usched_t *s, struct usched__wk *w, usched_task_t **out, void (*fn)(void *), void *arg)
{
    struct usched_task *t = spare_take(w);
    task_begin(s, w, t, out, -1, fn, arg);
    usched__stat_add(&w->stats, USCHED_STAT_spawns, 1);
    usched__place_fork(s, w, t);
    return 0;
}

USCHED_EXPORT int usched_spawn(usched_t *s, usched_task_t **out, void (*fn)(void *), void *arg)
{
    struct usched__wk *w = usched__self_wk();
    if (__builtin_expect(w && w->s == s && w->cur && w->nspare && fn && s->fork_next, 1) &&
        !atomic_load_explicit(&s->stopping, memory_order_acquire))
        return spawn_next(s, w, out, fn, arg);
    return spawn(s, w, out, -1, fn, arg);
}

/*
 * usched_spawn_call: a child that may run at once as a call. The rule is
 * libgomp's for an OpenMP task (undeferred once 64 tasks per thread are
 * queued): with that many fibers waiting on this CPU, another one would
 * only wait longer, and its spawn, queueing and join would cost more than
 * its run. The caller promised that the child does not wait for anything
 * it does later. Its handle is called_task, finished: joins return 0. As
 * for an inline join, only with half of the caller's stack still free, so
 * that children calling children cannot overflow it.
 */
#define CALL_DEPTH 64

static struct usched_task called_task = {.magic = USCHED_TASK_CALLED};

static bool stack_half_free(const struct usched_task *me)
{
    size_t used = (size_t)((char *)me->stack.lo + me->stack.size - (char *)__builtin_frame_address(0));
    return used <= me->stack.size / 2;
}

USCHED_EXPORT int usched_spawn_call(usched_t *s, usched_task_t **out, void (*fn)(void *), void *arg)
{
    struct usched__wk *w = usched__self_wk();
    if (w && w->s == s && w->cur && fn &&
        usched__ring_len_owner(&w->ring) + (atomic_load_explicit(&w->next, memory_order_relaxed) != NULL) >=
            CALL_DEPTH &&
        stack_half_free(w->cur) && !atomic_load_explicit(&s->stopping, memory_order_acquire)) {
        if (out) *out = &called_task;
        usched__stat_add(&w->stats, USCHED_STAT_spawns_called, 1);
        fn(arg);
        return 0;
    }
    return usched_spawn(s, out, fn, arg);
}

USCHED_EXPORT int usched_spawn_on(usched_t *s, usched_task_t **out, int cpu, void (*fn)(void *),
                                  void *arg)
{
    /* spawn() checks the upper bound; -1 would mean "not bound" there. */
    if (out) *out = NULL;
    if (cpu < 0) return usched__error(EINVAL, "spawn_on: cpu %d is negative", cpu);
    return spawn(s, usched__self_wk(), out, cpu, fn, arg);
}

usched_task_t *usched__current(void)
{
    struct usched__wk *w = usched__self_wk();
    return w ? w->cur : NULL;
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


usched_task_t **usched__task_link(usched_task_t *t)
{
    return &t->link;
}

/* J2, J4 for a fiber joiner, once it is switched out (the block's `after`
 * step, on its worker): publish the wait; if the child exited meanwhile,
 * nobody else will wake the joiner. */
static void join_arm(void *arg)
{
    struct usched_task *t = arg;
    if (atomic_fetch_or_explicit(&t->jstate, USCHED__J_WAIT, memory_order_acq_rel) & USCHED__J_DONE)
        usched__wake(t->joiner, USCHED__WAKE_SYNC | USCHED__WAKE_EXIT);
}

/* Outside joiners are listed so that destroy can cancel them (-ECANCELED)
 * when their fiber is blocked forever. */
static void owaiter_link(usched_t *s, struct usched__owaiter *ow)
{
    pthread_mutex_lock(&s->out.lock);
    ow->prev = NULL;
    ow->next = s->out.owaiters;
    if (ow->next) ow->next->prev = ow;
    s->out.owaiters = ow;
    ow->linked = 1;
    pthread_mutex_unlock(&s->out.lock);
}

static void owaiter_unlink(usched_t *s, struct usched__owaiter *ow)
{
    pthread_mutex_lock(&s->out.lock);
    if (ow->linked) {
        if (ow->prev) ow->prev->next = ow->next;
        else s->out.owaiters = ow->next;
        if (ow->next) ow->next->prev = ow->prev;
        ow->linked = 0;
    }
    pthread_mutex_unlock(&s->out.lock);
}

void usched__cancel_owaiters(usched_t *s)
{
    pthread_mutex_lock(&s->out.lock);
    struct usched__owaiter *ow = s->out.owaiters;
    s->out.owaiters = NULL;
    while (ow) {
        struct usched__owaiter *next = ow->next;
        ow->linked = 0;
        ow->result = -ECANCELED;
        atomic_store_explicit(&ow->done, 1, memory_order_release);
        usched__futex(&ow->done, FUTEX_WAKE, 1, NULL);
        ow = next;
    }
    pthread_mutex_unlock(&s->out.lock);
}

/*
 * Join of a child that never ran and still waits on this CPU - in its next
 * slot (taken with the same CAS a thief would use) or anywhere in its ring
 * (usched__ring_take, one CAS) - or first in the global queue: run its
 * function right here, on the joiner's stack, instead of blocking,
 * switching to it and being woken back (work-first, as Cilk and TBB's wait
 * run tasks). A child that a thief took already is joined by blocking. Only
 * with half of the joiner's stack still free, so that nesting cannot
 * overflow it. Inside, usched_self_id() reports the joiner.
 */
static bool join_take(struct usched__wk *w, struct usched_task *t)
{
    /* Started already (a thief ran it): nothing to take, and no scan of
     * the ring for it - a join in spawn order of children a thief took
     * would scan the whole ring each time. A child taken but not yet
     * started still reads -1 and is looked for as before. */
    if (__atomic_load_n(&t->cpu, __ATOMIC_RELAXED) != -1) return false;
    if (atomic_load_explicit(&w->next, memory_order_relaxed) == t) {
        if (usched__wk_next_take_if(t->s, w, t)) {
            if (t->cpu == -1) return true;
            /* It ran already (woken back into the next slot): it resumes on
             * its own stack, not here. The slot was ours and is empty again. */
            atomic_store_explicit(&w->next, t, memory_order_release);
            return false;
        }
    }
    if (t->bound >= 0) return false;
    /* The hint spares a scan of the whole ring for a spilled child. */
    bool in_gq = atomic_load_explicit(&t->in_gq, memory_order_relaxed);
    if (!in_gq && usched__ring_take(&w->ring, t)) {
        /* Joins in spawn order take the oldest each time: the next one's
         * join line, written a whole batch ago, is asked for now. */
        const struct usched_task *n = usched__ring_peek_head(&w->ring);
        if (n) usched__prefetch_w(n);
        if (t->cpu == -1) return true;
        usched__wk_ring_put(t->s, w, t); /* a woken fiber: back where it was, near enough */
        return false;
    }
    /* The oldest fiber of the global queue, where a full ring spills the
     * oldest half of a burst of spawns: joins in spawn order find their
     * children there. Not under a shared-run-queue policy, whose fibers
     * all go through that queue and run where the policy's callbacks see
     * them. */
    if (!in_gq || t->s->yield_shared || !usched__gq_take_head(t->s, t)) return false;
    if (t->cpu == -1) return true;
    usched__gq_push(t->s, t); /* a woken fiber: to the back */
    return false;
}

/* J2 for a child taken by join_take: st is the join state read before the
 * take, without JOINED. */
static bool join_inline(struct usched__wk *w, struct usched_task *t, uint32_t st)
{
    if (!stack_half_free(w->cur)) return false;
    if (!join_take(w, t)) return false;
    /* Taken before it started: no exit will come and no other CPU can take
     * it, so nothing else writes jstate (J2); a plain store makes a second
     * join during its run fail. */
    atomic_store_explicit(&t->jstate, st | USCHED__J_JOINED, memory_order_relaxed);
    usched_t *s = t->s;
    t->fn(t->arg);
    w = usched__self_wk(); /* the joiner may have moved while fn blocked */
    usched__stat_add(&w->stats, USCHED_STAT_exits, 1);
    usched__stat_add(&w->stats, USCHED_STAT_joins_inline, 1);
    /* No exit will come (it never started on a worker): the join frees it
     * (J5), with no atomic step. */
    usched__task_free(w, t);
    usched__live_done(s, w);
    return true;
}

USCHED_EXPORT int usched_join(usched_task_t *t)
{
    if (t == &called_task) return 0; /* run as a call by usched_spawn_call: finished */
    if (!t) return usched__error(EINVAL, "join: task is NULL");
    if (__atomic_load_n(&t->magic, __ATOMIC_RELAXED) != USCHED_TASK_MAGIC)
        return usched__error(EINVAL, "join: not a live task (joined already, or detached and finished)");
    struct usched__wk *w = usched__self_wk();
    if (w && w->cur == t) return usched__error(EDEADLK, "join: a fiber cannot join itself");
    uint32_t st = atomic_load_explicit(&t->jstate, memory_order_relaxed);
    /* J2: a child that never started and still waits on this CPU is taken
     * first and run inline, with no locked instruction; otherwise the CAS. */
    if (__atomic_load_n(&t->cpu, __ATOMIC_RELAXED) == -1 && !(st & USCHED__J_JOINED) && w && w->cur &&
        t->s == w->s && join_inline(w, t, st))
        return 0;
    do {
        if (st & USCHED__J_JOINED)
            return usched__error(EINVAL, "join: task %llu is detached or joined already",
                                 (unsigned long long)t->id);
    } while (!atomic_compare_exchange_weak_explicit(&t->jstate, &st, st | USCHED__J_JOINED,
                                                    memory_order_acq_rel, memory_order_relaxed)); /* J2 */
    if (st & USCHED__J_DONE) {
        usched__task_free(w, t); /* exited before the join (J5) */
        return 0;
    }
    int result = 0;
    if (w && w->cur) {
        t->joiner = w->cur;
        t->owaiter = NULL; /* the exit reads both (J3) */
        usched__stat_add(&w->stats, USCHED_STAT_blocks, 1);
        usched__block_on(USCHED__TBLK_join, join_arm, t); /* J2: WAIT set once switched out */
    } else {
        struct usched__owaiter ow = {.done = 0, .result = 0};
        usched_t *s = t->s;
        owaiter_link(s, &ow);
        t->owaiter = &ow;
        t->joiner = NULL;
        if (atomic_fetch_or_explicit(&t->jstate, USCHED__J_WAIT, memory_order_acq_rel) & USCHED__J_DONE) {
            atomic_store_explicit(&ow.done, 1, memory_order_relaxed); /* J4: it exited meanwhile */
        }
        while (!atomic_load_explicit(&ow.done, memory_order_acquire))
            usched__futex(&ow.done, FUTEX_WAIT, 0, NULL);
        result = ow.result;
        /* Cancelled waiters were unlinked by destroy, which may have freed s. */
        if (result == 0) owaiter_unlink(s, &ow);
    }
    if (result == 0) usched__task_free(usched__self_wk(), t); /* J5; the joiner may have moved while it waited */
    return result;
}

/* Outside thread: waits until no fiber is alive, or (detect_deadlock) until
 * the scheduler is quiescent with fibers still blocked - those can never
 * finish. Quiescent, three times in a row 50 ms apart: no fiber has a
 * wake-up coming from outside the workers (outside_wakers: an offloaded
 * call in flight, whose pool thread will wake it however long it takes),
 * every worker parked on its futex (one blocked in the I/O poller,
 * PARKED_POLL, is not: a fiber waits for a descriptor), nothing queued, no
 * timer armed. outside_wakers is read first: a waker subtracts only after
 * its wake-up (release), so a 0 read with acquire shows that wake-up's
 * queued fiber and woken worker to the loads after it. Returns 0 or
 * -EDEADLK. */
int usched__wait_live(usched_t *s, bool detect_deadlock)
{
    atomic_fetch_add(&s->life.nwaiting, 1);
    int rc = 0, quiet = 0;
    for (;;) {
        uint32_t seq = atomic_load(&s->life.seq);
        if (atomic_load(&s->life.live) == 0) break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        usched__futex(&s->life.seq, FUTEX_WAIT, seq, &ts);
        if (!detect_deadlock || atomic_load(&s->life.live) == 0) continue;
        bool all_parked = atomic_load_explicit(&s->life.outside_wakers, memory_order_acquire) == 0 &&
                          atomic_load(&s->gq.n) == 0;
        for (int c = 0; c < s->ncpus && all_parked; c++) {
            struct usched__wk *w = s->wk[c];
            if (atomic_load(&w->state) != WK_PARKED || usched__timers_pending(&w->timers) ||
                atomic_load(&w->inbox_n) || usched__ring_len(&w->ring) || atomic_load(&w->nbound))
                all_parked = false;
        }
        quiet = all_parked ? quiet + 1 : 0;
        if (quiet >= 3) {
            rc = -EDEADLK;
            break;
        }
    }
    atomic_fetch_sub(&s->life.nwaiting, 1);
    return rc;
}
