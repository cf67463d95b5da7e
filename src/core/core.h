/*
 * Core runtime internals shared by the files of src/core (sched.c, api.c,
 * polctx.c, timer.c). See sched.c for the design.
 */
#ifndef USCHED_CORE_H
#define USCHED_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/fctx.h"
#include "core/knobs.h"
#include "core/sched.h"
#include "core/stack.h"
#include "rq/rq.h"
#include "stats/stats.h"
#include "topo/topo.h"
#include "usched.h"
#include "usched/policy.h"

/* ops->flags bit: the policy reads run time since wake-up (usched_pol_cpu_current),
 * so the core timestamps wake-ups and switches (costs a clock read each). */
#ifndef USCHED_OPS_TRACK_TIME
#define USCHED_OPS_TRACK_TIME 0x4u
#endif

#define USCHED_DEFAULT_STACK (64 * 1024)
#define USCHED_GLOBAL_EVERY 61 /* picks between global-queue checks (Go's 61) */
#define USCHED_STACK_CACHE 1024 /* stacks kept per CPU: a batch of 1000 spawns recycles locally */
#define USCHED_TASK_MAGIC 0x75736368u /* "usch": a live task descriptor */
#define USCHED_TASK_DEAD 0x64656164u  /* "dead": released descriptor */

/* Worker state word (also the futex word the worker parks on). */
enum { WK_RUNNING = 0, WK_SPINNING = 1, WK_PARKED = 2 };

/* What the host does after a fiber switched back to it. */
enum { POST_NONE = 0, POST_YIELD, POST_BLOCK, POST_EXIT };

struct usched_pol_ctx {
    struct usched *s;
};

/* An outside thread blocked in usched_join / usched_wait. */
struct usched__owaiter {
    _Atomic uint32_t done; /* futex word: 0 waiting, 1 released */
    int result;            /* 0 or -ECANCELED */
    struct usched__owaiter *next, *prev; /* s->owaiters list (under s->lock) */
    int linked;                   /* on s->owaiters (under s->lock) */
};

/*
 * A fiber. The descriptor lives at the top of the fiber's own stack (no
 * separate allocation); it is released when the fiber has exited and, for a
 * joinable fiber, has been joined (refs drops to zero).
 */
struct usched_task {
    usched__mpsc_node_t node;   /* inbox link: any CPU pushes, owner pops */
    usched__fctx_t fctx;        /* owner: the worker running it */
    usched_t *s;
    void (*fn)(void *);
    void *arg;
    uint64_t id;
    int cpu;                    /* last CPU it ran on (-1: never ran) */
    int bound;                  /* bound CPU, -1 if free (immutable) */
    uint32_t magic;             /* USCHED_TASK_MAGIC while alive */
    _Atomic uint32_t refs;      /* exit + join references */
    _Atomic uint32_t joined;    /* set by the first join */
    _Atomic uint32_t jlock;     /* protects done, joiner, owaiter */
    uint32_t done;              /* under jlock */
    struct usched_task *joiner; /* fiber waiting in join (under jlock) */
    struct usched__owaiter *owaiter; /* outside thread waiting (under jlock) */
    struct usched_task *qnext;  /* global queue / bound list link */
    struct usched_task *link;   /* wait-queue link (owner: the wait queue) */
    void *slot;                 /* blocking primitives' word */
    usched__stack_t stack;
    uint64_t woke_ns, ran_ns, last_ran_ns, run_start_ns;
    uint64_t pstate[8] __attribute__((aligned(16))); /* policy per-task state */
};

/* Per-CPU state. Cache-line aligned; fields grouped by who writes them. */
struct usched__wk {
    /* ---- queues (see rq.h for their own protocols) ---- */
    usched__ring_spmc_t ring;            /* owner push/pop, thieves steal */
    usched__inbox_mpsc_t inbox;          /* any CPU pushes, owner pops */
    /* next slot: owner exchanges; thieves CAS it away on their last pass */
    struct usched_task *_Atomic next __attribute__((aligned(64)));
    _Atomic int32_t inbox_n;             /* pushers add, owner subtracts */
    _Atomic uint32_t nbound;             /* owner writes, anyone reads */
    _Atomic(struct usched_task *) current; /* owner writes, policies read */
    _Atomic uint64_t cur_id;             /* id of `current` (owner writes) */
    _Atomic uint64_t cur_start_ns;       /* TRACK_TIME: when the current fiber started running */
    _Atomic uint64_t cur_ran_ns;         /* its run time since wake before that */

    /* ---- parking: state is the futex word (any CPU CASes PARKED->RUNNING) */
    _Atomic uint32_t state __attribute__((aligned(64)));

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
    uint32_t next_runs;
    uint32_t rng;
    int cpu;
    int idle;                            /* published idle in the masks */
    int handoff;                         /* handed a fiber to another CPU since it last idled */
    uint64_t id_next, id_end;            /* block of fiber ids */
    struct usched_task *spill[RQ_RING_SIZE / 2 + 1]; /* ring overflow batch */
    usched__stack_t cache[USCHED_STACK_CACHE];
    int ncache;
    usched__fctx_t host;
    struct usched *s;
    pthread_t thread;
    int thread_started;

    /* ---- timers: heap under tlock (owner fires, any thread cancels) ---- */
    _Atomic uint32_t tlock __attribute__((aligned(64)));
    _Atomic uint32_t ntimers;
    usched__timer_t **theap;
    int tcap;

    usched__stats_t stats __attribute__((aligned(64))); /* owner writes */
    void *pol_state;
};

struct usched {
    /* configuration (before start) */
    char *policy_name;
    char *topology;
    char *cpus;
    size_t stack_size;
    int pin; /* -1 auto (live machine only), 0, 1 */
    usched__knobs_t knobs;

    /* set at start, then read-only */
    const struct usched_ops *ops;
    usched__topo_t *topo;
    int ncpus;
    struct usched__wk **wk;
    usched__idlemask_t idle_cpus;  /* a bit per idle CPU */
    usched__idlemask_t idle_cores; /* the bits of every CPU of a fully idle core */
    struct usched_pol_ctx pol;
    void *pol_priv;
    _Atomic int started;
    _Atomic int stopping;

    /* global queue: outside spawns, overflow, and the shared run queue */
    pthread_mutex_t gq_lock __attribute__((aligned(64)));
    struct usched_task *gq_head, *gq_tail; /* under gq_lock */
    _Atomic uint32_t gq_n;                 /* written under gq_lock, read by all */

    _Atomic uint32_t nspinning __attribute__((aligned(64)));
    _Atomic uint32_t nparked;   /* workers in PARKED (see find_work) */
    _Atomic uint32_t waking;    /* a wakep wake-up is in flight */
    _Atomic uint64_t live __attribute__((aligned(64))); /* fibers not yet exited */
    _Atomic uint32_t live_seq;  /* futex: bumped when live drops to 0 */
    _Atomic uint32_t nwaiting;  /* outside threads in usched_wait */
    _Atomic uint64_t next_id_block;

    pthread_mutex_t lock; /* owaiters, warnings */
    struct usched__owaiter *owaiters;
    int warned_fallback;
    usched__stats_t outside_stats; /* outside threads: atomic adds */
};

/* Worker of the calling thread (NULL outside workers). Never inlined, so a
 * fiber that migrated between threads re-reads the thread pointer. */
struct usched__wk *usched__self_wk(void);

/* Policy registry (src/policy). */
const struct usched_ops *usched__policy_find(const char *name);
int usched__policy_count(void);
const struct usched_ops *usched__policy_at(int i);

/* Timers (timer.c), called by the owning worker. */
void usched__timers_init(struct usched__wk *w);
void usched__timers_fini(struct usched__wk *w);
void usched__timers_run(struct usched__wk *w, uint64_t now);
uint64_t usched__timers_next(struct usched__wk *w); /* UINT64_MAX if none */

/* Idle masks (sched.c). */
void usched__mark_idle(struct usched *s, int cpu);
void usched__mark_busy(struct usched *s, int cpu);

/* A full (StoreLoad) fence for the Dekker-style protocols (parking P2,
 * waking W2). TSan does not model fences, so under TSan it is a seq_cst
 * read-modify-write, which TSan sees as synchronisation. */
#if !defined(__SANITIZE_THREAD__) && defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define __SANITIZE_THREAD__ 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
extern _Atomic uint32_t usched__fence_word;
#define usched__full_fence() atomic_fetch_add_explicit(&usched__fence_word, 0, memory_order_seq_cst)
#else
#define usched__full_fence() atomic_thread_fence(memory_order_seq_cst)
#endif

static inline void usched__spin_lock(_Atomic uint32_t *l)
{
    for (;;) {
        if (!atomic_exchange_explicit(l, 1, memory_order_acquire)) return;
        while (atomic_load_explicit(l, memory_order_relaxed)) usched__cpu_relax();
    }
}

static inline void usched__spin_unlock(_Atomic uint32_t *l)
{
    atomic_store_explicit(l, 0, memory_order_release);
}

#endif
