/*
 * The scheduler's state (struct usched), which every room of src/core reads,
 * and the counters' helpers. The fiber is core/task.h's, the worker
 * core/worker.h's; each room's functions are in its own header (the map of
 * the rooms and their floors: docs/architecture.md):
 *   sched.h   the worker loop, and the blocking interface for src/sync
 *   local.h   the pick among a worker's own queues
 *   steal.h   the idle path: global queue, steal, spin, then park
 *   park.h    the park protocol (P1-P4, W1-W3, wakep) and its backends
 *   self.h    the calling thread's worker
 *   queue.h   queue operations: global queue, run queue, next slot, inbox
 *   place.h   the placement referee: asks the policy, checks and counts
 *   idle.h    the idle-CPU and idle-core masks (one owner of the rule)
 *   fiber.h   the fiber lifecycle as the scheduler's lifecycle sees it
 *   retire.h  a fiber's exit, the release of its descriptor, the live count
 *   pin.h     pinning workers (at start, and the monitor's widening)
 *   monitor.h the stall monitor (docs/monitor.md)
 *   registry.h, timer.h, stack.h, desc.h, fctx.h, knobs.h, trace.h,
 *   schedtrace.h, statshm.h, preempt.h: their own rooms
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
#include "core/knobs.h"
#include "core/self.h"
#include "core/task.h"
#include "core/trace.h"
#include "core/worker.h"
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

struct usched_pol_ctx {
    struct usched *s;
};

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
    bool fork_next;    /* USCHED_OPS_FORK_NEXT: a fiber's spawn goes to its next slot (fiber.c) */
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

    /* ---- packing (monitor.c, K1-K5): the monitor writes it when a worker
     * is packed or unpacked, placement reads it at every decision ---- */
    struct {
        _Atomic uint32_t n; /* workers packed */
    } pack __attribute__((aligned(64)));

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

/* A descriptor's run times and policy state, zeroed before the policy
 * first sees the fiber: at spawn on the general path (fiber.c), or at its
 * first run when the short path left them (fresh; sched.c). Constant
 * sizes, written inline (the default policy's state is 32 bytes, and the
 * whole 64 would touch another line). */
static inline void usched__task_fresh_zero(const struct usched *s, struct usched_task *t)
{
    t->woke_ns = t->ran_ns = t->last_ran_ns = t->wake_ns = 0;
    if (s->ops->task_state_size <= 32)
        __builtin_memset(t->pstate, 0, 32);
    else
        __builtin_memset(t->pstate, 0, sizeof t->pstate);
    t->fresh = 0;
}

#endif
