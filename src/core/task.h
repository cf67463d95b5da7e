/*
 * A fiber's descriptor (struct usched_task) and its join state: what every
 * room that queues, runs, wakes or retires a fiber reads. Written by
 * spawn (fiber.c), the worker running it (sched.c), its wakers (place.c)
 * and its exit (retire.c); each field says who.
 */
#ifndef USCHED_CORE_TASK_H
#define USCHED_CORE_TASK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/fctx.h"
#include "core/stack.h"
#include "rq/rq.h"
#include "usched.h"

#define USCHED_TASK_MAGIC 0x75736368u /* "usch": a live task descriptor */
#define USCHED_TASK_DEAD 0x64656164u  /* "dead": released descriptor */
#define USCHED_TASK_CALLED 0x63616c6cu /* "call": the handle of a child run as a call (fiber.c) */

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
    uint8_t fresh;              /* run times and policy state not yet zeroed: a spawn's short
                                   path leaves them to the first run (sched.c, first_run), so a
                                   child joined inline writes one line of its descriptor */
    struct usched_task *joiner; /* fiber waiting in join: both written (one NULL) before */
    struct usched__owaiter *owaiter; /* USCHED__J_WAIT is set, read only after it (J2, J3) */
    int bound;                  /* bound CPU, -1 if free (immutable) */
    _Atomic uint32_t in_gq;     /* on the global queue: written under gq_lock,
                                   read relaxed by a joiner (a hint) */
    usched_t *s;
    void (*fn)(void *);         /* on the join line too: an inline join reads that line only */
    void *arg;
    /* ---- written at spawn (spawn() writes these lines field by field, not
     * with a memset of the whole descriptor: a batch of spawns then writes
     * three lines per child, not five; its short path, one and a word) ---- */
    uint64_t id;
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
} __attribute__((aligned(64))); /* the join line is a cache line */
_Static_assert(offsetof(struct usched_task, arg) + sizeof(void *) <= 64,
               "a fiber's join line must fit in one cache line");
_Static_assert(offsetof(struct usched_task, pstate) + 32 <= 192,
               "a spawn under the default policy (32 bytes of state) must write only a "
               "descriptor's first three cache lines");

#endif
