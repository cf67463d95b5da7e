/*
 * Decision counters (docs/policies.md): one X-macro table generates the enum,
 * the names and the descriptions. Counters live per CPU and are written only
 * by that CPU's worker (relaxed load + store: no locked instruction on the hot
 * path); outside threads count into a shared array with atomic adds. Readers
 * sum them on demand.
 */
#ifndef USCHED_STATS_H
#define USCHED_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "usched/policy.h"

#define USCHED_STATS_MAP(X)                                                     \
    X(switches, "fiber switches (a fiber started or resumed)")                   \
    X(spawns, "fibers spawned from fibers")                                      \
    X(spawns_outside, "fibers spawned from outside threads")                     \
    X(exits, "fibers finished")                                                  \
    X(yields, "usched_yield calls")                                              \
    X(joins_inline, "joins that ran the joined fiber inline (it had not started and still waited on this CPU)") \
    X(spawns_called, "usched_spawn_call children run at once as a call (64 or more fibers waited on the spawner's CPU)") \
    X(blocks, "fibers that blocked (join, wait queue, sleep)")                   \
    X(wake_local, "wake-ups and spawns placed on the deciding CPU")              \
    X(wake_remote, "wake-ups and spawns handed to another CPU's inbox")          \
    X(wake_shared, "wake-ups and spawns put on the shared or global queue")      \
    USCHED_REASON_MAP(USCHED_STATS_PLACE_)                                       \
    X(near_wakes, "channel messages handed to a receiver that last ran nearer the sender's CPU than a longer-waiting one (knob near_wake)") \
    X(sync_reused, "sync hand-offs placed by reusing the policy's last answer for the same two fibers (USCHED_OPS_SYNC_REUSE)") \
    X(steal_smt, "steals from an SMT sibling")                                   \
    X(steal_l2, "steals within the L2")                                          \
    X(steal_llc, "steals within the LLC")                                        \
    X(steal_package, "steals within the package")                                \
    X(steal_numa, "steals within the NUMA node")                                 \
    X(steal_machine, "steals across NUMA nodes")                                 \
    X(steal_next, "fibers taken from another CPU's next slot")                   \
    X(steal_next_moved, "next-slot takes given up: after the back-off the slot held another fiber (its owner serves it)") \
    X(stolen_fibers, "fibers moved by steals")                                   \
    X(steal_failed, "steal passes that found nothing")                           \
    X(steal_deferred, "steals left to a whole idle core of the LLC (the thief's SMT sibling was busy)") \
    X(steal_left_cheap, "steals left to a victim whose owner takes its queued fibers faster than steal_cost_ns each while its queue keeps moving") \
    X(steal_naps, "sleeps of an idle CPU between two looks at victims it left by the cheap-victim rule, instead of spinning") \
    X(steal_left_busy, "looks (steals and park checks) that left a victim running a fiber its short queue, by a contended CPU whose own descriptors have fibers waiting (it parks in its set instead)") \
    X(steal_left_owner, "steals left to a victim awake between fibers on a core with no busy CPU (the thief's SMT sibling was busy)") \
    X(steal_busy_sibling, "steals by a CPU beside a busy SMT sibling while a whole core idled in the LLC") \
    X(global_pulls, "fibers taken from the global queue")                        \
    X(global_deferred, "global-queue pulls left to a whole idle core of the LLC (the puller's SMT sibling was busy; each pass counts)") \
    X(global_busy_sibling, "global-queue pulls by a CPU beside a busy SMT sibling while a whole core idled in the LLC") \
    X(ring_overflows, "run queue overflows spilled to the global queue")         \
    X(next_demoted, "next-slot fibers demoted after next_cap runs")              \
    X(spins, "times an idle CPU started spinning")                               \
    X(parks, "times a worker parked on its futex")                               \
    X(futex_wakes, "futex wake-ups of parked workers")                           \
    X(wake_idle_core, "parked CPUs woken for new work on a whole idle core (smt rule)") \
    X(claim_collisions, "idle CPU claims lost to another waker")                 \
    X(migrate_smt, "fibers resumed on an SMT sibling of their last CPU")         \
    X(migrate_l2, "fibers resumed on another core of their L2")                  \
    X(migrate_llc, "fibers resumed elsewhere in their LLC")                      \
    X(migrate_package, "fibers resumed in another LLC of their package")         \
    X(migrate_numa, "fibers resumed in another package of their NUMA node")      \
    X(migrate_machine, "fibers resumed on another NUMA node")                    \
    X(smt_busy_sibling, "wake-ups placed beside a busy SMT sibling while a whole core idled in the LLC (a waker that blocks right after counts as idle)") \
    X(wake_cross_llc, "wake-ups placed outside the LLC of prev and waker while it had an idle CPU") \
    X(pol_fallback, "policy answers replaced by the core's fallback")           \
    X(io_wake_same_cpu, "I/O wake-ups placed on the fiber's previous CPU")        \
    X(io_wake_same_llc, "I/O wake-ups placed elsewhere in the previous CPU's LLC") \
    X(io_wake_elsewhere, "I/O wake-ups placed outside the previous CPU's LLC")    \
    X(io_polls, "non-blocking I/O polls (idle CPU before stealing, or busy tick)") \
    X(io_poll_blocks, "times a parking CPU blocked in the I/O poller")            \
    X(io_timer_far, "blocking polls whose far deadline (50 ms or more) the set's timerfd kept: the poll armed no kernel timer") \
    X(io_timer_sets, "timerfd settings for far deadlines (a deadline that only moves later needs none)") \
    X(io_poller_deferred, "parks that left the poller role to a spinning CPU (or, renewed, to polling ones) for a while") \
    X(io_poller_renewed, "poller deferrals renewed at twice the length, as the awake CPUs polled through the last") \
    X(io_breaks, "eventfd writes waking the CPU blocked in the poller")           \
    X(io_events, "fd readiness events dispatched")                                \
    X(io_stale, "readiness events dropped: the fd was closed since (sequence tag)") \
    X(io_poll_errors, "epoll_wait calls that failed (a broken epoll set: readiness is seen late)") \
    X(io_wake_home_cpu, "io_poller=percpu: I/O wake-ups placed on the descriptor's home CPU (where its packets arrive)") \
    X(io_wake_home_core, "io_poller=percpu: I/O wake-ups placed on another CPU of the home CPU's core") \
    X(io_wake_home_llc, "io_poller=percpu: I/O wake-ups placed elsewhere in the home CPU's LLC") \
    X(io_wake_home_far, "io_poller=percpu: I/O wake-ups placed outside the home CPU's LLC") \
    X(io_home_packet, "io_poller=percpu: descriptors homed on the CPU their packets arrive on, not the registering fiber's") \
    X(io_rehomes, "io_poller=percpu: descriptors moved to another CPU's set (their fiber or packets stayed elsewhere)") \
    X(io_home_kicks, "io_poller=percpu: CPUs woken from their futex to block in their set for a fiber waiting elsewhere") \
    X(io_poll_stolen, "io_poller=percpu: polls of another CPU's set, busy and unpolled, that took readiness") \
    X(io_wake_owner, "I/O wake-ups that were their CPU's only work, decided between fibers: that CPU runs the fiber next and wakes no other") \
    X(offloads, "calls run on the offload pool")                                 \
    X(stalls, "stalls: a worker ran one fiber longer than stall_us without a scheduling point") \
    X(stall_timers, "timers of stalled CPUs fired by the monitor")               \
    X(stall_moved, "fibers moved off stalled CPUs (inbox, next slot, run queue) to the global queue") \
    X(stall_wakes, "parked CPUs the monitor woke to steal fibers queued behind a stalled CPU's fiber") \
    X(monitor_sleeps, "times the monitor slept because every worker was parked") \
    X(contend_episodes, "contention episodes: a worker's run delay (schedstat) grew faster than contend_pct of the time") \
    X(contend_nospin, "idle entries of a contended CPU that parked without spinning") \
    X(contend_wake_skips, "wakep wake-ups that passed over a contended parked CPU for an uncontended one") \
    X(contend_served, "looks at a contended CPU without progress whose timers and inbox the monitor served") \
    X(contend_packs, "workers packed away (contend_pack): contended while the uncontended workers had room for all the work") \
    X(contend_pack_moved, "placements moved off a packed CPU to the uncontended CPU standing in for it") \
    X(contend_pack_skips, "wakep wake-ups that passed over a packed parked CPU") \
    X(contend_unpins, "contended workers whose affinity the monitor widened beyond their CPU (contend_pin=1)") \
    X(preempt_signals, "preemption signals the monitor sent to a worker whose fiber ran longer than preempt_us while other work waited") \
    X(preempts, "fibers preempted by the signal (each also counts in yields)") \
    X(preempt_deferred, "preemptions taken at usched_preempt_on after one was refused while preemption was off") \
    X(preempt_refused_off, "preemptions refused: the fiber was inside usched_preempt_off") \
    X(preempt_refused_lock, "preemptions refused: the core held the CPU (a switch, or a policy's code run for the core)") \
    X(preempt_refused_unsafe, "preemptions refused: the fiber was not in the program's own code (libc, the loader, the vDSO, libusched, the C++ runtime)") \
    X(preempt_skipped_syscall, "preemptions not asked: the worker's thread slept in a system call, which a signal would only cut short") \
    X(run_max_us, "longest run of one fiber without a switch that the monitor saw, in microseconds, to within one look (a maximum, not a count)")

#define USCHED_STATS_PLACE_(id, name, desc) X(place_##name, desc)

enum usched__stat {
#define X(name, desc) USCHED_STAT_##name,
    USCHED_STATS_MAP(X)
#undef X
    USCHED_NSTATS
};

typedef struct usched__stats {
    _Atomic uint64_t v[USCHED_NSTATS];
} usched__stats_t;

/* Owner-only increment (one writer per counter set). */
static inline void usched__stat_add(usched__stats_t *st, int id, uint64_t n)
{
    uint64_t cur = atomic_load_explicit(&st->v[id], memory_order_relaxed);
    atomic_store_explicit(&st->v[id], cur + n, memory_order_relaxed);
}
/* Any-thread increment (the shared outside-thread set). */
static inline void usched__stat_add_atomic(usched__stats_t *st, int id, uint64_t n)
{
    atomic_fetch_add_explicit(&st->v[id], n, memory_order_relaxed);
}

const char *usched__stat_name(int id);
const char *usched__stat_desc(int id);
int usched__stat_lookup(const char *name);

#endif
