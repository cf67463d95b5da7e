/*
 * Trace events and the wake-up latency histogram (docs/trace.md).
 *
 * Recording. Each CPU stores the events it decides, as they happen, as
 * fixed records (a clock reading and the hook's arguments) in a buffer only
 * its worker writes (no lock, no atomic read-modify-write); outside threads
 * (spawns and wake-ups from plain threads, the stall monitor) write one
 * shared buffer under a spin lock. A buffer is a ring of 64 KiB chunks, at
 * most trace_mb MiB over all buffers: when the last chunk fills, a file
 * trace drops the events that follow (counted, the file says how many) and
 * a flight recorder (trace_mode=ring) reuses its oldest chunk. The file is
 * written by usched_trace_dump, at destroy, on SIGUSR2 when the program
 * allows it, and after a stall when asked (trace.c): the dump encodes the
 * records as Perfetto packets (tracefmt/tracefmt.h), off the workers.
 *
 * Off (the default), every hook costs one load of s->tracing and a branch
 * predicted not taken. On, a worker's event is a clock read and a record's
 * stores in line; a new chunk and the outside buffer are out of line.
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
#include <stdio.h>

#include "arch/arch.h"
#include "core/timer.h"
#include "tracefmt/tracefmt.h"

/* The events, what a fiber blocks on, the stop codes: tracefmt/tracefmt.h. */

/* A recorded event: what the hook was given, and the trace clock's reading
 * (the TSC's ticks, or CLOCK_MONOTONIC's ns when the TSC is not used, see
 * usched__tcfg). The recorder only stores it; a dump encodes the records as
 * Perfetto packets (tracedump.c), converting the ticks to ns.
 *
 * Short form, one record of 16 bytes: the reading as dt, ticks after the
 * base; id and a in 32 bits, b in 16, c in 8. An event whose values do not
 * fit (dt at or past 2^32 ticks, or the reading before the base; a fiber
 * id, count or duration past 2^32; a queue length past 2^16) takes the long
 * form, two records: the first with USCHED__TREC_LONG in type, the reading
 * whole (low half in dt, high half in id), c in b and b in a; the second
 * holds id and a, 64 bits each (usched__trec_long). A name event is long,
 * followed by its text (b bytes) in the records after it. The base is the
 * chunk's at its start, then the reading of the last long record before
 * (so a chunk that spans more than 2^32 ticks pays one long record per gap). */
struct usched__trec {
    uint32_t dt;
    uint8_t type;
    uint8_t c;
    uint16_t b;
    uint32_t id;
    uint32_t a;
};
#define USCHED__TREC_LONG 0x80
struct usched__trec_long {
    uint64_t id, a;
};

/* A chunk of records: 64 KiB, the unit a flight recorder drops. Only the
 * owner writes rec[n..]; it publishes each record with a release store of
 * n, so a dump (acquire) may copy rec[0..n) while the owner appends. A
 * chunk is reset (n = 0, a new base: a clock reading taken then) only under
 * its buffer's lock, which a dump holds while it copies. A dump encodes each
 * chunk into a packet sequence that stands alone (tracedump.c). */
#define USCHED__TRACE_CHUNK (64 * 1024)
#define USCHED__TRACE_NREC ((USCHED__TRACE_CHUNK - 16) / sizeof(struct usched__trec))
/* Chunks are mapped with their pages populated: a page fault per 4 KiB
 * written (256 events) let a loaded machine's kernel preempt the worker at
 * every one. At start, each CPU's buffer maps and populates its share of
 * USCHED__TRACE_PREFAULT_MB (its whole ring under the default trace_mb), so
 * that a worker never enters the kernel for its trace; past that share, a
 * worker maps USCHED__TRACE_SLAB chunks at a time when it needs them (once
 * per ~65,000 events). */
#define USCHED__TRACE_SLAB 16
#define USCHED__TRACE_PREFAULT_MB 256

struct usched__tchunk {
    _Atomic uint32_t n;
    uint64_t base;
    struct usched__trec rec[USCHED__TRACE_NREC];
};

/* A CPU's (or the outside threads') buffer: a ring of up to `max` chunks,
 * `head` the oldest of `count`. Owner only (the worker; for the outside
 * buffer, whoever holds `lock`), except: the chunk list (ring, head, count)
 * changes under `lock`, which dumps take; `dropped` is read by dumps
 * (relaxed). */
struct usched__tbuf {
    struct usched__tchunk *cur; /* being written; NULL before the first event */
    struct usched__trec *pos, *end; /* cur->rec[n], one past its last record */
    uint64_t base;              /* of the next short record: cur->base, or the last long record's reading */
    uint64_t step_ts;           /* a switch's stop: the clock its run and migration share */
    bool step;                  /* step_ts is for the run that follows */
    bool full;                  /* not a ring and no chunk left: events are dropped */
    uint32_t seq;               /* Perfetto sequence id */
    uint64_t uuid;              /* its track */
    struct usched__tchunk **ring;
    uint32_t max, head, count;
    struct usched__tchunk *slab; /* chunks mapped, populated, not yet used */
    uint32_t slab_left;
    struct usched__tchunk *map0; /* the mapping made at start (map0_n chunks), or NULL */
    uint32_t map0_n;
    _Atomic uint64_t dropped;
    _Atomic uint32_t lock;
};

/* A stop event's c with this bit set: the run of the next fiber follows at
 * once on the same CPU (a switch from fiber to fiber), and takes the stop's
 * clock reading instead of its own. */
#define USCHED__TSTOP_SWITCH 0x100

/* Settings (usched_set, api.c -> usched__trace_set): trace_mb (all buffers
 * together, MiB; 0: USCHED__TRACE_MB_DEFAULT), trace_mode ring, trace_signal
 * (the program allows SIGUSR2 dumps), trace_stall_dump, trace_clock
 * monotonic. chunks: per buffer, computed at start.
 *
 * The trace clock: when the TSC runs at a constant rate through sleep
 * states (x86-64 with constant_tsc and nonstop_tsc; aarch64's cntvct_el0
 * always), events record the TSC itself (tsc), which costs a fraction of
 * clock_gettime; t0_ticks and t0_ns are a reading of both clocks at start,
 * and a dump converts ticks to CLOCK_MONOTONIC ns on the line through that
 * reading and one of its own. Otherwise, or with trace_clock=monotonic,
 * events record CLOCK_MONOTONIC. */
#define USCHED__TRACE_MB_DEFAULT 128
struct usched__tcfg {
    uint32_t mb, chunks;
    bool ring, signal, stall_dump, monotonic;
    bool tsc;
    uint64_t t0_ticks, t0_ns;
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

/* The trace clock (usched__tcfg): the TSC (or aarch64's virtual counter)
 * when usable, else CLOCK_MONOTONIC in ns. Not ordered against the loads
 * and stores around it (no fence): a fence costs more than the read. */
static inline uint64_t usched__trace_ticks(bool tsc)
{
    if (tsc) return usched__cycles(); /* arch/: rdtsc, or cntvct_el0 */
    return usched__now_ns();
}

/* Out of line (trace.c): writes the event in the long form at tb->pos,
 * taking a new chunk when fewer than two records are left (locked: the
 * caller holds tb's lock), and publishes it. */
void usched__trace_long(struct usched *s, struct usched__tbuf *tb, bool locked, uint64_t ts, int type, uint64_t id,
                        uint64_t a, uint32_t b, uint16_t c);

/* Writes one event at r, the next free record of tb's chunk, and publishes
 * it: in the short form when its values fit, else by usched__trace_long. A
 * switch reads the clock once: its stop (USCHED__TSTOP_SWITCH), its
 * migration and its run happen within a few dozen instructions. */
static inline __attribute__((always_inline)) void usched__trace_fill(struct usched *s, struct usched__tbuf *tb,
                                                                     struct usched__trec *r, bool locked, bool tsc,
                                                                     int type, uint64_t id, uint64_t a, uint32_t b,
                                                                     uint16_t c)
{
    uint64_t ts;
    if ((type == USCHED__TEV_run || type == USCHED__TEV_migrate) && tb->step) {
        ts = tb->step_ts;
        if (type == USCHED__TEV_run) tb->step = false;
    } else {
        ts = usched__trace_ticks(tsc);
        if (type == USCHED__TEV_stop && (c & USCHED__TSTOP_SWITCH)) {
            tb->step = true;
            tb->step_ts = ts;
        }
    }
    if (type == USCHED__TEV_stop) c &= (uint16_t)~USCHED__TSTOP_SWITCH;
    uint64_t dt = ts - tb->base; /* wraps past 2^32 when ts is before the base */
    if (__builtin_expect((((dt | id | a) >> 32) | (b >> 16) | (uint32_t)(c >> 8)) != 0, 0)) {
        usched__trace_long(s, tb, locked, ts, type, id, a, b, c);
        return;
    }
    r->dt = (uint32_t)dt;
    r->type = (uint8_t)type;
    r->c = (uint8_t)c;
    r->b = (uint16_t)b;
    r->id = (uint32_t)id;
    r->a = (uint32_t)a;
    tb->pos = r + 1;
    atomic_store_explicit(&tb->cur->n, (uint32_t)(r + 1 - tb->cur->rec), memory_order_release);
}

/* Out of line: appends one event to w's buffer (or the outside one when w
 * is NULL or belongs to another scheduler), taking a new chunk when the
 * current one is full. Only called when s->tracing. */
void usched__trace_rec(struct usched *s, struct usched__wk *w, int type, uint64_t id, uint64_t a,
                       uint32_t b, uint16_t c);

/* A worker's own event: the record in line while its chunk has room; once
 * a file trace is full, only the count of events dropped. */
static inline __attribute__((always_inline)) void usched__trace_put(struct usched *s, struct usched__wk *w,
                                                                    struct usched__tbuf *tb, bool tsc, int type,
                                                                    uint64_t id, uint64_t a, uint32_t b, uint16_t c)
{
    struct usched__trec *r = tb->pos;
    if (__builtin_expect(r != tb->end, 1))
        usched__trace_fill(s, tb, r, false, tsc, type, id, a, b, c);
    else if (tb->full)
        atomic_store_explicit(&tb->dropped, atomic_load_explicit(&tb->dropped, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    else
        usched__trace_rec(s, w, type, id, a, b, c);
}

/* The hook: one predictable branch when tracing is off (the arguments are
 * evaluated only when tracing); on, a worker of s records in line, others
 * (no worker, or another scheduler's) call usched__trace_rec.
 * USCHED__TRACE_T takes the type as a value. */
#define USCHED__TRACE_T(sch, wk, type, id, a, b, c)                                                      \
    do {                                                                                                 \
        if (__builtin_expect((sch)->tracing, 0)) {                                                       \
            struct usched__wk *trace_w_ = (wk);                                                          \
            if (trace_w_ && trace_w_->s == (sch))                                                        \
                usched__trace_put((sch), trace_w_, &trace_w_->tbuf, (sch)->tcfg.tsc, (type), (id), (a), \
                                  (uint32_t)(b), (uint16_t)(c));                                         \
            else                                                                                         \
                usched__trace_rec((sch), trace_w_, (type), (id), (a), (uint32_t)(b), (uint16_t)(c));     \
        }                                                                                                \
    } while (0)
#define USCHED__TRACE(s, w, type, id, a, b, c) USCHED__TRACE_T(s, w, USCHED__TEV_##type, id, a, b, c)
/* The same, always out of line: for the hottest paths that record rarely
 * (a spawn), where the in-line record's code made the untraced path save
 * more registers (usched__place_fork: 8 instructions more per spawn). */
#define USCHED__TRACE_OOL_T(sch, wk, type, id, a, b, c)                                              \
    do {                                                                                             \
        if (__builtin_expect((sch)->tracing, 0))                                                     \
            usched__trace_rec((sch), (wk), (type), (id), (a), (uint32_t)(b), (uint16_t)(c));         \
    } while (0)

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

/* The dump (tracedump.c). clock_pair: a reading of the trace clock (tsc:
 * the TSC) and of CLOCK_MONOTONIC at one instant. dump_to: writes s's
 * whole trace to f (0 or a negative errno); the caller holds s->tr's lock
 * or has stopped the workers. dropped: the events dropped so far. */
void usched__trace_clock_pair(bool tsc, uint64_t *ticks, uint64_t *ns);
int usched__trace_dump_to(struct usched *s, FILE *f);
uint64_t usched__trace_dropped(struct usched *s);

#endif
