/*
 * Trace events and the wake-up latency histogram (docs/trace.md).
 *
 * Recording. Each CPU encodes the events it decides, as they happen, into
 * Perfetto packets (tracefmt/tracefmt.h) in a buffer only its worker writes (no
 * lock, no atomic read-modify-write); outside threads (spawns and wake-ups
 * from plain threads, the stall monitor) write one shared buffer under a
 * spin lock. A buffer is a ring of 64 KiB chunks, at most trace_mb MiB over
 * all buffers: when the last chunk fills, a file trace drops the events
 * that follow (counted, the file says how many) and a flight recorder
 * (trace_mode=ring) reuses its oldest chunk. The file is written by
 * usched_trace_dump, at destroy, on SIGUSR2 when the program allows it, and
 * after a stall when asked (trace.c).
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

#include "tracefmt/tracefmt.h"

/* The events, what a fiber blocks on, the stop codes: tracefmt/tracefmt.h. */

/* A chunk of encoded packets (tracefmt/tracefmt.h): 64 KiB, the unit a flight
 * recorder drops. Only the owner writes data[len..]; it publishes each
 * packet with a release store of len, so a dump (acquire) may copy
 * data[0..len) while the owner appends. A chunk is reset (len = 0) only
 * under its buffer's lock, which a dump holds while it copies. */
#define USCHED__TRACE_CHUNK (64 * 1024)
/* Chunks are mapped USCHED__TRACE_SLAB at a time with their pages
 * populated: a page fault per 4 KiB written (about 170 events) let a loaded
 * machine's kernel preempt the worker at every one; one mapping per 16
 * chunks enters the kernel once per ~40,000 events. */
#define USCHED__TRACE_SLAB 16
/* The largest packet an event makes (a name event with its string). */
#define USCHED__TRACE_MAXPKT 256

struct usched__tchunk {
    _Atomic uint32_t len;
    uint8_t data[USCHED__TRACE_CHUNK];
};

/* A CPU's (or the outside threads') buffer: a ring of up to `max` chunks,
 * `head` the oldest of `count`. Owner only (the worker; for the outside
 * buffer, whoever holds `lock`), except: the chunk list (ring, head, count)
 * changes under `lock`, which dumps take; `dropped` is read by dumps
 * (relaxed). */
struct usched__tbuf {
    struct usched__tchunk *cur; /* being written; NULL before the first event */
    uint8_t *pos, *end;         /* cur->data[len], the last byte a packet may start at */
    uint64_t last_ns;           /* timestamp of the last packet (deltas) */
    uint64_t cur_fiber;         /* the fiber running (a wake-up by it omits its id) */
    uint32_t runq;              /* the last run queue length written */
    uint32_t seq;               /* Perfetto sequence id */
    uint64_t uuid;              /* its track */
    struct usched__tchunk **ring;
    uint32_t max, head, count;
    struct usched__tchunk *slab; /* chunks mapped, populated, not yet used */
    uint32_t slab_left;
    bool full;                  /* not a ring and no chunk left: events are dropped */
    _Atomic uint64_t dropped;
    _Atomic uint32_t lock;
    uint64_t named[64];         /* fibers whose run name is interned in cur (by id % 64) */
};

/* Settings (usched_set, api.c -> usched__trace_set): trace_mb (all buffers
 * together, MiB; 0: USCHED__TRACE_MB_DEFAULT), trace_mode ring, trace_signal
 * (the program allows SIGUSR2 dumps), trace_stall_dump. chunks: per buffer,
 * computed at start. */
#define USCHED__TRACE_MB_DEFAULT 128
struct usched__tcfg {
    uint32_t mb, chunks;
    bool ring, signal, stall_dump;
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

/* Lifecycle (trace.c, called by api.c). start: sizes the buffers from
 * trace_mb, installs the dump signal when allowed, starts the dump thread
 * and the periodic summary thread when asked. stop: after the workers have
 * exited, writes the file (every chunk kept) and frees everything. */
int usched__trace_start(struct usched *s);
int usched__trace_stop(struct usched *s);
/* The stall monitor saw a stall begin: dumps the flight recorder when the
 * trace_stall_dump setting asks (by the dump thread, not the monitor). */
void usched__trace_stalled(struct usched *s);
/* usched_set for the trace_* keys above: -ENOENT for another key. */
int usched__trace_set(struct usched *s, const char *key, const char *value, bool started);

/* The trace file and buffers (trace.c): opened by usched_start before the
 * workers start (a bad path fails there), closed at destroy. */
int usched__trace_open(struct usched *s);
void usched__trace_close(struct usched *s);

#endif
