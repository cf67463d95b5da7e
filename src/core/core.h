/*
 * Core runtime internals shared by the rooms of src/core. See sched.c for the
 * design, docs/architecture.md for the map and the floors:
 *   sched.c   the worker loop: pick, switch, finish the fiber that left
 *   local.h   the pick among a worker's own queues
 *   steal.c   the idle path: global queue, steal, spin, then park
 *   park.c    the park protocol (P1-P4, W1-W3, wakep) and its backends
 *   self.c    the calling thread's worker
 *   queue.h   queue operations: global queue, run queue, next slot, inbox
 *   place.c   the placement referee: asks the policy, checks and counts
 *   idle.c    the idle-CPU and idle-core masks (one owner of the rule)
 *   fiber.c   the fiber lifecycle: spawn, exit, join, wait
 *   polctx.c  what a policy may read (include/usched/policy.h)
 *   api.c     the scheduler lifecycle: create, set, start, destroy
 *   pin.c     pinning workers (at start, and the monitor's widening)
 *   monitor.c the stall monitor: a worker stuck in one fiber (docs/monitor.md)
 *   timer.c, stack.c, fctx.c, knobs.c, registry.c: their own headers
 */
#ifndef USCHED_CORE_H
#define USCHED_CORE_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "base/atomic.h"
#include "base/futex.h"
#include "core/desc.h"
#include "core/fctx.h"
#include "core/knobs.h"
#include "core/sched.h"
#include "core/self.h"
#include "core/stack.h"
#include "core/timer.h"
#include "core/trace.h"
#include "rq/rq.h"
#include "stats/stats.h"
#include "topo/topo.h"
#include "usched.h"
#include "usched/policy.h"

#define USCHED_DEFAULT_STACK (64 * 1024)
#define USCHED_GLOBAL_EVERY 61 /* picks between global-queue checks (Go's 61) */
/* Picks between FIFO pops of the ring (the oldest fiber instead of the
 * newest): the bound on how long the LIFO owner end can pass over a fiber
 * while newer ones keep arriving. Not tuned; prime and apart from 61 so the
 * two checks rarely fall on the same pick. */
#define USCHED_FIFO_EVERY 31
#define USCHED_TASK_MAGIC 0x75736368u /* "usch": a live task descriptor */
#define USCHED_TASK_DEAD 0x64656164u  /* "dead": released descriptor */

/* Worker state word (also the futex word the worker parks on). */
enum { WK_RUNNING = 0, WK_PARKED = 2,
       WK_PARKED_POLL = 3 /* parked in the I/O backend (P1', park.c) */ };

/* What the host does after a fiber switched back to it. */
/* why the running fiber leaves its CPU (a preemption is a yield the fiber did not ask for) */
enum { POST_NONE = 0, POST_YIELD, POST_BLOCK, POST_EXIT, POST_PREEMPT };

struct usched_pol_ctx {
    struct usched *s;
};

/* An outside thread blocked in usched_join / usched_wait. */
struct usched__owaiter {
    _Atomic uint32_t done; /* futex word: 0 waiting, 1 released */
    int result;            /* 0 or -ECANCELED */
    struct usched__owaiter *next, *prev; /* s->out.owaiters list (under s->out.lock) */
    int linked;                   /* on s->out.owaiters (under s->out.lock) */
};

/* A fiber's join state (struct usched_task.jstate; fiber.c, J1-J5). */
enum {
    USCHED__J_JOINED = 1u,   /* a join has begun (or the fiber is detached) */
    USCHED__J_DONE = 2u,     /* the fiber has exited */
    USCHED__J_WAIT = 4u,     /* a joiner waits: joiner or owaiter is set */
    USCHED__J_DETACHED = 8u, /* spawned without a handle: its exit frees it */
};

/*
 * A fiber. The descriptor comes from the descriptor pool (desc.c); its stack
 * is reserved at spawn and its context made when it first runs (sched.c,
 * first_run). It is released when the fiber has exited and, for a joinable
 * fiber, has been joined (by the exit or the joiner, whichever jstate names:
 * fiber.c, J5).
 */
struct usched_task {
    /* ---- the join line: what an exit and its join touch, and the CPU a
     * thief writes when it starts the fiber, together on the first cache
     * line, so that a child run elsewhere moves this one line to the thief
     * and back to the joiner (the rest is read-only after spawn, or written
     * only by the CPU that runs it) ---- */
    uint32_t magic;             /* USCHED_TASK_MAGIC while alive */
    _Atomic uint32_t jstate;    /* USCHED__J_* bits: the join protocol (fiber.c, J1-J5) */
    int cpu;                    /* last CPU it ran on (-1: never ran) */
    uint8_t reuse_left;         /* sync answer reuses left (place.c; 0 at spawn: memo_* unset) */
    struct usched_task *joiner; /* fiber waiting in join: written before USCHED__J_WAIT is set */
    struct usched__owaiter *owaiter; /* outside thread waiting: likewise */
    uint64_t id;
    int bound;                  /* bound CPU, -1 if free (immutable) */
    _Atomic uint32_t in_gq;     /* on the global queue: written under gq_lock,
                                   read relaxed by a joiner (a hint) */
    usched_t *s;
    /* ---- written at spawn (spawn() writes these lines field by field, not
     * with a memset of the whole descriptor: a batch of spawns then writes
     * three lines per child, not five) ---- */
    void (*fn)(void *);
    void *arg;
    usched__stack_t stack;
    uint64_t woke_ns, ran_ns, last_ran_ns; /* run times (USCHED_OPS_TRACK_TIME), read by the policy */
    uint64_t wake_ns;           /* wake-up latency: when usched__wake placed it, 0 once it ran */
    uint64_t pstate[8] __attribute__((aligned(16))); /* policy per-task state: its first
                                                         task_state_size bytes zeroed at spawn */
    /* ---- written before they are read, never at spawn ---- */
    uint64_t run_start_ns;      /* prologue, with time tracking */
    usched__mpsc_node_t node;   /* inbox link: any CPU pushes, owner pops */
    struct usched_task *qnext;  /* global queue / bound list link */
    struct usched_task *link;   /* wait-queue link (owner: the wait queue) */
    uint8_t blk;                /* what it is about to block on (USCHED__TBLK_*, trace.h); owner */
    /* Preemption (preempt.c): usched_preempt_off's nesting count, and a
     * preemption refused while it was above 0 (taken at usched_preempt_on).
     * Written by the fiber, read by the preemption signal's handler on the
     * same thread. */
    _Atomic uint32_t preempt_off;
    _Atomic uint32_t preempt_owed;
    /* ---- the sync hand-off reuse (place.c, USCHED_OPS_SYNC_REUSE): written
     * by the CPU deciding a wake-up of this fiber (memo_*) or by this fiber
     * (last_wakee); read only after reuse_left > 0, or compared with a live
     * fiber's id (a previous life's value cannot match: see place.c) ---- */
    uint64_t memo_waker;        /* id of the waker the policy answered SYNC for */
    uint32_t memo_gen;          /* knob generation of that answer */
    uint8_t memo_sync;          /* that wake-up had the SYNC hint (reused only for the same) */
    uint64_t last_wakee;        /* id of the fiber this one last woke */
    usched__fctx_t fctx;        /* made at first run (sched.c, first_run); owner: the worker running it */
};
_Static_assert(offsetof(struct usched_task, s) + sizeof(usched_t *) <= 64,
               "a fiber's join line must fit in one cache line");
_Static_assert(offsetof(struct usched_task, pstate) + 32 <= 192,
               "a spawn under the default policy (32 bytes of state) must write only a "
               "descriptor's first three cache lines");

/* Per-CPU state, cache-line aligned. Fields are grouped by who writes them,
 * each group on lines of its own (asserted below), so that a cross-CPU
 * wake-up (inbox, inbox_n, state) never bounces the owner's hot lines. */
/* Spare fibers a worker keeps (descriptor and stack together): enough for
 * the children of a fork-join node (fib's 2, skynet's 10), joined before
 * the next are spawned; a bound of 16 stacks per CPU beyond the caches. */
#define USCHED_SPARES 16

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
    int deferred;                        /* its last steal left work to a whole idle core (steal.c, D1-D4) */
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

/*
 * A scheduler. Its state is grouped by who may write it; each group says
 * so. A room that needs a group's field reads the group's comment first.
 */
struct usched {
    /* ---- configuration: usched_set writes it before start (under no lock:
     * the caller owns the scheduler until usched_start), read-only after ---- */
    struct {
        char *policy;
        char *topology;
        char *cpus;
        size_t stack_size;
        int pin; /* -1 auto (live machine only), 0, 1 */
        /* Where the monitor reads run delays: NULL for each worker's
         * /proc/self/task/TID/schedstat; tests point it at a directory holding
         * one captured schedstat line per CPU, named by the CPU (monitor.c). */
        const char *schedstat_dir;
        int emulate; /* 1: SMT emulation (docs/emulation.md) */
    } cfg;
    /* Knobs: any thread, at any time, through usched_set (knobs.h: each
     * knob one atomic word, with a generation). */
    usched__knobs_t knobs;

    /* ---- the frame: written by usched_start before the workers start,
     * read-only after (the idle masks' bits are idle.c's, below) ---- */
    const struct usched_ops *ops;
    usched__topo_t *topo;
    int ncpus;
    int *emu_os;   /* [cpu] real CPU under emulation, NULL otherwise */
    struct usched__wk **wk;
    /* Their bits are written by idle.c only (the one owner of the rule). */
    usched__idlemask_t idle_cpus;  /* a bit per idle CPU */
    usched__idlemask_t idle_cores; /* the bits of every CPU of a fully idle core */
    struct usched_pol_ctx pol;
    void *pol_priv;
    bool track_time;   /* USCHED_OPS_TRACK_TIME: keep run times */
    bool yield_shared; /* USCHED_OPS_SHARED_RQ: a yield requeues on the global queue */
    bool next_asym;    /* membarrier registered: owners touch their next slot lock-free (N1-N4) */
    bool pol_steals;   /* idle CPUs may steal (more than one CPU, no NO_STEAL or SHARED_RQ) */
    bool smt_rule;     /* USCHED_OPS_SMT_RULE on an SMT topology (idle.c) */
    bool smt;          /* the topology has SMT (a core of more than one CPU) */
    bool tracing;      /* trace events are recorded (trace.h): set before the workers start */
    bool pinned;       /* each worker pinned to its CPU at start (pin.c) */
    usched__fpmode_t fpmode; /* every new fiber's FP modes: usched_start's caller's */
    /* The lifecycle (api.c): started by usched_start, stopping by
     * usched_destroy; any thread reads them. */
    _Atomic int started;
    _Atomic int stopping;

    /* ---- the global queue (queue.c): outside spawns, overflow, the shared
     * run queue, and the monitor's moves; any thread, under its lock ---- */
    struct {
        pthread_mutex_t lock;
        struct usched_task *head, *tail; /* under lock */
        _Atomic uint32_t n;              /* written under lock, read by all */
    } gq __attribute__((aligned(64)));

    /* ---- parking (park.c, its steps P1-P4, W1-W3, M1-M3): every worker
     * writes these as it spins, parks and wakes; the monitor sleeps on
     * mon_idle ---- */
    struct {
        _Atomic uint32_t nspinning;
        _Atomic uint32_t nparked;  /* workers in PARKED or PARKED_POLL */
        _Atomic uint32_t mon_idle; /* futex: 1 while the monitor sleeps (monitor.c, M1-M3) */
        _Atomic uint32_t waking;   /* a wakep wake-up is in flight */
    } park __attribute__((aligned(64)));

    /* ---- fibers alive (retire.h and fiber.c, L1-L4): any thread that
     * spawns, any worker that retires a fiber, and usched_wait ---- */
    struct {
        /* fibers not yet exited, plus every worker's live_credit */
        _Atomic uint64_t live;
        _Atomic uint32_t seq;      /* futex: bumped when live drops to 0 */
        _Atomic uint32_t nwaiting; /* outside threads in usched_wait */
        /* Fibers parked on work outside the workers that will wake them:
         * offload jobs in flight (src/io/offload.c, O1-O5). Any thread adds
         * before the fiber parks; the waker subtracts (release) after its
         * wake-up, which the deadlock check reads with acquire (fiber.c,
         * usched__wait_live). */
        _Atomic uint32_t outside_wakers;
        _Atomic uint64_t next_id_block; /* the next block of fiber ids a worker takes */
    } life __attribute__((aligned(64)));

    /* ---- outside threads (fiber.c, api.c): those blocked in usched_join
     * or usched_wait, the warnings, and the counts of decisions made
     * outside any worker ---- */
    struct {
        pthread_mutex_t lock; /* owaiters, warnings */
        struct usched *retired_next; /* the list of schedulers kept after a deadlock (api.c) */
        struct usched__owaiter *owaiters;
        int warned_fallback;
        usched__stats_t stats; /* atomic adds, any thread */
    } out;

    /* The I/O park backend's state (src/io's poller), created by the first
     * I/O wait (CAS); opaque to the core, which calls the backend only
     * through its table (core/park.h) and only while this is set. */
    struct usched__io *_Atomic io;

    /* The stall monitor (monitor.c, docs/monitor.md); NULL before start. */
    struct usched__mon *mon;
    /* Preemption (preempt.c, docs/preempt.md); NULL while it is off. */
    struct usched__preempt *pre;
    /* Tracing (trace.c): configuration, the file opened at start, the
     * outside threads' buffer (under its lock). */
    char *trace_path;
    FILE *trace_f;
    uint64_t trace_t0;
    struct usched__tbuf tout;
    struct usched__tcfg tcfg;  /* trace_mb, trace_mode, ... (trace.h) */
    struct usched__trace *tr;  /* dumps (trace.c); NULL when not tracing */
    int schedtrace_ms; /* the periodic summary's period (monitor.c prints it) */
};

/* Adds n to counter id on the deciding worker w, or on the shared outside
 * counters when the caller is not one of s's workers (w NULL, or a worker
 * of another scheduler). */
static inline void usched__stat_count(struct usched__wk *w, struct usched *s, int id, uint64_t n)
{
    if (w && w->s == s)
        usched__stat_add(&w->stats, id, n);
    else
        usched__stat_add_atomic(&s->out.stats, id, n);
}

static inline void usched__stat_inc(struct usched__wk *w, struct usched *s, int id)
{
    usched__stat_count(w, s, id, 1);
}

/* Wake-up latency (trace.h): is this wake-up, decided on w (NULL: an outside
 * thread, always measured), one of the 1 in USCHED__LAT_EVERY measured? A
 * countdown on the owner's own state, reloaded after each sample with a
 * random gap of 1 to 2 * USCHED__LAT_EVERY - 1 wake-ups (xorshift32; mean
 * USCHED__LAT_EVERY), so a regular pattern of wake-ups (a ping-pong pair) is
 * not sampled in step with it; a wake-up that is not sampled costs a
 * decrement. */
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

/* ---- the rooms' interfaces --------------------------------------------------- */

/* Policy registry (registry.c). */
const struct usched_ops *usched__policy_find(const char *name);
int usched__policy_count(void);
const struct usched_ops *usched__policy_at(int i);

/* Worker loop (sched.c). Waking workers: core/park.h. */
void *usched__worker_main(void *arg);
void usched__fiber_entry(void *arg);

/* Fiber lifecycle (fiber.c). */
int usched__wait_live(struct usched *s, bool detect_deadlock);
void usched__cancel_owaiters(struct usched *s);

/* Placement (place.c). */
/* Places t (a spawn or a wake-up), decided on `self`: the calling thread's
 * worker of s, or NULL from outside (or from a worker of another scheduler). */
void usched__place_on(struct usched *s, struct usched__wk *self, struct usched_task *t, unsigned flags);
void usched__place_fork(struct usched *s, struct usched__wk *self, struct usched_task *t);
void usched__task_info_fill(const struct usched_task *t, struct usched_task_info *ti,
                            uint32_t flags);
/* The home of descriptor fd (io_poller=percpu), asked on me, the waiting
 * fiber's worker: the policy's io_home answer, else the core's rule (the
 * packet's CPU when known, else me's). flags: USCHED_HOME_*; home: its home
 * now, -1 when new. */
int usched__place_home(struct usched *s, struct usched__wk *me, int fd, unsigned flags, int packet, int home);
/* Reports, once per scheduler, a policy answer or query the core could not
 * use (the core then falls back). */
void usched__pol_warn(struct usched *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The stall monitor (monitor.c). start: 0 or -ENOMEM/-EAGAIN; stop joins
 * it (before the workers stop). Its wake-up (W-M) is the park room's. */
int usched__monitor_start(struct usched *s);
void usched__monitor_stop(struct usched *s);
/* Contention (monitor.c, C1-C4): the worker's CPU is contended; it parks
 * without spinning, stays out of the idle masks, and wakep passes it over. */
static inline bool usched__wk_contended(const struct usched__wk *w)
{
    return atomic_load_explicit(&w->contended, memory_order_relaxed) != 0;
}
/* Pins w's thread to its CPU (set NULL) or to the OS CPUs of set (pin.c).
 * 0 or a negative errno. */
int usched__wk_pin(struct usched *s, struct usched__wk *w, const cpu_set_t *set);
/* The CPUs a contended worker w may be widened to (monitor.c C4): its own
 * and those of its LLC that run no worker of s or an uncontended one. Their
 * number (1: its own CPU only), the OS CPUs in *set. */
int usched__wk_widen_set(struct usched *s, const struct usched__wk *w, cpu_set_t *set);
/* The worker of s that runs on the machine's CPU `os` (an OS index, as
 * SO_INCOMING_CPU or sched_getcpu give), -1 when none does or the workers
 * are not pinned (a worker's number then says nothing of where it runs).
 * Emulated: the first worker on that real CPU (pin.c). */
int usched__worker_of_os(struct usched *s, int os);
/* The CPUs of s nearest first from cpu (itself first): siblings, L2, LLC,
 * package, node, machine, the order stealing goes (pin.c). */
const int *usched__cpus_near(struct usched *s, int cpu);
/* Tracing and wake-up latency (trace.c). */
int usched__trace_open(struct usched *s);
void usched__trace_close(struct usched *s);

/* Idle masks (idle.c): the one owner of the idle-CPU and idle-core rule. */
void usched__idle_set(struct usched *s, int cpu);
void usched__idle_clear(struct usched *s, int cpu);
bool usched__idle_claim(struct usched *s, int cpu);
/* cpu has a busy SMT sibling while a whole core of its LLC is idle (the
 * smt_busy_sibling judgement). `gone` (-1: none) is the CPU of a waker that
 * blocks right after the wake-up (a SYNC hand-off): it counts as idle, as
 * it will be when the fiber runs - not a busy sibling, and its core whole
 * idle if its siblings are. Inline for the topologies without SMT, where
 * every sync hand-off asks it. */
bool usched__idle_beside_busy_smt(struct usched *s, int cpu, int gone);
static inline bool usched__idle_beside_busy(struct usched *s, int cpu, int gone)
{
    return s->smt && usched__idle_beside_busy_smt(s, cpu, gone);
}
/* The policy's smt rule applies to the core's own choices (wakep, steal):
 * USCHED_OPS_SMT_RULE, an SMT machine, knob smt set. */
bool usched__idle_smt_rule(struct usched *s);
/* Under the smt rule, when cpu has a busy sibling: a CPU of a whole idle
 * core of cpu's LLC, the one new work should go to instead; else -1. */
int usched__idle_core_instead(struct usched *s, int cpu);
/* Under the smt rule: cpu has a busy sibling (a CPU of its core other than
 * it is not idle). */
bool usched__idle_rule_beside_busy(struct usched *s, int cpu);
/* Another CPU of cpu's core is busy (false on a core of one CPU). */
bool usched__idle_sibling_busy(struct usched *s, int cpu);
/* The worker w found no work (in the masks, the policy's idle) or found
 * work again (out of them, the policy's busy). */
void usched__wk_go_idle(struct usched *s, struct usched__wk *w);
void usched__wk_go_busy(struct usched *s, struct usched__wk *w);

#endif
