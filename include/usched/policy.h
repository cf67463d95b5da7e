/*
 * usched policy interface: the ops table a placement policy implements, and
 * the read-only view of the scheduler a policy may consult.
 *
 * A policy only answers questions ("which CPU should this fiber run on?",
 * "whom should this idle CPU steal from?"). The core owns queues, stacks,
 * parking and correctness, checks every answer, and replaces an answer it
 * cannot use (CPU out of range, a bound fiber placed elsewhere) by its
 * fallback, counting it (`pol_fallback`) and warning once.
 *
 * Threading: every op may be called concurrently on several workers. An op
 * called "on CPU c" runs on the worker thread of c (or, for spawns from
 * outside threads, on that outside thread with waker_cpu == -1). Ops must not
 * block, switch fibers, or call back into the public usched API.
 */
#ifndef USCHED_POLICY_H
#define USCHED_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The scheduler as a policy sees it (opaque). */
typedef struct usched_pol_ctx usched_pol_ctx_t;

/* Topology levels, nearest first (see DESIGN section 4). */
enum usched_level {
    USCHED_LVL_SMT = 0, /* same core */
    USCHED_LVL_L2,
    USCHED_LVL_LLC,
    USCHED_LVL_PACKAGE,
    USCHED_LVL_NUMA,
    USCHED_LVL_MACHINE,
    USCHED_NLEVELS
};

/* select_cpu flags */
#define USCHED_SEL_FORK 0x1u    /* a new fiber */
#define USCHED_SEL_WAKE 0x2u    /* a blocked fiber becomes runnable */
#define USCHED_SEL_SYNC 0x4u    /* the waker is about to block (hand-off) */
#define USCHED_SEL_OUTSIDE 0x8u /* the caller is not a worker (waker_cpu == -1) */
#define USCHED_SEL_YIELD 0x10u  /* re-queueing a fiber that yielded */

/* Why a CPU was chosen: one placement counter each ("place_<name>"). */
#define USCHED_REASON_MAP(X)                                                    \
    X(BOUND, bound, "bound fiber placed on its CPU")                            \
    X(SYNC, sync, "sync wake-up kept on the waker's CPU")                       \
    X(PREV, prev, "placed on the CPU it last ran on")                           \
    X(LOCAL, local, "placed on the waker's or spawner's CPU")                   \
    X(IDLE_CORE, idle_core, "placed on a fully idle core")                      \
    X(IDLE_SMT, idle_smt, "placed on an idle SMT sibling")                      \
    X(IDLE_L2, idle_l2, "placed on an idle CPU sharing the L2")                 \
    X(IDLE_LLC, idle_llc, "placed on an idle CPU sharing the LLC")              \
    X(IDLE_PACKAGE, idle_package, "placed on an idle CPU in the package")       \
    X(IDLE_NUMA, idle_numa, "placed on an idle CPU in the NUMA node")           \
    X(IDLE_MACHINE, idle_machine, "placed on an idle CPU elsewhere")            \
    X(LEAST_LOADED, least_loaded, "placed on the least loaded CPU")             \
    X(STACKED, stacked, "stacked on a busy CPU (no idle CPU found)")            \
    X(SHARED, shared, "put on the shared run queue")                            \
    X(FALLBACK, fallback, "policy answer unusable: core fallback")

enum usched_reason {
#define X(id, name, desc) USCHED_REASON_##id,
    USCHED_REASON_MAP(X)
#undef X
    USCHED_NREASONS
};

/* Where a fiber placed on the local CPU goes (enqueue_local). */
enum usched_slot {
    USCHED_SLOT_TAIL = 0, /* run queue tail (FIFO) */
    USCHED_SLOT_NEXT,     /* next slot: runs next, inherits the time slice */
    USCHED_SLOT_HEAD,     /* run queue head (LIFO-ish; treated as NEXT when unsupported) */
};

/* What a policy knows about a fiber. Grows at the end only. */
struct usched_task_info {
    uint32_t size;        /* sizeof(struct usched_task_info) */
    uint32_t flags;       /* USCHED_SEL_* of the decision in progress */
    uint64_t id;          /* fiber id */
    int prev_cpu;         /* CPU it last ran on, -1 if never ran */
    int bound_cpu;        /* -1 if not bound */
    uint64_t last_ran_ns; /* when it last stopped running (0 if never) */
    uint64_t woke_ns;     /* when it last woke */
    uint64_t ran_ns;      /* run time since it last woke */
    void *pstate;         /* ops->task_state_size bytes of policy state, zeroed at spawn */
    uint64_t reserved[4];
};

/* A select_cpu question. Grows at the end only. */
struct usched_select_args {
    uint32_t size;
    uint32_t flags;     /* USCHED_SEL_* */
    int waker_cpu;      /* CPU of the waker or spawner, -1 from outside */
    uint64_t waker_id;  /* fiber id of the waker/spawner, 0 from outside */
    void *waker_pstate; /* policy state of the waking fiber, NULL from outside */
    const struct usched_task_info *task;
    uint64_t reserved[4];
};

/* A select_cpu answer. */
struct usched_select_result {
    int cpu;      /* where to run it */
    int reason;   /* enum usched_reason, for the counters */
    int slot;     /* enum usched_slot when cpu == waker_cpu; ignored otherwise */
    int claimed;  /* 1 if the policy claimed an idle CPU with usched_pol_claim_idle */
};

struct usched_ops {
    const char *name;  /* as given to usched_set(s, "policy", name) */
    const char *brief; /* one line for `usched policies` */
    uint32_t flags;    /* USCHED_OPS_* */
    size_t task_state_size; /* bytes of per-fiber policy state (<= 64) */
    size_t cpu_state_size;  /* bytes of per-CPU policy state */

    /* Called once at usched_start on the starting thread, before workers run.
     * May allocate policy-wide state (usched_pol_set_priv). Nonzero (negative
     * errno) fails the start. NULL: nothing to do. */
    int (*init)(usched_pol_ctx_t *ctx);
    /* Called once at destroy, after every worker stopped. NULL: nothing. */
    void (*exit)(usched_pol_ctx_t *ctx);

    /* Chooses the CPU for a fiber being spawned (FORK) or woken (WAKE).
     * Called on the spawner's/waker's CPU (args->waker_cpu), or on an outside
     * thread (OUTSIDE, waker_cpu == -1). Not called for bound fibers (the
     * core places them). The answer is final unless invalid (then the core's
     * fallback). If the answer names an idle CPU found in the idle masks,
     * the policy should claim it with usched_pol_claim_idle so that two
     * concurrent wake-ups do not pile onto one idle CPU; if the claim fails
     * it should look again (each failure is counted as a claim collision).
     * NULL: the core's fallback (the waker's CPU, or prev from outside). */
    void (*select_cpu)(usched_pol_ctx_t *ctx, const struct usched_select_args *args,
                       struct usched_select_result *out);

    /* Idle CPU `cpu` looks for work to steal: fills out[] with up to `max`
     * victim CPUs in the order to try, returns how many. Called on `cpu`.
     * NULL: the core's topology order (siblings, L2, LLC, package, node,
     * machine; the start rotating inside each level). */
    int (*steal_order)(usched_pol_ctx_t *ctx, int cpu, int *out, int max);

    /* May idle CPU `thief` steal from `victim` (at distance `level`) now that
     * the victim has `victim_load` runnable fibers? Returns how many fibers
     * to take at most: 0 = not from this victim, -1 = half (the default).
     * NULL: steal half when victim_load >= 1 within the LLC, and when
     * victim_load >= knob steal_thresh beyond it. */
    int (*want_steal)(usched_pol_ctx_t *ctx, int thief, int victim, int level,
                      unsigned victim_load);

    /* Notifications, called on the CPU concerned, NULL = ignore.
     * running: `task` starts running on cpu; stopping: it stops (yield, block
     * or exit; `runnable` says whether it stays runnable); idle: cpu found no
     * work and is about to spin/park; busy: cpu found work after idling. */
    void (*running)(usched_pol_ctx_t *ctx, int cpu, const struct usched_task_info *task);
    void (*stopping)(usched_pol_ctx_t *ctx, int cpu, const struct usched_task_info *task,
                     bool runnable);
    void (*idle)(usched_pol_ctx_t *ctx, int cpu);
    void (*busy)(usched_pol_ctx_t *ctx, int cpu);

    uint64_t reserved[8];
};

/* ops->flags */
#define USCHED_OPS_SHARED_RQ 0x1u /* one shared FIFO run queue (4BSD, bsd4):
                                     select_cpu only chooses which idle CPU to
                                     kick; every non-bound fiber goes to the
                                     shared queue. */
#define USCHED_OPS_NO_STEAL 0x2u  /* idle CPUs never steal */

/* ---- what a policy may read (all O(1) or O(mask words), lock-free) -------- */
int usched_pol_ncpus(const usched_pol_ctx_t *ctx);
/* Lowest level shared by two CPUs (their distance). */
int usched_pol_level_shared(const usched_pol_ctx_t *ctx, int a, int b);
/* Group of `cpu` at `level`, the number of groups, the number of 64-bit words
 * of a CPU mask, the member mask of a group, its weight. */
int usched_pol_group(const usched_pol_ctx_t *ctx, int cpu, int level);
int usched_pol_ngroups(const usched_pol_ctx_t *ctx, int level);
int usched_pol_mask_words(const usched_pol_ctx_t *ctx);
const uint64_t *usched_pol_group_mask(const usched_pol_ctx_t *ctx, int level, int group);
int usched_pol_group_weight(const usched_pol_ctx_t *ctx, int level, int group);
/* CPUs by increasing distance from cpu, and band ends per level (see topo). */
const int *usched_pol_order(const usched_pol_ctx_t *ctx, int cpu);
const int *usched_pol_band_end(const usched_pol_ctx_t *ctx, int cpu);
/* Largest number of PUs per core (1 = no SMT). */
int usched_pol_smt_width(const usched_pol_ctx_t *ctx);

/* Idle state (hints: may change right after the call). */
bool usched_pol_cpu_idle(const usched_pol_ctx_t *ctx, int cpu);
/* True when every CPU of cpu's core is idle. */
bool usched_pol_core_idle(const usched_pol_ctx_t *ctx, int cpu);
/* First idle CPU inside group_mask (NULL = all), searching from `start` and
 * wrapping; with whole_core, only CPUs whose whole core is idle. -1 if none. */
int usched_pol_find_idle(const usched_pol_ctx_t *ctx, const uint64_t *group_mask,
                         int start, bool whole_core);
/* Number of idle CPUs in group_mask (NULL = all). */
int usched_pol_count_idle(const usched_pol_ctx_t *ctx, const uint64_t *group_mask);
/* Claims idle CPU `cpu` for a placement: true if this caller cleared its idle
 * bit (it won), false if it was not idle any more (a collision, counted). */
bool usched_pol_claim_idle(usched_pol_ctx_t *ctx, int cpu);
/* Runnable fibers queued on cpu (ring, next slot, inbox), plus 1 if it is
 * running one. */
unsigned usched_pol_cpu_load(const usched_pol_ctx_t *ctx, int cpu);
/* Fiber currently running on cpu: its id (0 if none), and how long it has
 * run since it last woke (ns). */
uint64_t usched_pol_cpu_current(const usched_pol_ctx_t *ctx, int cpu, uint64_t *ran_since_wake_ns);

/* Knob value by name (see usched knobs); -1 for an unknown name. The id form
 * is faster: usched_pol_knob_id() once at init, then usched_pol_knob(). */
int usched_pol_knob_id(const char *name);
int64_t usched_pol_knob(const usched_pol_ctx_t *ctx, int knob_id);

/* Monotonic clock, ns. */
uint64_t usched_pol_now_ns(void);
/* Per-worker pseudo-random number (call on `cpu` only). */
uint32_t usched_pol_random(usched_pol_ctx_t *ctx, int cpu);

/* Policy-private state: one pointer for the policy, and cpu_state_size bytes
 * per CPU (zeroed, cache-line aligned, written only on that CPU unless the
 * policy synchronises itself). */
void usched_pol_set_priv(usched_pol_ctx_t *ctx, void *priv);
void *usched_pol_priv(const usched_pol_ctx_t *ctx);
void *usched_pol_cpu_state(const usched_pol_ctx_t *ctx, int cpu);

/* Adds to a policy-specific counter ("steal" counters are the core's). */
void usched_pol_count(usched_pol_ctx_t *ctx, int cpu, int reason);

#ifdef __cplusplus
}
#endif
#endif /* USCHED_POLICY_H */
