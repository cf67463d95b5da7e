/*
 * Knobs (docs/policies.md): named runtime tunables, like sysctls, described
 * once in USCHED_KNOBS_MAP. The table drives usched_set(s, "knobs", ...), the
 * USCHED_KNOBS environment variable, `usched knobs`, and the policies'
 * usched_pol_knob(). Columns: name, type, default, min, max, whether it may
 * change while running, which policies read it, description.
 *
 * Evidence for the defaults (STYLE 18):
 *   spin_us 50   a cross-CPU ping-pong round trip costs ~1.1 us while the
 *                partner spins and ~100 us when every message parks it and
 *                needs a futex wake-up (docs/sync.md, 2-vCPU EPYC VM), so
 *                50 us covers dozens of round trips yet stays below the cost
 *                of one parked round trip. Not swept over other values.
 *   next_cap 3   Go lets a hand-off chain inherit the time slice without a
 *                count; 3 bounds a ping-pong pair so the ring behind it runs
 *                (policy_pairs checks no starvation). Not swept.
 *   stall_us 10000  Go's sysmon retakes a P whose goroutine ran 10 ms
 *                (forcePreemptNS); docs/monitor.md. Not swept.
 *   contend_pct 25  a worker spinning or computing beside one busy process
 *                at equal weight waits about half of its runnable time (the
 *                kernel shares the CPU fairly); one alone on its CPU waits
 *                only its wake-up latency. 25 sits between. On the shared
 *                2-vCPU VM, fib with --noise 1 read 30-85% per 5 ms look.
 *                Not swept.
 *   contend_pin 1  BENCHMARKS.md, "Noisy neighbour" (contend_pin=1 vs 0).
 *   contend_pack 1  redis-benchmark against `usched serve redis`, unpinned,
 *                on 2 CPUs: -P 16 23-34% faster packed in four interleaved
 *                runs (1.04-1.10x redis-server, paired), -P 1 from 3.5%
 *                slower to 27% faster; tbench, pgbench, http, echo and the
 *                in-memory workloads quiet and beside a busy process moved
 *                less than their noise (BENCHMARKS.md, "Packing"). Its
 *                thresholds (70%, 85%, 16 looks) are not tuned.
 *   near_wake 1  `usched bench select` (a server pool on one request
 *                channel): cross-CPU wake-ups about 3x fewer, idle spins
 *                from thousands to tens a second; docs/sync.md. The look
 *                (4 waiters) and the pass limit (16) are not swept.
 *   preempt_us -1  each policy's kernel slice (preempt.c,
 *                usched__preempt_slice_us), 10 ms for usched: within 2% of
 *                off on fib, skynet and pingpong (BENCHMARKS.md,
 *                "Preemption"); the whole suite, its ThreadSanitizer build
 *                and aarch64 under qemu pass with it (docs/preempt.md,
 *                "Status").
 *   preempt_sig 23  SIGURG, as Go: ignored by default and rarely used.
 *   steal_cost_ns 1000  on 2 CPUs in the host's slow cross-CPU mode (~440
 *                ns round trip) a stolen empty fiber cost its thief 250-1000
 *                ns: 250 still let 0.9 of 3 million children be stolen
 *                (spawn 117 ns/op), 1000 about 1 in 1000 (33 ns/op; 196
 *                with the rule off). fib, skynet, build, select, pairs and
 *                pingpong moved less than their noise between 0, 250, 1000
 *                and 4000 (BENCHMARKS.md, "The cheap-victim rule"). At
 *                most 50 ms: its look pause, 64 times it, must fit in 32
 *                bits of ns; under ThreadSanitizer a stolen empty fiber
 *                costs its thief 3-7 ms (policy_cheap uses 50 ms).
 *   steal_thresh 2, affinity_us 1000: ULE's defaults (kern.sched.steal_thresh,
 *                affinity = 1 ms per cache level at hz=1000).
 */
#ifndef USCHED_KNOBS_H
#define USCHED_KNOBS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum usched__knob_type { KNOB_BOOL, KNOB_INT, KNOB_LEVEL, KNOB_CHOICE };

/* The values of io_poller (a KNOB_CHOICE: named in knobs.c). */
enum { USCHED__IO_POLLER_SHARED = 0, USCHED__IO_POLLER_PERCPU = 1 };

#define USCHED_KNOBS_MAP(X)                                                       \
    X(smt, KNOB_BOOL, 1, 0, 1, 1, "usched,linux,ule,bsd4",                        \
      "prefer fully idle cores over idle SMT siblings of busy cores")             \
    X(affine, KNOB_BOOL, 1, 0, 1, 1, "usched,linux",                              \
      "keep sync pairs on one CPU and wake near the waker")                       \
    X(scope, KNOB_LEVEL, 5, 0, 5, 1, "usched",                                    \
      "widest level a wake-up searches for an idle CPU: core, l2, llc, package, numa, machine") \
    X(util_gate, KNOB_BOOL, 1, 0, 1, 1, "usched",                                 \
      "skip a wake-up's idle search inside a busy LLC (SIS_UTIL on a running average)") \
    X(near_wake, KNOB_BOOL, 1, 0, 1, 1, "all",                                 \
      "a channel send hands its message to the receiver (of the 4 longest waiting) that last ran nearest the sender's CPU: the same CPU, core, L2, LLC... (docs/sync.md)") \
    X(steal, KNOB_BOOL, 1, 0, 1, 1, "usched,linux,ule",                           \
      "idle CPUs steal runnable fibers from busy ones")                           \
    X(steal_thresh, KNOB_INT, 2, 1, 256, 1, "usched,ule",                         \
      "minimum victim load to steal from beyond the LLC (ULE: from anywhere)")    \
    X(steal_cost_ns, KNOB_INT, 1000, 0, 50000000, 1, "usched,linux,ule",             \
      "a victim whose owner took its queued fibers faster than this each, and whose queue moved within as long, is left to its owner (0 = steal regardless; docs/design.md)") \
    X(spin_us, KNOB_INT, 50, 0, 1000000, 1, "all",                                \
      "microseconds an idle CPU spins looking for work before parking")           \
    X(next_cap, KNOB_INT, 3, 0, 1000, 1, "all",                                   \
      "consecutive next-slot runs before the next slot is demoted to the queue tail") \
    X(affinity_us, KNOB_INT, 1000, 0, 1000000, 1, "ule",                          \
      "cache affinity window per cache level, microseconds (ULE's affinity)")     \
    X(wake_wide_factor, KNOB_INT, 0, 0, 4096, 1, "linux,usched",                  \
      "wakee-flips factor for wake_wide (0 = the LLC size, as Linux)")           \
    X(io_tick, KNOB_INT, 61, 0, 1000000, 1, "all",                                \
      "picks between I/O polls on a busy CPU (Tokio's 61; 0 = the time bound only)") \
    X(io_poll_us, KNOB_INT, 10000, 100, 10000000, 1, "all",                       \
      "microseconds without an I/O poll after which a busy CPU polls (Go's sysmon: 10 ms)") \
    X(io_poller, KNOB_CHOICE, 1, 0, 1, 0, "all",                                 \
      "where parked CPUs wait for I/O: shared (one epoll set, one CPU blocked in it) or percpu (a set per CPU; a descriptor in the set of the CPU its packets arrive on; docs/io.md)") \
    X(offload_max, KNOB_INT, 64, 1, 4096, 1, "all",                               \
      "threads the offload pool may grow to (blocking calls, regular files)")     \
    X(offload_idle_ms, KNOB_INT, 10000, 1, 3600000, 1, "all",                     \
      "milliseconds an offload thread waits idle before it exits") \
    X(quota, KNOB_BOOL, 1, 0, 1, 0, "all",                                        \
      "run no more workers than the cgroup CPU quota pays for (docs/quota.md)") \
    X(stall_us, KNOB_INT, 10000, 0, 10000000, 1, "all",                           \
      "microseconds a worker may run one fiber without a scheduling point before the monitor serves its CPU elsewhere (0 = off; docs/monitor.md)") \
    X(stall_warn, KNOB_BOOL, 0, 0, 1, 1, "all",                                   \
      "warn on stderr, once per fiber, when a fiber stalls its worker (docs/monitor.md)") \
    X(contend_pct, KNOB_INT, 25, 0, 100, 1, "all",                               \
      "run delay, in percent of the time between two looks, above which the monitor counts a worker as contended (0 = off; docs/monitor.md)") \
    X(contend_pin, KNOB_INT, 1, 0, 1, 1, "all",                                  \
      "1: widen a contended pinned worker's affinity, until it is uncontended, to the CPUs of its LLC with no worker or an uncontended one; 0: keep it pinned (docs/monitor.md)") \
    X(contend_pack, KNOB_INT, 1, 0, 1, 1, "all",                                 \
      "1: while the uncontended workers have room for all the work, the contended ones take none (they are packed; docs/monitor.md); 0: off") \
    X(preempt_us, KNOB_INT, -1, -1, 10000000, 0, "all",                           \
      "microseconds a fiber may run while other work waits for its CPU before it is preempted (-1 = the policy's slice, 0 = off; docs/preempt.md)") \
    X(preempt_sig, KNOB_INT, 23, 1, 64, 0, "all",                                \
      "signal number the monitor preempts a worker with (default 23, SIGURG; docs/preempt.md)")

enum usched__knob {
#define X(name, type, def, min, max, rt, pols, desc) USCHED_KNOB_##name,
    USCHED_KNOBS_MAP(X)
#undef X
    USCHED_NKNOBS
};

struct usched__knob_info {
    const char *name;
    int type;
    int64_t def, min, max;
    bool runtime; /* may change while running */
    const char *policies;
    const char *desc;
};

extern const struct usched__knob_info usched__knob_table[USCHED_NKNOBS];

typedef struct usched__knobs {
    _Atomic int64_t v[USCHED_NKNOBS];
    /* Bumped by every successful parse: a reused decision (place.c) made
     * under other knob values is not reused. */
    _Atomic uint32_t gen;
} usched__knobs_t;

void usched__knobs_default(usched__knobs_t *k);
/* Parses "name=value,name=value" into k. When `running`, knobs that cannot
 * change while running are refused (-EBUSY). Nothing changes on error
 * (-EINVAL naming the knob and the problem, via usched__error). */
int usched__knobs_parse(usched__knobs_t *k, const char *spec, bool running);
int usched__knob_lookup(const char *name);
/* Formats a value the way it is parsed ("1", "llc"). */
const char *usched__knob_format(int knob, int64_t v, char *buf, size_t len);

static inline int64_t usched__knob_get(const usched__knobs_t *k, int id)
{
    return atomic_load_explicit(&k->v[id], memory_order_relaxed);
}

#endif
