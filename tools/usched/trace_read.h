/*
 * Streaming reader of usched trace files (docs/trace.md, the format in
 * src/tracefmt/tracefmt.h): the header, an index of the chunks (one entry
 * per 64 KiB chunk), then the events of all CPUs merged in time order, one
 * at a time. Memory: a chunk buffer per CPU plus the index, whatever the
 * number of events. Every malformed input is an error naming the file, the
 * offset and what is wrong.
 */
#ifndef USCHED_TOOLS_TRACE_READ_H
#define USCHED_TOOLS_TRACE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "tracefmt/tracefmt.h"
#include "usched.h"

struct tr_cpu {
    int os, package, llc, l2, core;
};

struct tr_meta {
    char version[32], policy[64], mode[8];
    int ncpus, smt;
    uint64_t dropped, t0;
    struct tr_cpu *cpu; /* [ncpus] */
};

/* One event, as the library recorded it (trace.h): type USCHED__TEV_*, cpu
 * the CPU whose track it is on (-1: outside threads), name for a name event
 * (name_len bytes, valid until the next tr_next). For a stop, blk is what it
 * blocked on. */
struct tr_ev {
    uint64_t ns, id, a;
    uint32_t b;
    uint16_t c;
    uint8_t type, blk;
    int cpu;
    const char *name;
    size_t name_len;
};

struct tr_file;

/* Opens path, reads its header and indexes its chunks: 0, or -1 with the
 * reason in err. */
int tr_open(struct tr_file **out, const char *path, char *err, size_t errlen);
const struct tr_meta *tr_meta(const struct tr_file *f);
/* The time of the first and last event (decodes each CPU's last chunk). */
int tr_span(struct tr_file *f, uint64_t *first, uint64_t *last);
/* Positions the merge so that the next events are those from from_ns on
 * (starting at each CPU's chunk holding from_ns; a few earlier events of
 * that chunk come too). 0 or -1. */
int tr_seek(struct tr_file *f, uint64_t from_ns);
/* The next event in time order: 1, 0 at the end, -1 on malformed input. */
int tr_next(struct tr_file *f, struct tr_ev *ev);
const char *tr_error(const struct tr_file *f);
/* Chunks and bytes of the file (for the summary). */
void tr_size(const struct tr_file *f, uint64_t *bytes, uint64_t *chunks);
void tr_close(struct tr_file *f);

#endif
