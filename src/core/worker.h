/*
 * A worker: one per CPU of a scheduler (struct usched__wk), its queues, its
 * parking word and what only it touches. Fields are grouped by who writes
 * them (each group says so).
 */
#ifndef USCHED_CORE_WORKER_H
#define USCHED_CORE_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/desc.h"
#include "core/fctx.h"
#include "core/stack.h"
#include "core/task.h"
#include "core/timer.h"
#include "core/trace.h"
#include "rq/rq.h"
#include "stats/stats.h"

/* Worker state word (also the futex word the worker parks on). */
enum { WK_RUNNING = 0, WK_PARKED = 2,
       WK_PARKED_POLL = 3 /* parked in the I/O backend (P1', park.c) */ };

/* Why the running fiber left its CPU, which says what its worker's host
 * context does with it (sched.c, finish_prev). A preemption is a yield the
 * fiber did not ask for. */
enum { POST_NONE = 0, POST_YIELD, POST_BLOCK, POST_EXIT, POST_PREEMPT };

/* Spare fibers a worker keeps (descriptor and stack together): enough for
 * a batch of 1,000 children spawned and then joined (usched bench spawn),
 * whose spawns then take no stack from the stack cache and return none to
 * it. A worker out of local work keeps USCHED_SPARES_IDLE and gives the
 * rest to its caches (sched.c, usched__spares_trim), whose overflow goes to
 * the pool, whose pages a parking worker trims (park.c). */
#define USCHED_SPARES 1024
#define USCHED_SPARES_IDLE 64

/* A thief's last look at one victim's ring (steal.c, the cheap-victim
 * rule): owner only, on the thief's side. */
struct usched__vlook {
    uint32_t head, tail; /* the ring's ends at the look */
    uint32_t cost;       /* ns per fiber its owner took, last measured (0: not yet) */
    uint64_t at;         /* when */
    uint64_t changed;    /* the last look that saw the ends move */
    uint64_t next_look;  /* no look before (V4) */
    uint32_t backoff;    /* ns between looks while it is left (V4) */
};

/* Why a thief's last pass left work where it was (usched__wk.deferred). */
#define USCHED__LEFT_IDLE_CORE 1 /* to a whole idle core (steal.c, D1-D4) */
#define USCHED__LEFT_CHEAP 2     /* to a cheap victim's owner (V1-V5) */
#define USCHED__NAP_MIN_NS 20000   /* V5: a shorter pause is yielded, not slept */
#define USCHED__NAP_MAX_NS 1000000 /* V5: the longest sleep (a look pause may be 64 x 50 ms) */

/* Per-CPU state, cache-line aligned. Fields are grouped by who writes them,
 * each group on lines of its own (asserted below), so that a cross-CPU
 * wake-up (inbox, inbox_n, state) never bounces the owner's hot lines. */
struct usched__wk {
    /* ---- queues (see rq.h for their own protocols) ---- */
    usched__ring_spmc_t ring;            /* owner push/pop, thieves steal */
    usched__inbox_mpsc_t inbox;          /* any CPU pushes, owner pops */
    _Atomic int32_t inbox_n __attribute__((aligned(64))); /* pushers add, owner subtracts */
    /* The inbox's consumer lock: the owner takes it around a drain, the
     * monitor around moving a stalled CPU's inbox away (M4, monitor.c). */
    _Atomic uint32_t inbox_lock;

    /* ---- owner writes, others read (policies, thieves) ---- */
    /* next slot: owner puts and takes (N1-N4, queue.h); thieves and the
     * monitor CAS it away (usched__wk_next_steal) */
    struct usched_task *_Atomic next __attribute__((aligned(64)));
    _Atomic uint32_t next_owner;         /* N1: 1 while the owner works on `next` without a lock */
    _Atomic uint32_t nbound;             /* owner writes, anyone reads */
    /* Scheduling points (monitor.c, S1-S2): odd from the start of a switch
     * (leave) until the context switched to has finished the fiber that left
     * (finish_prev). Owner writes (relaxed), the monitor reads. */
    _Atomic uint32_t sched_seq;
    _Atomic(struct usched_task *) current; /* owner writes, policies read */
    _Atomic uint64_t cur_id;             /* id of `current` (owner writes) */
    _Atomic uint64_t cur_start_ns;       /* time tracking: when the current fiber started running */
    _Atomic uint64_t cur_ran_ns;         /* its run time since wake before that */
    _Atomic uint32_t next_spawn;         /* the last next-slot put was a spawn (a hint, relaxed) */

    /* ---- parking: state is the futex word (any CPU CASes PARKED->RUNNING) */
    _Atomic uint32_t state __attribute__((aligned(64)));
    /* Contention (monitor.c, C1-C4): 1 while the kernel keeps this worker
     * waiting for its CPU. The monitor writes it, anyone reads it (relaxed:
     * a hint for spinning and placement, never needed for correctness). */
    _Atomic uint32_t contended;
    /* Packing (monitor.c, K1-K5): 1 while the worker is contended and the
     * uncontended ones have room for all the work; pack_to is the CPU that
     * stands in for it. The monitor writes both, anyone reads them
     * (relaxed: pack_to is stored before packed, and any CPU of s is a
     * valid stand-in). */
    _Atomic uint32_t packed;
    _Atomic int32_t pack_to;
    /* 1 while the monitor sees this worker stalled (M5; steal.c, V7): the
     * monitor writes it, thieves read it (relaxed; stored before M5's
     * wakep, whose fence orders it before the woken thief's looks). */
    _Atomic uint32_t stalled;
    _Atomic int32_t tid; /* the worker's thread id: written once by it, read by the monitor */
    _Atomic uint32_t next_thief; /* N2: 1 while a thief or the monitor takes `next` (queue.c) */

    /* ---- owner only ---- */
    struct usched_task *bound_head __attribute__((aligned(64)));
    struct usched_task *bound_tail;
    struct usched_task *cur;
    struct usched_task *prev;            /* switched out, awaiting finish_prev */
    int post;
    void (*post_fn)(void *);
    void *post_arg;
    uint32_t tick;
    uint32_t tpoll;                      /* timer poll counter */
    uint32_t ypoll, yevery;              /* lone yields since the last look, and between looks (sched.c, yield_look) */
    uint32_t next_runs;
    uint32_t bound_behind;               /* a bound fiber was preempted (or demoted from the
                                            next slot) onto the bound list: it waits for the
                                            ring (local.h) */
    uint32_t rng;
    uint32_t lat_rng;                    /* wake-up latency sampling (trace.h): its random gaps, */
    uint32_t lat_left;                   /* and the wake-ups left until the next sample */
    int cpu;
    int io_home;                         /* while src/io wakes an fd's waiters: the fd's home CPU
                                          * (io_poller=percpu), else -1; owner only */
    int idle;                            /* published idle in the masks */
    int handoff;                         /* handed a fiber to another CPU since it last idled */
    int deferred;                        /* its last steal left work to a whole idle core (steal.c, D1-D4:
                                            USCHED__LEFT_IDLE_CORE), or to a cheap victim's owner
                                            (V1-V5: USCHED__LEFT_CHEAP) */
    struct usched__vlook *vlook;         /* its last look at each CPU's ring (NULL: no stealing) */
    int steal_v;                         /* its last steal: from which CPU, how many fibers, when */
    uint32_t steal_n;                    /* (0: measured already; steal.c, V1) */
    uint64_t steal_at;
    int spawn_woke;                      /* a spawn by the running fiber, since it was switched in,
                                            called wakep for the ring (place.c) */
    /* Above 0 while the core runs a policy's code for the running fiber
     * (place.c): not a preemption point (preempt.c). Owner only; the
     * preemption signal's handler reads it on the same thread. */
    _Atomic uint32_t nopreempt;
    uint64_t id_next, id_end;            /* block of fiber ids */
    uint64_t live_credit;                /* counted in s->life.live ahead (fiber.c, L1-L4) */
    struct usched_task *spill[RQ_RING_SIZE / 2]; /* ring overflow batch */
    usched__stack_cache_t stacks;
    usched__desc_cache_t descs;
    /* Descriptors freed here that kept their stacks (retire.h, usched__task_free):
     * the next spawns here take them whole, past both caches. */
    int nspare;
    struct usched_task *spare[USCHED_SPARES];
    usched__fctx_t host;
    struct usched *s;
    pthread_t thread;
    int thread_started;

    /* ---- timers: heap under its lock (owner fires, any thread cancels) ---- */
    usched__timers_t timers __attribute__((aligned(64)));

    usched__stats_t stats __attribute__((aligned(64))); /* owner writes */
    usched__lat_t lat;       /* wake-up latency of the fibers it ran (owner writes) */
    struct usched__tbuf tbuf; /* trace events (owner only; trace.h) */
    void *pol_state; /* ops->cpu_state_size bytes, cache-line aligned */
};

/* Lines written by other CPUs never hold owner-written fields. */
#define WK_LINE(f) (offsetof(struct usched__wk, f) / 64)
_Static_assert(WK_LINE(inbox_n) != WK_LINE(current) && WK_LINE(inbox_n) != WK_LINE(inbox.tail),
               "usched__wk: inbox_n shares a line with owner-written fields");
_Static_assert(WK_LINE(state) != WK_LINE(current) && WK_LINE(state) != WK_LINE(bound_head),
               "usched__wk: the parking state shares a line with owner-written fields");
_Static_assert(WK_LINE(next_thief) == WK_LINE(state) && WK_LINE(next_owner) == WK_LINE(next),
               "usched__wk: next_thief is written by thieves, next_owner by the owner");
_Static_assert(WK_LINE(timers) != WK_LINE(thread_started) && WK_LINE(timers) != WK_LINE(stats),
               "usched__wk: the timer lock shares a line with owner-only fields");
_Static_assert(WK_LINE(next) == WK_LINE(cur_ran_ns) && WK_LINE(next) != WK_LINE(inbox_n),
               "usched__wk: the owner-published fields must share one line of their own");
#undef WK_LINE

/* Contention (monitor.c, C1-C4, writes it): the worker's CPU is contended;
 * it parks without spinning, stays out of the idle masks, and wakep passes
 * it over. */
static inline bool usched__wk_contended(const struct usched__wk *w)
{
    return atomic_load_explicit(&w->contended, memory_order_relaxed) != 0;
}

/* Packing (monitor.c, K1-K5): w takes no new work; placements go to
 * usched__wk_pack_to(w) instead. */
static inline bool usched__wk_packed(const struct usched__wk *w)
{
    return atomic_load_explicit(&w->packed, memory_order_relaxed) != 0;
}

static inline int usched__wk_pack_to(const struct usched__wk *w)
{
    return atomic_load_explicit(&w->pack_to, memory_order_relaxed);
}

/* Wake-up latency (trace.h): is this wake-up, decided on w (NULL: an outside
 * thread, always measured), one of the 1 in USCHED__LAT_EVERY measured? A
 * countdown on the owner's own state, reloaded after each sample with a
 * random gap of 1 to 2 * USCHED__LAT_EVERY - 1 wake-ups (xorshift32; mean
 * USCHED__LAT_EVERY), so a regular pattern of wake-ups (a ping-pong pair) is
 * not sampled in step with it; a wake-up that is not sampled costs a
 * decrement. The countdown starts at 1 (api.c): the first wake-up a CPU
 * decides is measured, so a run of a few hundred wake-ups spread over many
 * CPUs still has samples. */
static inline void usched__lat_reload(struct usched__wk *w)
{
    uint32_t x = w->lat_rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    w->lat_rng = x;
    w->lat_left = 1 + x % (2 * USCHED__LAT_EVERY - 1);
}

static inline bool usched__lat_sample(struct usched__wk *w)
{
    if (!w) return true;
    if (__builtin_expect(--w->lat_left != 0, 1)) return false;
    usched__lat_reload(w);
    return true;
}

#endif
