/*
 * Trace events and the wake-up latency histogram (docs/trace.md).
 *
 * Recording. Each CPU appends the events it decides to a buffer only its
 * worker writes (owner only: no lock, no atomic); outside threads (spawns
 * and wake-ups from plain threads) append to one shared buffer under a spin
 * lock. A buffer is a chain of chunks of USCHED__TRACE_CHUNK events: when a
 * chunk fills, its owner links a new one, so no event is lost and no worker
 * waits for a writer. Past USCHED__TRACE_MAX_CHUNKS chunks per buffer
 * events are dropped and counted; the file says how many. The file is
 * written once, when the scheduler is destroyed (trace.c).
 *
 * Off (the default), every hook costs one load of s->tracing and a branch
 * predicted not taken: the recording itself is out of line.
 *
 * Wake-up latency: the time from a wake-up decision (usched__place_on for a
 * wake-up) to the fiber running, kept on the CPU that runs it, always, in a
 * log-scale histogram: four buckets per power of two of nanoseconds (at
 * most 19% wide), owner-written relaxed counters. One wake-up in
 * USCHED__LAT_EVERY is measured (chosen at random by the deciding CPU):
 * on the 2-vCPU development VM a clock read costs 45 ns (rdtsc alone 42 ns),
 * so measuring every wake-up would add 90 ns to a 180 ns same-CPU ping-pong
 * round trip; one in 16 adds about 6 ns per wake-up on average and still
 * gives tens of thousands of samples a second under load.
 */
#ifndef USCHED_CORE_TRACE_H
#define USCHED_CORE_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* name, description (a: another fiber or a count; b: a CPU; c: a small code) */
#define USCHED_TRACE_EVENTS(X)                                                   \
    X(spawn, "a fiber was created and placed (a: parent fiber, b: CPU chosen, c: reason)") \
    X(wake, "a blocked fiber was made runnable (a: waker fiber, b: CPU chosen, c: reason)") \
    X(io_ready, "a fiber waiting for I/O was made runnable (b: CPU chosen, c: reason)") \
    X(run, "a fiber started or resumed running (b: run queue length)")        \
    X(stop, "the running fiber left its CPU (c: yield, block or exit)")      \
    X(steal, "an idle CPU stole fibers (b: victim CPU, c: level, a: fibers taken)") \
    X(migrate, "a fiber resumed away from its last CPU (b: last CPU, c: level)") \
    X(park, "a worker went to sleep (c: 1 in the I/O poller)")               \
    X(unpark, "a worker woke up")                                              \
    X(io_wait, "a fiber blocked waiting for a descriptor (a: descriptor)")    \
    X(stall, "the monitor found a CPU held by one fiber (b: that CPU, a: ns held so far)") \
    X(name, "the fiber named itself (a: the name, owned by the trace)")

enum usched__tev_type {
#define X(name, desc) USCHED__TEV_##name,
    USCHED_TRACE_EVENTS(X)
#undef X
    USCHED__NTEV
};

/* What a blocked fiber waits for (b of a stop event that blocks; "on" of
 * its run slice in the file). */
#define USCHED_TRACE_BLOCKS(X) X(other) X(mutex) X(cond) X(chan) X(sem) X(wg) X(sleep) X(join) X(io) X(offload)
enum usched__tblk {
#define X(name) USCHED__TBLK_##name,
    USCHED_TRACE_BLOCKS(X)
#undef X
    USCHED__NTBLK
};

/* Stop codes (c of a stop event). */
enum { USCHED__TSTOP_YIELD = 1, USCHED__TSTOP_BLOCK, USCHED__TSTOP_EXIT };

/* One event: 32 bytes. ns is CLOCK_MONOTONIC; id the fiber it is about. */
struct usched__tev {
    uint64_t ns;
    uint64_t id;
    uint64_t a;
    uint32_t b;
    uint16_t c;
    uint8_t type;
    uint8_t blk; /* a run slice: what it blocked on at its end (USCHED__TBLK_*) */
};
_Static_assert(sizeof(struct usched__tev) == 32, "trace event: 32 bytes");

/* 4096 events (128 KiB) per chunk; 256 chunks (32 MiB, 1M events) per CPU
 * before events are dropped. A 2-CPU pingpong records ~4 events per
 * message, so a buffer holds about a quarter of a second of the busiest
 * workload we have (BENCHMARKS.md: ~1 M messages/s). */
#define USCHED__TRACE_CHUNK 4096
#define USCHED__TRACE_MAX_CHUNKS 256

struct usched__tchunk {
    struct usched__tchunk *next;
    uint32_t n;
    struct usched__tev ev[USCHED__TRACE_CHUNK];
};

/* A CPU's (or the outside threads') event buffer. Owner only, or under
 * `lock` for the outside buffer. */
struct usched__tbuf {
    struct usched__tchunk *head, *cur;
    uint32_t nchunks;
    uint64_t dropped;
    _Atomic uint32_t lock; /* outside buffer only */
};

/* ---- wake-up latency ----------------------------------------------------- */

#define USCHED__LAT_SUB 4 /* buckets per power of two */
#define USCHED__LAT_EVERY 64 /* one wake-up in 64 is measured, on average */
#define USCHED__LAT_NB (64 * USCHED__LAT_SUB)

typedef struct usched__lat {
    _Atomic uint64_t n[USCHED__LAT_NB];
    _Atomic uint64_t max;
} usched__lat_t;

/* Bucket of v ns: values below 4 are their own bucket; above, the power of
 * two and the next two bits. */
static inline int usched__lat_bucket(uint64_t v)
{
    if (v < USCHED__LAT_SUB) return (int)v;
    int p = 63 - __builtin_clzll(v); /* >= 2 */
    return p * USCHED__LAT_SUB + (int)((v >> (p - 2)) & 3);
}

/* Lowest value of bucket i (reports quote the upper end, see trace.c). */
static inline uint64_t usched__lat_low(int i)
{
    if (i < USCHED__LAT_SUB) return (uint64_t)i;
    int p = i / USCHED__LAT_SUB;
    return (1ull << p) | ((uint64_t)(i % USCHED__LAT_SUB) << (p - 2));
}

/* Owner only (the CPU that runs the fiber). */
static inline void usched__lat_add(usched__lat_t *h, uint64_t v)
{
    _Atomic uint64_t *b = &h->n[usched__lat_bucket(v)];
    atomic_store_explicit(b, atomic_load_explicit(b, memory_order_relaxed) + 1, memory_order_relaxed);
    if (v > atomic_load_explicit(&h->max, memory_order_relaxed))
        atomic_store_explicit(&h->max, v, memory_order_relaxed);
}

struct usched;
struct usched__wk;

/* Out of line: appends one event to w's buffer (or the outside one when w
 * is NULL or belongs to another scheduler). Only called when s->tracing. */
void usched__trace_rec(struct usched *s, struct usched__wk *w, int type, uint64_t id, uint64_t a,
                       uint32_t b, uint16_t c);

/* The hook: one predictable branch when tracing is off (the arguments are
 * evaluated only when tracing). USCHED__TRACE_T takes the type as a value. */
#define USCHED__TRACE_T(s, w, type, id, a, b, c)                                        \
    do {                                                                                \
        if (__builtin_expect((s)->tracing, 0))                                          \
            usched__trace_rec((s), (w), (type), (id), (a), (uint32_t)(b), (uint16_t)(c)); \
    } while (0)
#define USCHED__TRACE(s, w, type, id, a, b, c) USCHED__TRACE_T(s, w, USCHED__TEV_##type, id, a, b, c)

/* Lifecycle (trace.c, called by api.c). start: opens the trace file named
 * by s->trace_path (error naming it if it cannot be created) and allocates
 * the buffers; starts the periodic summary thread when asked. stop: after
 * the workers have exited, writes the file and frees everything. */
int usched__trace_start(struct usched *s);
int usched__trace_stop(struct usched *s);
/* The periodic summary (USCHED_SCHEDTRACE): stops its thread. */
void usched__schedtrace_stop(struct usched *s);

#endif
