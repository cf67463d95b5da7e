/*
 * The trace file format (docs/trace.md): Perfetto's protobuf trace, a
 * `Trace` message made of `TracePacket`s carrying `TrackEvent`s. Shared by
 * the writer (core/trace.c) and the reader (`usched trace`, tools/usched/
 * trace_read.c), so that the two agree on every number below: a layer of
 * its own, below core and tools (docs/architecture.md), with no
 * dependency: constants, tables and the varint codec only.
 *
 * Layout of a file:
 *   header   packets on sequence TF_SEQ_HEADER: a clock snapshot
 *            (CLOCK_MONOTONIC and CLOCK_BOOTTIME), the track descriptors
 *            (a process per LLC, a thread per CPU, the outside threads),
 *            and one instant event "usched" whose annotations carry the
 *            version, policy, topology and counts (TF_META_*);
 *   chunks   each CPU's chunks (sequence cpu + 1; the outside threads'
 *            buffer ncpus + 1), oldest first. A chunk starts with a packet
 *            that clears the sequence's incremental state, sets the
 *            defaults (the CPU's track, the sequence's incremental clock
 *            TF_CLOCK_INCR) and interns the fixed names below; every later
 *            packet's timestamp is the delta from the previous one.
 * A chunk stands alone, so a flight recorder can drop its oldest chunks.
 */
#ifndef USCHED_TRACEFMT_TRACEFMT_H
#define USCHED_TRACEFMT_TRACEFMT_H

#include <stddef.h>
#include <stdint.h>

/* ---- protobuf field numbers (the perfetto/trace protos) ------------------- */

enum {
    PB_VARINT = 0,
    PB_I64 = 1,
    PB_LEN = 2,
    PB_I32 = 5,

    TF_TRACE_PACKET = 1, /* Trace.packet */

    TF_P_CLOCK_SNAPSHOT = 6, /* TracePacket */
    TF_P_TIMESTAMP = 8,
    TF_P_SEQ = 10,           /* trusted_packet_sequence_id */
    TF_P_TRACK_EVENT = 11,
    TF_P_INTERNED = 12,
    TF_P_SEQ_FLAGS = 13,
    TF_P_CLOCK_ID = 58,      /* timestamp_clock_id */
    TF_P_DEFAULTS = 59,      /* trace_packet_defaults */
    TF_P_TRACK_DESC = 60,

    TF_SEQ_CLEARED = 1, /* sequence_flags: SEQ_INCREMENTAL_STATE_CLEARED */

    TF_CS_CLOCK = 1,   /* ClockSnapshot.clocks */
    TF_CS_PRIMARY = 2, /* ClockSnapshot.primary_trace_clock */
    TF_CK_ID = 1,      /* ClockSnapshot.Clock */
    TF_CK_TS = 2,
    TF_CK_INCR = 3,

    TF_CLOCK_MONOTONIC = 3,
    TF_CLOCK_BOOTTIME = 6,
    TF_CLOCK_INCR = 64, /* the first sequence-scoped clock id */

    TF_D_CLOCK_ID = 58,   /* TracePacketDefaults.timestamp_clock_id */
    TF_D_TE_DEFAULTS = 11, /* TracePacketDefaults.track_event_defaults */
    TF_TED_TRACK = 11,    /* TrackEventDefaults.track_uuid */

    TF_E_ANNOT = 4, /* TrackEvent */
    TF_E_TYPE = 9,
    TF_E_NAME_IID = 10,
    TF_E_TRACK = 11,
    TF_E_NAME = 23,
    TF_E_FLOW = 47,
    TF_E_FLOW_END = 48,

    TF_T_BEGIN = 1, /* TrackEvent.Type */
    TF_T_END = 2,
    TF_T_INSTANT = 3,

    TF_A_NAME_IID = 1, /* DebugAnnotation */
    TF_A_UINT = 3,
    TF_A_INT = 4,
    TF_A_STRING = 6,
    TF_A_NAME = 10,

    TF_I_EVENT_NAMES = 2, /* InternedData */
    TF_I_ANNOT_NAMES = 3,
    TF_IN_IID = 1,        /* EventName / DebugAnnotationName */
    TF_IN_NAME = 2,

    TF_TD_UUID = 1, /* TrackDescriptor */
    TF_TD_NAME = 2,
    TF_TD_PROCESS = 3,
    TF_TD_THREAD = 4,
    TF_TD_PARENT = 5,
    TF_PD_PID = 1,  /* ProcessDescriptor */
    TF_PD_NAME = 6,
    TF_TH_PID = 1,  /* ThreadDescriptor */
    TF_TH_TID = 2,
    TF_TH_NAME = 5,
};

/* ---- the events (the recorder's calls, core/trace.h) -------------------------- */

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

/* What a blocked fiber waits for (b of a stop event that blocks; "on" of
 * its run slice in the file). */
#define USCHED_TRACE_BLOCKS(X) X(other) X(mutex) X(cond) X(chan) X(sem) X(wg) X(sleep) X(join) X(io) X(offload)
enum usched__tev_type {
#define X(name, desc) USCHED__TEV_##name,
    USCHED_TRACE_EVENTS(X)
#undef X
    USCHED__NTEV
};

enum usched__tblk {
#define X(name) USCHED__TBLK_##name,
    USCHED_TRACE_BLOCKS(X)
#undef X
    USCHED__NTBLK
};

/* Stop codes (c of a stop event). */
enum { USCHED__TSTOP_YIELD = 1, USCHED__TSTOP_BLOCK, USCHED__TSTOP_EXIT, USCHED__TSTOP_PREEMPT };

/* ---- names interned in every chunk (iid = index + 1) ---------------------- */

/* Event names of instants and of the idle slices. */
#define TF_EVENT_NAMES(X)                                                        \
    X(spawn, "spawn") X(wake, "wake") X(io_ready, "io_ready") X(steal, "steal") \
    X(migrate, "migrate") X(io_wait, "io_wait") X(stall, "stall") X(name, "name") \
    X(park, "parked") X(park_poll, "parked (I/O poller)")
enum tf_ename {
#define X(id, str) TF_N_##id,
    TF_EVENT_NAMES(X)
#undef X
    TF_NENAMES
};

/* Debug annotation names. */
#define TF_ANNOT_NAMES(X)                                                              \
    X(fiber) X(waker) X(cpu) X(reason) X(runq) X(end) X(on) X(victim) X(level) X(fibers) \
    X(from) X(fd) X(held_ns) X(name)
enum tf_aname {
#define X(id) TF_A_##id,
    TF_ANNOT_NAMES(X)
#undef X
    TF_NANAMES
};

/* A run slice is named "fiber ID" (interned on first use in a chunk) with
 * iid TF_FIBER_IID + ID: the reader takes the fiber from the iid. */
#define TF_FIBER_IID 256ull

/* Track uuids: a CPU's thread track, an LLC's process track. */
#define TF_UUID_CPU(c) (0x10000ull + (uint64_t)(c))
#define TF_UUID_LLC(l) (0x20000ull + (uint64_t)(l))
#define TF_UUID_META 0x30000ull
#define TF_SEQ_HEADER 0xffffu

/* The header's "usched" event: annotation names (plain strings). */
#define TF_META_EVENT "usched"
#define TF_META_CPUS "cpus" /* "os,package,llc,l2,core;" per CPU */

/* ---- varints ------------------------------------------------------------------ */

static inline uint8_t *tf_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint8_t *tf_tag(uint8_t *p, unsigned field, unsigned wt)
{
    return tf_varint(p, ((uint64_t)field << 3) | wt);
}

static inline uint8_t *tf_uint(uint8_t *p, unsigned field, uint64_t v)
{
    return tf_varint(tf_tag(p, field, PB_VARINT), v);
}

/* Nested message: tf_open leaves one byte for the length and returns where
 * the body starts; tf_close writes the length (moving the body when it
 * needs more than one byte) and returns the new end. Close inner first. */
static inline uint8_t *tf_open(uint8_t *p, unsigned field)
{
    return tf_tag(p, field, PB_LEN) + 1;
}

static inline uint8_t *tf_close(uint8_t *body, uint8_t *end)
{
    size_t n = (size_t)(end - body);
    if (n < 0x80) {
        body[-1] = (uint8_t)n;
        return end;
    }
    uint8_t len[10];
    size_t k = (size_t)(tf_varint(len, n) - len);
    __builtin_memmove(body + k - 1, body, n);
    __builtin_memcpy(body - 1, len, k);
    return end + k - 1;
}

static inline uint8_t *tf_bytes(uint8_t *p, unsigned field, const void *s, size_t n)
{
    p = tf_varint(tf_tag(p, field, PB_LEN), n);
    __builtin_memcpy(p, s, n);
    return p + n;
}

/* Reads a varint from [*pp, end): 0 and advances, or -1 (truncated or
 * longer than 10 bytes). */
static inline int tf_get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint64_t r = 0;
    for (int sh = 0; sh < 70 && p < end; sh += 7) {
        uint8_t b = *p++;
        r |= (uint64_t)(b & 0x7f) << sh;
        if (!(b & 0x80)) {
            *pp = p;
            *v = r;
            return 0;
        }
    }
    return -1;
}

#endif
