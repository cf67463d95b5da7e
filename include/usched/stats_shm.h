/*
 * The live statistics segment (docs/top.md): the layout of the POSIX
 * shared-memory object a program running usched with USCHED_STATS_SHM=1
 * publishes its counters in, for `usched top PID` or any other reader.
 *
 * One segment per started scheduler, named USCHED_STATS_SHM_PREFIX, the
 * program's PID, '.', and the scheduler's index in the process (0 for the
 * first started): "/usched-stats.1234.0", /dev/shm/usched-stats.1234.0 on
 * Linux. The program creates it with mode 0400 (its user may read it,
 * nobody may open it for writing), rewrites it from the stall monitor's
 * thread (never from a worker's path), and removes it when the scheduler
 * is destroyed.
 *
 * Layout, native byte order (the reader runs on the same machine):
 *   struct usched_stats_shm_hdr                        at 0
 *   level names:   nlevels * USCHED_STATS_SHM_NAME_LEN at levels_off
 *   counter names: nstats * USCHED_STATS_SHM_NAME_LEN  at names_off
 *   latency bucket lower bounds (ns): lat_nb * u64     at lat_low_off
 *   outside threads' counters: nstats * u64            at outside_off
 *   ncpus CPU records of cpu_size bytes each          at cpus_off:
 *     struct usched_stats_shm_cpu, then nstats u64 counters, then lat_nb
 *     u64 wake-up latency bucket counts
 * Strings are NUL-terminated within their USCHED_STATS_SHM_NAME_LEN bytes.
 * Counters are named in the segment, so a reader looks them up by name
 * and a counter added to the library does not change the version; a change
 * to the structs below or to the order of the parts does.
 *
 * Consistency: `seq` is a sequence lock. The writer makes it odd, rewrites
 * the variable fields (the header's from `seq` on, the outside counters, the
 * CPU records), then makes it even again (release). A reader copies the
 * segment between two acquire loads of `seq` and keeps the copy only when
 * both loads saw the same even value. Everything before `seq` and the name
 * and bucket tables are written once, before `magic`, and never change.
 */
#ifndef USCHED_STATS_SHM_H
#define USCHED_STATS_SHM_H

#include <stdint.h>

#define USCHED_STATS_SHM_PREFIX "/usched-stats."
#define USCHED_STATS_SHM_MAGIC "USCHSTAT" /* 8 bytes, no NUL */
#define USCHED_STATS_SHM_VERSION 1u
#define USCHED_STATS_SHM_NAME_LEN 32u
#define USCHED_STATS_SHM_MAX_LEVELS 8u

/* A worker's state (struct usched_stats_shm_cpu.state). */
enum usched_stats_shm_state {
    USCHED_STATS_SHM_RUNNING = 0,  /* running a fiber */
    USCHED_STATS_SHM_SPINNING = 1, /* awake without a fiber: looking for work, spinning, stealing */
    USCHED_STATS_SHM_PARKED = 2,   /* parked on its futex */
    USCHED_STATS_SHM_POLLER = 3,   /* parked in the I/O poller (epoll_wait) */
};

struct usched_stats_shm_hdr {
    /* written once, before magic */
    char magic[8];           /* USCHED_STATS_SHM_MAGIC */
    uint32_t version;        /* USCHED_STATS_SHM_VERSION */
    uint32_t hdr_size;       /* sizeof(struct usched_stats_shm_hdr) */
    uint64_t size;           /* bytes of the whole segment */
    int32_t pid;             /* the program's process id */
    uint32_t index;          /* the scheduler's index in the process */
    uint64_t start_ns;       /* CLOCK_MONOTONIC when the scheduler started */
    uint32_t ncpus;          /* CPU records */
    uint32_t nstats;         /* counters per record */
    uint32_t lat_nb;         /* wake-up latency buckets per CPU record */
    uint32_t nlevels;        /* topology levels, at most USCHED_STATS_SHM_MAX_LEVELS */
    uint32_t cpu_size;       /* bytes of a CPU record, counters and buckets included */
    uint32_t levels_off, names_off, lat_low_off, outside_off, cpus_off;
    char policy[USCHED_STATS_SHM_NAME_LEN];
    /* rewritten under seq */
    uint64_t seq;            /* even: stable; odd: being rewritten */
    uint64_t published_ns;   /* CLOCK_MONOTONIC of the last rewrite */
    uint64_t publishes;      /* rewrites so far */
    uint64_t live;           /* fibers not yet finished */
    uint32_t global_queue;   /* fibers on the global queue */
    uint32_t spinning;       /* workers spinning for work */
    uint32_t parked;         /* workers parked (futex or poller) */
    uint32_t reserved;
};

struct usched_stats_shm_cpu {
    /* written once */
    int32_t os_cpu;          /* the OS CPU it runs on (-1: a virtual CPU) */
    int32_t group[USCHED_STATS_SHM_MAX_LEVELS]; /* its group at each level (level names) */
    /* rewritten under seq */
    uint32_t state;          /* enum usched_stats_shm_state */
    uint32_t contended;      /* 1: the kernel keeps it waiting for its CPU, 2: and it is packed
                                (takes no new work) (docs/monitor.md) */
    uint32_t runq;           /* fibers in its run queue */
    uint32_t inbox;          /* fibers in its inbox */
    uint32_t next;           /* 1: its next slot holds a fiber */
    uint32_t bound;          /* fibers bound to it */
    uint64_t cur_id;         /* the running fiber's id, 0 none */
    uint64_t lat_max;        /* the longest wake-up latency seen (ns) */
    /* then uint64_t counters[nstats], uint64_t lat[lat_nb] */
};

#endif
