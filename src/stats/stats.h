/*
 * Decision counters (DESIGN section 7): one X-macro table generates the enum,
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
    X(joins_inline, "joins that ran the joined fiber inline (it was still in the next slot)") \
    X(blocks, "fibers that blocked (join, wait queue, sleep)")                   \
    X(wake_local, "wake-ups and spawns placed on the deciding CPU")              \
    X(wake_remote, "wake-ups and spawns handed to another CPU's inbox")          \
    X(wake_shared, "wake-ups and spawns put on the shared or global queue")      \
    USCHED_REASON_MAP(USCHED_STATS_PLACE_)                                       \
    X(steal_smt, "steals from an SMT sibling")                                   \
    X(steal_l2, "steals within the L2")                                          \
    X(steal_llc, "steals within the LLC")                                        \
    X(steal_package, "steals within the package")                                \
    X(steal_numa, "steals within the NUMA node")                                 \
    X(steal_machine, "steals across NUMA nodes")                                 \
    X(steal_next, "fibers taken from another CPU's next slot")                   \
    X(stolen_fibers, "fibers moved by steals")                                   \
    X(steal_failed, "steal passes that found nothing")                           \
    X(global_pulls, "fibers taken from the global queue")                        \
    X(ring_overflows, "run queue overflows spilled to the global queue")         \
    X(next_demoted, "next-slot fibers demoted after next_cap runs")              \
    X(spins, "times an idle CPU started spinning")                               \
    X(parks, "times a worker parked on its futex")                               \
    X(futex_wakes, "futex wake-ups of parked workers")                           \
    X(claim_collisions, "idle CPU claims lost to another waker")                 \
    X(migrate_smt, "fibers resumed on an SMT sibling of their last CPU")         \
    X(migrate_l2, "fibers resumed on another core of their L2")                  \
    X(migrate_llc, "fibers resumed elsewhere in their LLC")                      \
    X(migrate_package, "fibers resumed in another LLC of their package")         \
    X(migrate_numa, "fibers resumed in another package of their NUMA node")      \
    X(migrate_machine, "fibers resumed on another NUMA node")                    \
    X(smt_busy_sibling, "wake-ups placed beside a busy SMT sibling while a whole core idled in the LLC") \
    X(wake_cross_llc, "wake-ups placed outside the LLC of prev and waker while it had an idle CPU") \
    X(pol_fallback, "policy answers replaced by the core's fallback")

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
