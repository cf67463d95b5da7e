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

/* Topology levels, nearest first: the one list of them (the topology, the
 * knob `scope` and the CLI name them from it). Columns: id, name, what a
 * group of that level is. */
#define USCHED_LEVEL_MAP(X)                                                     \
    X(SMT, core, "a core (its SMT siblings)")                                   \
    X(L2, l2, "an L2 cache or cluster (a core when there is none)")             \
    X(LLC, llc, "the last-level cache (the package when there is none)")        \
    X(PACKAGE, package, "a package (socket)")                                   \
    X(NUMA, numa, "a NUMA node (the machine when a CPU has none)")              \
    X(MACHINE, machine, "the whole machine")

enum usched_level {
#define X(id, name, desc) USCHED_LVL_##id,
    USCHED_LEVEL_MAP(X)
#undef X
    USCHED_NLEVELS
};

/* select_cpu flags */
#define USCHED_SEL_FORK 0x1u    /* a new fiber */
#define USCHED_SEL_WAKE 0x2u    /* a blocked fiber becomes runnable */
#define USCHED_SEL_SYNC 0x4u    /* the waker is about to block (hand-off) */
#define USCHED_SEL_OUTSIDE 0x8u /* the caller is not a worker (waker_cpu == -1) */
/* 0x10u is not used (it once meant a yield; yields are never placed). */
#define USCHED_SEL_EXIT 0x20u    /* with SYNC: the waker is exiting (a join), its CPU frees now */
#define USCHED_SEL_IO 0x40u      /* with WAKE: the fiber's file descriptor became ready */
#define USCHED_SEL_IO_HOME 0x80u /* with IO: the waker is the descriptor's home CPU, where its
                                    packets arrive - on loopback where its peer runs
                                    (io_poller=percpu; docs/io.md) */

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

/* Where a placed fiber is queued. */
enum usched_slot {
    USCHED_SLOT_TAIL = 0, /* the chosen CPU's run queue tail (FIFO) */
    USCHED_SLOT_NEXT,     /* when the chosen CPU is the deciding one: its next
                             slot (runs next, inherits the time slice) */
    USCHED_SLOT_HEAD,     /* as NEXT (a run queue head is not supported) */
    USCHED_SLOT_SHARED,   /* the shared run queue that every CPU reads; the
                             chosen CPU is only kicked if it is parked */
    USCHED_NSLOTS
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

/* A select_cpu answer. The core fills it with cpu -1, reason FALLBACK and
 * slot TAIL before asking. Grows at the end only. */
struct usched_select_result {
    int cpu;      /* where to run it (with SHARED: which CPU to kick) */
    int reason;   /* enum usched_reason, for the counters */
    int slot;     /* enum usched_slot: NEXT and HEAD apply when cpu is the
                     deciding CPU (else TAIL); SHARED always */
    uint32_t flags; /* none defined yet: zero */
    uint64_t reserved[2];
};

/* A steal_order question: CPU `cpu` found no local work. */
struct usched_steal_args {
    uint32_t size;
    uint32_t flags; /* none defined yet */
    int cpu;        /* the thief */
    int max;        /* room in out[] (== ncpus) */
    uint64_t reserved[4];
};

/* A want_steal question: may `thief` take fibers from `victim`? */
struct usched_victim_args {
    uint32_t size;
    uint32_t flags; /* none defined yet */
    int thief;
    int victim;
    int level;      /* enum usched_level: their distance */
    unsigned load;  /* the victim's run queue length (stealable fibers) */
    uint64_t reserved[4];
};

/* A notification (running, stopping, idle, busy) about CPU `cpu`. */
struct usched_cpu_event {
    uint32_t size;
    uint32_t flags; /* USCHED_EV_* */
    int cpu;
    const struct usched_task_info *task; /* running, stopping: the fiber; else NULL */
    uint64_t reserved[4];
};
#define USCHED_EV_RUNNABLE 0x1u /* stopping: the fiber yielded and stays runnable */

/* An io_home question (io_poller=percpu): which CPU's epoll set descriptor
 * `fd` belongs in - its home, the CPU whose worker polls it when idle and
 * where its readiness wakes a fiber first (docs/io.md). */
struct usched_home_args {
    uint32_t size;
    uint32_t flags;  /* USCHED_HOME_* */
    int fd;
    int packet_cpu;  /* the CPU its packets arrive on (a TCP socket, workers
                        pinned; on loopback where its peer runs), else -1 */
    int fiber_cpu;   /* the CPU of the fiber about to wait on it: the asking
                        CPU (its load still counts that fiber) */
    int home;        /* its home now; -1 with USCHED_HOME_NEW */
    uint64_t reserved[4];
};
#define USCHED_HOME_NEW 0x1u /* its first wait: it is being registered */
#define USCHED_HOME_TCP 0x2u /* a TCP socket */

/*
 * The ops table. Every member but name and brief may be 0/NULL. Calls come
 * from the core only; "on CPU c" means on the worker thread of c. Unless said
 * otherwise an op may be called concurrently on several workers, must not
 * block, switch fibers, allocate on the hot path, or call the public usched
 * API; it may read anything below (usched_pol_*), write its own per-fiber
 * state (task->pstate, the waker's args->waker_pstate) and its per-CPU state
 * (usched_pol_cpu_state(ctx, cpu) of the CPU it runs on), and claim idle CPUs.
 */
struct usched_ops {
    /* Name given to usched_set(s, "policy", name) and USCHED_POLICY: 1-32
     * characters, no spaces, commas or '='. Required. */
    const char *name;
    /* One line for `usched policies`. Required. */
    const char *brief;
    /* USCHED_OPS_* (below). */
    uint32_t flags;
    /* Bytes of per-fiber policy state (task->pstate), at most
     * USCHED_TASK_STATE_MAX, zeroed at spawn, 16-byte aligned. Written by
     * select_cpu (for the wakee, and args->waker_pstate for the waker) and by
     * the notifications of the CPU running the fiber; the core orders these
     * (a wake-up happens after the wakee's `stopping`). */
    size_t task_state_size;
    /* Bytes of per-CPU state (usched_pol_cpu_state), zeroed at start. */
    size_t cpu_state_size;

    /* When: once, at usched_start, on the starting thread, before any worker
     * runs. May: allocate policy-wide state (usched_pol_set_priv), read the
     * topology and knobs. Returns 0, or a negative errno that fails
     * usched_start. NULL: nothing to prepare. */
    int (*init)(usched_pol_ctx_t *ctx);
    /* When: once, at usched_destroy (or a failed start after init), after
     * every worker stopped, on the destroying thread. May: free what init
     * allocated. NULL: nothing to free. */
    void (*exit)(usched_pol_ctx_t *ctx);

    /* When: a fiber is spawned (args->flags FORK) or woken (WAKE, with SYNC
     * when the waker is about to block); not for bound fibers (the core puts
     * them on their CPU) nor for yields. On: the spawner's or waker's CPU
     * (args->waker_cpu), or an outside thread (OUTSIDE, waker_cpu == -1,
     * waker_pstate NULL; waker_id is 0 and waker_pstate NULL also when the
     * wake-up comes from the worker itself rather than a fiber: a timer, or
     * the exit of a joined fiber); concurrently with other decisions. May: read the
     * topology, idle masks, loads and knobs; claim the idle CPU it answers
     * with (usched_pol_claim_idle) and look again if the claim fails; update
     * the wakee's and the waker's policy state. Answer: out->cpu (the core
     * sets it to -1 first), out->reason (enum usched_reason, counted as
     * place_<reason>), out->slot (where it goes when out->cpu is the deciding
     * CPU: next slot, head or tail; the shared run queue whatever the CPU).
     * Final: the core places the fiber there, except that an answer it cannot
     * use (cpu outside [0, ncpus)) is replaced by the core's fallback (the
     * waker's CPU, else prev, else 0), counted as pol_fallback and warned
     * about once on stderr; an unknown reason is counted as `fallback`, an
     * unknown slot as TAIL. With slot SHARED the fiber goes to the shared
     * run queue, and out->cpu only says which CPU to kick if it is parked.
     * args->flags may carry hints (USCHED_SEL_IO, USCHED_SEL_IO_HOME) that
     * a policy is free to ignore. NULL: the core's fallback for every
     * decision (spawns from outside threads then go to the shared run
     * queue, any parked CPU woken). */
    void (*select_cpu)(usched_pol_ctx_t *ctx, const struct usched_select_args *args,
                       struct usched_select_result *out);

    /* When: CPU args->cpu found no local work and is about to steal (on
     * every pass of its spin loop, and once before parking). On: that CPU,
     * in its worker's host context (not on a fiber stack). May: fill out[]
     * with up to args->max (== ncpus) victim CPUs in the order to try and
     * return how many; it should not list args->cpu. Final: the core tries them
     * in that order, skipping invalid entries; a negative or too large count
     * means no victims. Not called with USCHED_OPS_SHARED_RQ or
     * USCHED_OPS_NO_STEAL, nor when knob steal is 0. NULL: the core's
     * topology order (siblings, L2, LLC, package, node, machine; the start
     * rotating inside each level). */
    int (*steal_order)(usched_pol_ctx_t *ctx, const struct usched_steal_args *args, int *out);

    /* When: for each victim of the steal order that has queued fibers
     * (args->load = its run queue length, not counting the running fiber,
     * the next slot or bound fibers, which are never stolen). On: the thief.
     * May: read loads and knobs. Returns how many fibers to take at most: 0
     * = not from this victim, -1 = half, n > 0 = at most n (fewer than half
     * are taken one CAS each; n >= half takes half). NULL: half when
     * the victim shares the thief's LLC, else half when args->load >= knob
     * steal_thresh or no CPU of the victim's LLC is idle. */
    int (*want_steal)(usched_pol_ctx_t *ctx, const struct usched_victim_args *args);

    /* Notifications about CPU ev->cpu, on that CPU, never concurrently for
     * one CPU; they may update the policy's per-CPU state of ev->cpu and
     * the fiber's pstate, and nothing they do changes the core's decision.
     * NULL: ignored.
     * running: ev->task starts or resumes running (its prev_cpu is already
     *   ev->cpu).
     * stopping: ev->task stopped running (yield, block or exit); flag
     *   USCHED_EV_RUNNABLE for a yield. Called before a blocked fiber can be
     *   woken, so its pstate is safe to write.
     * idle: the CPU found no work, is published idle in the masks and is
     *   about to spin, then park.
     * busy: the CPU found work after idle, and has left the idle masks. */
    void (*running)(usched_pol_ctx_t *ctx, const struct usched_cpu_event *ev);
    void (*stopping)(usched_pol_ctx_t *ctx, const struct usched_cpu_event *ev);
    void (*idle)(usched_pol_ctx_t *ctx, const struct usched_cpu_event *ev);
    void (*busy)(usched_pol_ctx_t *ctx, const struct usched_cpu_event *ev);

    /* When: io_poller=percpu, at a descriptor's first wait (flags NEW), and
     * at each look whether it should move: a TCP socket's every 16th wait,
     * after its packets' CPU was read; any other descriptor's every wait.
     * On: the CPU of the waiting fiber, under the descriptor's lock. May:
     * read the topology, idle masks, loads and knobs. Returns the CPU it
     * should live on; -1 for the core's rule (packet_cpu when known, else
     * fiber_cpu). Final: a new descriptor goes there at once; one already
     * homed moves after 2 looks in a row (TCP; 4 for others) that want
     * another CPU, and only while no other fiber waits on it. An answer
     * out of range is the core's rule, warned about once. NULL: the core's
     * rule. */
    int (*io_home)(usched_pol_ctx_t *ctx, const struct usched_home_args *args);

    uint64_t reserved[7]; /* zero */
};

/* Largest per-fiber policy state (struct usched_ops.task_state_size). */
#define USCHED_TASK_STATE_MAX 64

/* Adds a policy that usched_set(s, "policy", ops->name) can then choose, for
 * out-of-tree policies and tests. ops must stay valid for the life of the
 * process (it is never removed). Returns 0; -EINVAL for a NULL ops, a bad
 * name, no brief, unknown flags or too much task state; -EEXIST when the name
 * is taken; -ENOSPC beyond 16 registered policies. Thread-safe. */
int usched_policy_register(const struct usched_ops *ops);

/* ops->flags */
#define USCHED_OPS_SHARED_RQ 0x1u /* one shared FIFO run queue (4BSD, bsd4):
                                     select_cpu answers slot SHARED and the
                                     CPU to kick; a yield requeues on the
                                     shared queue too, and no CPU steals. */
#define USCHED_OPS_NO_STEAL 0x2u  /* idle CPUs never steal (but the stall
                                     monitor moves the queue of a CPU that
                                     ran one fiber for stall_us to the
                                     shared queue: docs/monitor.md) */
#define USCHED_OPS_TRACK_TIME 0x4u /* the core keeps run times: task info
                                       woke_ns, ran_ns and last_ran_ns, and
                                       usched_pol_cpu_current's run time since
                                       wake-up (two clock reads per switch);
                                       without it they read 0. */
#define USCHED_OPS_SMT_RULE 0x8u  /* the core follows the policy's smt rule
                                       where it chooses itself (with knob smt
                                       set, on an SMT machine): the parked CPU
                                       it wakes for new work (after a spawn
                                       into the spawner's queue, or to chain
                                       spinners) is one of a whole idle core
                                       when there is one, and a thief whose
                                       SMT sibling is busy leaves the work to
                                       a whole idle core of its LLC, waking
                                       one of its CPUs, instead of stealing
                                       (counted as steal_deferred) or pulling
                                       from the global queue (counted as
                                       global_deferred). */
#define USCHED_OPS_SYNC_REUSE 0x10u /* a sync hand-off answer may be reused:
                                       after select_cpu answered a wake-up
                                       by a fiber (SYNC or plain, not IO or
                                       EXIT) with the waker's own CPU, slot
                                       NEXT, reason SYNC, the core places the
                                       next wake-ups of the same fiber by the
                                       same waker with the same SYNC flag the
                                       same way without asking
                                       (counted as place_sync and
                                       sync_reused), while: the two wake only
                                       each other (the waker's last wake-up
                                       was of this fiber, this fiber's was of
                                       the waker, and this fiber's last waker
                                       was it), the waker's CPU has nothing
                                       queued, no knob has
                                       changed and, with knob smt on an SMT
                                       machine, the waker's CPU has no busy
                                       sibling while a whole core of its LLC
                                       idles; the 16th wake-up asks again.
                                       For a policy whose pair answer depends
                                       on nothing else (its state for the two
                                       fibers does not change while they wake
                                       only each other). */
#define USCHED_OPS_FORK_NEXT 0x20u /* the policy's answer to every spawn
                                      made on one of the scheduler's CPUs
                                      (by its fibers) is the spawner's CPU,
                                      slot NEXT, reason LOCAL
                                      (Go's runnext: the newest child runs
                                      next, the one it displaces is queued
                                      where idle CPUs steal): the core places
                                      such spawns so without calling
                                      select_cpu, whose call cost a spawn
                                      about 80 of its 500 instructions.
                                      Spawns from outside threads and bound
                                      spawns are placed as without it. */

/* ---- what a policy may read (all O(1) or O(mask words), lock-free) --------
 * Every CPU, level and group argument is checked: out of range, the answer is
 * neutral (-1, NULL, false or 0) and the core warns once on stderr. */
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

/* Knob id by name (see usched knobs), -1 for an unknown name; its value.
 * Look the id up once (at init), then read it with usched_pol_knob(), which
 * aborts, naming the policy, on an id that is no knob's. */
int usched_pol_knob_id(const char *name);
int64_t usched_pol_knob(const usched_pol_ctx_t *ctx, int knob_id);

/* Monotonic clock, ns. */
uint64_t usched_pol_now_ns(void);
/* Coarse monotonic clock (a few ms resolution, a few ns to read), ns: for
 * decays and windows measured in milliseconds or more. */
uint64_t usched_pol_now_coarse_ns(void);
/* Pseudo-random number from CPU `cpu`'s generator when called on that CPU;
 * from the calling thread's own generator elsewhere. */
uint32_t usched_pol_random(usched_pol_ctx_t *ctx, int cpu);

/* Policy-private state: one pointer for the policy, and cpu_state_size bytes
 * per CPU (zeroed, cache-line aligned and padded to whole lines, written only
 * on that CPU unless the policy synchronises itself). */
void usched_pol_set_priv(usched_pol_ctx_t *ctx, void *priv);
void *usched_pol_priv(const usched_pol_ctx_t *ctx);
void *usched_pol_cpu_state(const usched_pol_ctx_t *ctx, int cpu);

/* Counts one placement decision with `reason` (enum usched_reason) as the
 * counter place_<reason>, on CPU `cpu` when called on it, else on the shared
 * counters: for decisions a policy makes outside select_cpu (the core counts
 * select_cpu's answers itself). */
void usched_pol_count(usched_pol_ctx_t *ctx, int cpu, int reason);

#ifdef __cplusplus
}
#endif
#endif /* USCHED_POLICY_H */
