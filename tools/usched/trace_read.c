/*
 * Streaming reader of usched trace files (trace_read.h).
 *
 * Pass 1 (tr_open) reads the file once, packet by packet, keeping only the
 * header's "usched" event and, for each chunk (a packet that clears its
 * sequence's incremental state), its offset, sequence and first time.
 * Pass 2 (tr_next) keeps a cursor per sequence (a CPU, or the outside
 * threads) that reads one chunk at a time with pread and decodes its
 * packets; the cursor with the earliest pending event goes next.
 */
#include "trace_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#define MAX_PACKET (1u << 20) /* larger: not a usched trace */
#define MAX_CHUNK (4u << 20)

struct chunk {
    uint64_t off, end, ns;
    uint32_t seq;
};

struct cursor {
    uint32_t seq;
    size_t *chunks; /* indexes into f->idx, in file order */
    size_t nchunks, next_chunk;
    uint8_t *buf;
    size_t len, pos;
    uint64_t last_ns, cur_fiber, base_off;
    uint32_t runq;
    int open; /* 0 none, 1 a run, 2 a park */
    bool have;
    struct tr_ev ev;
    char name[USCHED_NAME_MAX + 1];
};

struct tr_file {
    const char *path;
    int fd;
    uint64_t size;
    struct tr_meta meta;
    struct chunk *idx;
    size_t nidx;
    struct cursor *cur; /* [ncpus + 1] */
    int ncur;
    char name[USCHED_NAME_MAX + 1]; /* the last name event's, for the caller */
    char err[512];
};

static int fail(struct tr_file *f, uint64_t off, const char *fmt, ...)
{
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(f->err, sizeof f->err, "%s: offset %llu: %s", f->path, (unsigned long long)off, what);
    return -1;
}

const char *tr_error(const struct tr_file *f)
{
    return f->err;
}

const struct tr_meta *tr_meta(const struct tr_file *f)
{
    return &f->meta;
}

void tr_size(const struct tr_file *f, uint64_t *bytes, uint64_t *chunks)
{
    *bytes = f->size;
    *chunks = f->nidx;
}

/* ---- protobuf fields ------------------------------------------------------------ */

struct field {
    unsigned num, wt;
    uint64_t v;            /* varint */
    const uint8_t *p;      /* PB_LEN */
    size_t len;
};

/* The next field of [*pp, end): 1, 0 at end, -1 malformed. */
static int next_field(const uint8_t **pp, const uint8_t *end, struct field *fl)
{
    if (*pp >= end) return 0;
    uint64_t tag;
    if (tf_get_varint(pp, end, &tag) < 0) return -1;
    fl->num = (unsigned)(tag >> 3);
    fl->wt = (unsigned)(tag & 7);
    switch (fl->wt) {
    case PB_VARINT:
        return tf_get_varint(pp, end, &fl->v) < 0 ? -1 : 1;
    case PB_I64:
        if (end - *pp < 8) return -1;
        *pp += 8;
        return 1;
    case PB_I32:
        if (end - *pp < 4) return -1;
        *pp += 4;
        return 1;
    case PB_LEN:
        if (tf_get_varint(pp, end, &fl->v) < 0 || fl->v > (uint64_t)(end - *pp)) return -1;
        fl->p = *pp;
        fl->len = (size_t)fl->v;
        *pp += fl->len;
        return 1;
    default:
        return -1;
    }
}

/* ---- pass 1: the header and the index ------------------------------------------- */

static int parse_cpus(struct tr_file *f, const uint8_t *s, size_t len, uint64_t off)
{
    char *txt = strndup((const char *)s, len), *save = NULL;
    if (!txt) return fail(f, off, "out of memory");
    int n = 0;
    for (char *tok = strtok_r(txt, ";", &save); tok; tok = strtok_r(NULL, ";", &save), n++) {
        struct tr_cpu c;
        if (n >= f->meta.ncpus ||
            sscanf(tok, "%d,%d,%d,%d,%d", &c.os, &c.package, &c.llc, &c.l2, &c.core) != 5 || c.package < 0 ||
            c.llc < 0 || c.l2 < 0 || c.core < 0) {
            free(txt);
            return fail(f, off, "the \"usched\" event's cpus list is malformed at CPU %d", n);
        }
        f->meta.cpu[n] = c;
    }
    free(txt);
    if (n != f->meta.ncpus) return fail(f, off, "the \"usched\" event lists %d CPUs, not ncpus %d", n, f->meta.ncpus);
    return 0;
}

static void copy_str(char *dst, size_t cap, const uint8_t *s, size_t len)
{
    if (len >= cap) len = cap - 1;
    memcpy(dst, s, len);
    dst[len] = 0;
}

/* The header's "usched" event (its annotations have plain names). */
static int parse_meta(struct tr_file *f, const uint8_t *p, const uint8_t *end, uint64_t ts, uint64_t off)
{
    struct field fl;
    int r;
    bool named = false;
    const uint8_t *cpus = NULL;
    size_t cpus_len = 0;
    while ((r = next_field(&p, end, &fl)) > 0) {
        if (fl.num == TF_E_NAME && fl.wt == PB_LEN)
            named = fl.len == strlen(TF_META_EVENT) && !memcmp(fl.p, TF_META_EVENT, fl.len);
        if (fl.num != TF_E_ANNOT || fl.wt != PB_LEN) continue;
        const uint8_t *a = fl.p, *ae = fl.p + fl.len;
        struct field af;
        char key[32] = "";
        const uint8_t *sv = NULL;
        size_t sl = 0;
        uint64_t uv = 0;
        while ((r = next_field(&a, ae, &af)) > 0) {
            if (af.num == TF_A_NAME && af.wt == PB_LEN) copy_str(key, sizeof key, af.p, af.len);
            else if (af.num == TF_A_STRING && af.wt == PB_LEN) sv = af.p, sl = af.len;
            else if (af.num == TF_A_UINT && af.wt == PB_VARINT) uv = af.v;
        }
        if (r < 0) return fail(f, off, "a header annotation is malformed");
        if (!strcmp(key, "version") && sv) copy_str(f->meta.version, sizeof f->meta.version, sv, sl);
        else if (!strcmp(key, "policy") && sv) copy_str(f->meta.policy, sizeof f->meta.policy, sv, sl);
        else if (!strcmp(key, "mode") && sv) copy_str(f->meta.mode, sizeof f->meta.mode, sv, sl);
        else if (!strcmp(key, "ncpus")) f->meta.ncpus = uv <= 65536 ? (int)uv : -1;
        else if (!strcmp(key, "smt")) f->meta.smt = (int)(uv < 64 ? uv : 64);
        else if (!strcmp(key, "dropped")) f->meta.dropped = uv;
        else if (!strcmp(key, TF_META_CPUS) && sv) cpus = sv, cpus_len = sl;
    }
    if (r < 0) return fail(f, off, "the header event is malformed");
    if (!named) return 0;
    if (f->meta.ncpus <= 0) return fail(f, off, "the \"usched\" event has no valid ncpus");
    if (!cpus) return fail(f, off, "the \"usched\" event has no cpus list");
    f->meta.cpu = calloc((size_t)f->meta.ncpus, sizeof *f->meta.cpu);
    if (!f->meta.cpu) return fail(f, off, "out of memory");
    f->meta.t0 = ts;
    return parse_cpus(f, cpus, cpus_len, off);
}

/* A sequential reader over the file for pass 1. */
struct srd {
    int fd;
    uint8_t *buf;
    size_t len, pos;
    uint64_t off; /* file offset of buf[0] */
};

/* Makes n bytes available at buf + pos: 0, or -1 at EOF / error. */
static int srd_need(struct srd *r, size_t n)
{
    if (r->len - r->pos >= n) return 0;
    memmove(r->buf, r->buf + r->pos, r->len - r->pos);
    r->off += r->pos;
    r->len -= r->pos;
    r->pos = 0;
    while (r->len < n) {
        ssize_t k = read(r->fd, r->buf + r->len, 2 * MAX_PACKET - r->len);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        r->len += (size_t)k;
    }
    return 0;
}

static int index_packet(struct tr_file *f, const uint8_t *p, const uint8_t *end, uint64_t off, size_t *cap)
{
    struct field fl;
    int r;
    uint64_t seq = 0, flags = 0, ts = 0;
    const uint8_t *te = NULL, *te_end = NULL;
    while ((r = next_field(&p, end, &fl)) > 0) {
        if (fl.num == TF_P_SEQ && fl.wt == PB_VARINT) seq = fl.v;
        else if (fl.num == TF_P_SEQ_FLAGS && fl.wt == PB_VARINT) flags = fl.v;
        else if (fl.num == TF_P_TIMESTAMP && fl.wt == PB_VARINT) ts = fl.v;
        else if (fl.num == TF_P_TRACK_EVENT && fl.wt == PB_LEN) te = fl.p, te_end = fl.p + fl.len;
    }
    if (r < 0) return fail(f, off, "a packet is malformed");
    if (seq == TF_SEQ_HEADER) {
        if (te && !f->meta.cpu && parse_meta(f, te, te_end, ts, off) < 0) return -1;
        return 0;
    }
    if (!(flags & TF_SEQ_CLEARED)) return 0;
    if (!f->meta.cpu) return fail(f, off, "a chunk comes before the \"usched\" header event");
    if (seq < 1 || seq > (uint64_t)f->meta.ncpus + 1)
        return fail(f, off, "a chunk of sequence %llu (the file has %d CPUs)", (unsigned long long)seq, f->meta.ncpus);
    if (f->nidx == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        struct chunk *ni = realloc(f->idx, nc * sizeof *ni);
        if (!ni) return fail(f, off, "out of memory");
        f->idx = ni;
        *cap = nc;
    }
    if (f->nidx) f->idx[f->nidx - 1].end = off;
    f->idx[f->nidx++] = (struct chunk){.off = off, .end = f->size, .ns = ts, .seq = (uint32_t)seq};
    return 0;
}

static int index_file(struct tr_file *f)
{
    struct srd r = {.fd = f->fd, .buf = malloc(2 * MAX_PACKET)};
    if (!r.buf) return fail(f, 0, "out of memory");
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        if (srd_need(&r, 1) < 0) break; /* the end */
        uint64_t off = r.off + r.pos;
        srd_need(&r, 11);
        const uint8_t *p = r.buf + r.pos, *end = r.buf + r.len;
        uint64_t tag, len;
        if (tf_get_varint(&p, end, &tag) < 0 || tag != ((TF_TRACE_PACKET << 3) | PB_LEN) ||
            tf_get_varint(&p, end, &len) < 0) {
            rc = fail(f, off, off == 0 ? "not a Perfetto protobuf trace (write one with USCHED_TRACE=FILE)"
                                       : "not a trace packet");
            break;
        }
        if (len > MAX_PACKET) {
            rc = fail(f, off, "a packet of %llu bytes (at most %u in a usched trace)", (unsigned long long)len,
                      MAX_PACKET);
            break;
        }
        size_t hdr = (size_t)(p - (r.buf + r.pos));
        if (srd_need(&r, hdr + len) < 0) {
            rc = fail(f, off, "the file ends inside a packet (truncated)");
            break;
        }
        const uint8_t *body = r.buf + r.pos + hdr;
        if ((rc = index_packet(f, body, body + len, off, &cap)) < 0) break;
        r.pos += hdr + len;
    }
    free(r.buf);
    if (rc == 0 && !f->meta.cpu) rc = fail(f, 0, "not a usched trace (no \"usched\" header event)");
    return rc;
}

/* ---- pass 2: cursors ---------------------------------------------------------------- */

static int cursor_load(struct tr_file *f, struct cursor *c)
{
    if (c->next_chunk >= c->nchunks) return 0;
    const struct chunk *ch = &f->idx[c->chunks[c->next_chunk++]];
    uint64_t n = ch->end - ch->off;
    if (n > MAX_CHUNK) return fail(f, ch->off, "a chunk of %llu bytes (at most %u)", (unsigned long long)n, MAX_CHUNK);
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(f->fd, c->buf + got, (size_t)n - got, (off_t)(ch->off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return fail(f, ch->off, "cannot read the chunk: %s", k < 0 ? strerror(errno) : "file shrank");
        got += (size_t)k;
    }
    c->len = (size_t)n;
    c->pos = 0;
    c->base_off = ch->off;
    return 1;
}

/* Before reading from a chunk that does not follow the last one read: what
 * runs is unknown until the next run. (A sequence's chunks follow each
 * other in time, a flight recorder's too: it drops the oldest.) */
static void cursor_restart(struct cursor *c, size_t chunk)
{
    c->next_chunk = chunk;
    c->len = c->pos = 0;
    c->open = 0;
    c->cur_fiber = 0;
    c->runq = 0;
}

struct annots {
    uint64_t v[TF_NANAMES];
    uint32_t have; /* bit per annotation */
    const uint8_t *str;
    size_t str_len;
};

static int parse_event(const uint8_t *p, const uint8_t *end, uint64_t *type, uint64_t *name, uint64_t *track,
                       struct annots *an)
{
    struct field fl;
    int r;
    while ((r = next_field(&p, end, &fl)) > 0) {
        if (fl.num == TF_E_TYPE && fl.wt == PB_VARINT) *type = fl.v;
        else if (fl.num == TF_E_NAME_IID && fl.wt == PB_VARINT) *name = fl.v;
        else if (fl.num == TF_E_TRACK && fl.wt == PB_VARINT) *track = fl.v;
        else if (fl.num == TF_E_ANNOT && fl.wt == PB_LEN) {
            const uint8_t *a = fl.p, *ae = fl.p + fl.len;
            struct field af;
            uint64_t iid = 0, v = 0;
            const uint8_t *s = NULL;
            size_t sl = 0;
            while ((r = next_field(&a, ae, &af)) > 0) {
                if (af.num == TF_A_NAME_IID && af.wt == PB_VARINT) iid = af.v;
                else if ((af.num == TF_A_UINT || af.num == TF_A_INT) && af.wt == PB_VARINT) v = af.v;
                else if (af.num == TF_A_STRING && af.wt == PB_LEN) s = af.p, sl = af.len;
            }
            if (r < 0) return -1;
            if (iid >= 1 && iid <= TF_NANAMES) {
                an->v[iid - 1] = v;
                an->have |= 1u << (iid - 1);
                if (s) an->str = s, an->str_len = sl;
            }
        }
    }
    return r;
}

#define HAS(an, n) (((an).have >> TF_A_##n) & 1)

/* Decodes packets of c until one makes an event: 1, 0 (cursor done), -1. */
static int cursor_advance(struct tr_file *f, struct cursor *c)
{
    for (;;) {
        if (c->pos >= c->len) {
            int r = cursor_load(f, c);
            if (r <= 0) {
                c->have = false;
                return r;
            }
        }
        uint64_t off = c->base_off + c->pos;
        const uint8_t *p = c->buf + c->pos, *end = c->buf + c->len;
        struct field pk;
        if (next_field(&p, end, &pk) <= 0 || pk.num != TF_TRACE_PACKET || pk.wt != PB_LEN)
            return fail(f, off, "not a trace packet");
        c->pos = (size_t)(p - c->buf);
        const uint8_t *q = pk.p, *qe = pk.p + pk.len;
        struct field fl;
        int r;
        uint64_t ts = 0, clock = 0, type = 0, name = 0, track = 0;
        bool has_ts = false, snap = false;
        uint64_t snap_ns = 0;
        const uint8_t *te = NULL, *te_end = NULL;
        while ((r = next_field(&q, qe, &fl)) > 0) {
            if (fl.num == TF_P_TIMESTAMP && fl.wt == PB_VARINT) ts = fl.v, has_ts = true;
            else if (fl.num == TF_P_CLOCK_ID && fl.wt == PB_VARINT) clock = fl.v;
            else if (fl.num == TF_P_TRACK_EVENT && fl.wt == PB_LEN) te = fl.p, te_end = fl.p + fl.len;
            else if (fl.num == TF_P_CLOCK_SNAPSHOT && fl.wt == PB_LEN) {
                const uint8_t *s = fl.p, *se = fl.p + fl.len;
                struct field cf;
                while ((r = next_field(&s, se, &cf)) > 0) {
                    if (cf.num != TF_CS_CLOCK || cf.wt != PB_LEN) continue;
                    const uint8_t *k = cf.p, *ke = cf.p + cf.len;
                    struct field kf;
                    uint64_t id = 0, v = 0;
                    while ((r = next_field(&k, ke, &kf)) > 0) {
                        if (kf.num == TF_CK_ID) id = kf.v;
                        else if (kf.num == TF_CK_TS) v = kf.v;
                    }
                    if (r < 0) break;
                    if (id == TF_CLOCK_INCR) snap = true, snap_ns = v;
                }
                if (r < 0) break;
            }
        }
        if (r < 0) return fail(f, off, "a packet is malformed");
        uint64_t ns = clock == TF_CLOCK_MONOTONIC ? ts : c->last_ns + (has_ts ? ts : 0);
        c->last_ns = snap ? snap_ns : ns;
        if (!te) continue;
        struct annots an = {.have = 0};
        if (parse_event(te, te_end, &type, &name, &track, &an) < 0) return fail(f, off, "a track event is malformed");
        struct tr_ev *e = &c->ev;
        memset(e, 0, sizeof *e);
        e->ns = ns;
        e->cpu = c->seq <= (uint32_t)f->meta.ncpus ? (int)c->seq - 1 : -1;
        if (type == TF_T_BEGIN && name >= TF_FIBER_IID) {
            e->type = USCHED__TEV_run;
            e->id = name - TF_FIBER_IID;
            if (HAS(an, runq)) c->runq = (uint32_t)an.v[TF_A_runq];
            e->b = c->runq;
            c->cur_fiber = e->id;
            c->open = 1;
        } else if (type == TF_T_BEGIN && (name == TF_N_park + 1 || name == TF_N_park_poll + 1)) {
            e->type = USCHED__TEV_park;
            e->c = name == TF_N_park_poll + 1;
            c->open = 2;
        } else if (type == TF_T_END && HAS(an, end)) {
            bool was_run = c->open == 1 && c->cur_fiber;
            e->type = USCHED__TEV_stop;
            e->id = c->cur_fiber;
            e->c = (uint16_t)an.v[TF_A_end];
            e->blk = (uint8_t)(an.v[TF_A_on] < USCHED__NTBLK ? an.v[TF_A_on] : 0);
            e->b = e->blk;
            c->cur_fiber = 0;
            c->open = 0;
            if (!was_run) continue; /* a chunk of a flight recorder began inside the run */
        } else if (type == TF_T_END) {
            bool was_park = c->open == 2;
            e->type = USCHED__TEV_unpark;
            c->open = 0;
            if (!was_park) continue;
        } else if (type == TF_T_INSTANT && name >= 1 && name <= TF_NENAMES) {
            e->id = an.v[TF_A_fiber];
            switch ((int)name - 1) {
            case TF_N_spawn:
            case TF_N_wake:
            case TF_N_io_ready:
                e->type = name - 1 == TF_N_spawn  ? USCHED__TEV_spawn
                          : name - 1 == TF_N_wake ? USCHED__TEV_wake
                                                  : USCHED__TEV_io_ready;
                e->a = HAS(an, waker) ? an.v[TF_A_waker] : c->cur_fiber;
                e->b = (uint32_t)an.v[TF_A_cpu];
                e->c = (uint16_t)an.v[TF_A_reason];
                break;
            case TF_N_steal:
                e->type = USCHED__TEV_steal;
                e->a = an.v[TF_A_fibers];
                e->b = (uint32_t)an.v[TF_A_victim];
                e->c = (uint16_t)an.v[TF_A_level];
                break;
            case TF_N_migrate:
                e->type = USCHED__TEV_migrate;
                e->b = (uint32_t)an.v[TF_A_from];
                e->c = (uint16_t)an.v[TF_A_level];
                break;
            case TF_N_io_wait:
                e->type = USCHED__TEV_io_wait;
                e->id = c->cur_fiber;
                e->a = an.v[TF_A_fd];
                break;
            case TF_N_stall:
                e->type = USCHED__TEV_stall;
                e->a = an.v[TF_A_held_ns];
                e->b = (uint32_t)an.v[TF_A_cpu];
                if (e->b < (uint32_t)f->meta.ncpus) e->cpu = (int)e->b;
                break;
            case TF_N_name:
                e->type = USCHED__TEV_name;
                e->id = c->cur_fiber;
                copy_str(c->name, sizeof c->name, an.str ? an.str : (const uint8_t *)"", an.str ? an.str_len : 0);
                e->name = c->name;
                e->name_len = strlen(c->name);
                break;
            default:
                continue;
            }
        } else {
            continue; /* not an event of ours: skipped */
        }
        (void)track;
        c->have = true;
        return 1;
    }
}

int tr_open(struct tr_file **out, const char *path, char *err, size_t errlen)
{
    struct tr_file *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    f->path = path;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (f->fd < 0 || fstat(f->fd, &st) < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        tr_close(f);
        return -1;
    }
    f->size = (uint64_t)st.st_size;
    if (index_file(f) < 0) goto bad;
    f->ncur = f->meta.ncpus + 1;
    f->cur = calloc((size_t)f->ncur, sizeof *f->cur);
    if (!f->cur) {
        fail(f, 0, "out of memory");
        goto bad;
    }
    for (int i = 0; i < f->ncur; i++) f->cur[i].seq = (uint32_t)i + 1;
    for (size_t i = 0; i < f->nidx; i++) {
        struct cursor *c = &f->cur[f->idx[i].seq - 1];
        if (c->nchunks % 256 == 0) {
            size_t *nc = realloc(c->chunks, (c->nchunks + 256) * sizeof *nc);
            if (!nc) {
                fail(f, 0, "out of memory");
                goto bad;
            }
            c->chunks = nc;
        }
        c->chunks[c->nchunks++] = i;
    }
    for (int i = 0; i < f->ncur; i++) {
        uint64_t big = 0;
        for (size_t k = 0; k < f->cur[i].nchunks; k++) {
            const struct chunk *ch = &f->idx[f->cur[i].chunks[k]];
            if (ch->end - ch->off > big) big = ch->end - ch->off;
        }
        if (big > MAX_CHUNK) {
            fail(f, 0, "a chunk of %llu bytes (at most %u)", (unsigned long long)big, MAX_CHUNK);
            goto bad;
        }
        f->cur[i].buf = malloc(big ? (size_t)big : 1);
        if (!f->cur[i].buf) {
            fail(f, 0, "out of memory");
            goto bad;
        }
    }
    if (tr_seek(f, 0) < 0) goto bad;
    *out = f;
    return 0;
bad:
    snprintf(err, errlen, "%s", f->err);
    tr_close(f);
    return -1;
}

int tr_seek(struct tr_file *f, uint64_t from_ns)
{
    for (int i = 0; i < f->ncur; i++) {
        struct cursor *c = &f->cur[i];
        size_t k = 0;
        while (k + 1 < c->nchunks && f->idx[c->chunks[k + 1]].ns <= from_ns) k++;
        cursor_restart(c, k);
        if (cursor_advance(f, c) < 0) return -1;
        while (c->have && c->ev.ns < from_ns)
            if (cursor_advance(f, c) < 0) return -1;
    }
    return 0;
}

int tr_next(struct tr_file *f, struct tr_ev *ev)
{
    struct cursor *best = NULL;
    for (int i = 0; i < f->ncur; i++) {
        struct cursor *c = &f->cur[i];
        if (c->have && (!best || c->ev.ns < best->ev.ns)) best = c;
    }
    if (!best) return 0;
    *ev = best->ev;
    if (ev->name) { /* the cursor's buffer is reused by the next decode */
        memcpy(f->name, best->name, sizeof f->name);
        ev->name = f->name;
    }
    return cursor_advance(f, best) < 0 ? -1 : 1;
}

int tr_span(struct tr_file *f, uint64_t *first, uint64_t *last)
{
    *first = UINT64_MAX;
    *last = 0;
    for (int i = 0; i < f->ncur; i++) {
        struct cursor *c = &f->cur[i];
        if (!c->nchunks) continue;
        uint64_t ns0 = f->idx[c->chunks[0]].ns;
        if (ns0 < *first) *first = ns0;
        cursor_restart(c, c->nchunks - 1);
        do {
            if (cursor_advance(f, c) < 0) return -1;
            if (c->have && c->ev.ns > *last) *last = c->ev.ns;
        } while (c->have);
    }
    if (*first == UINT64_MAX) *first = *last = f->meta.t0;
    return tr_seek(f, 0);
}

void tr_close(struct tr_file *f)
{
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    for (int i = 0; f->cur && i < f->ncur; i++) {
        free(f->cur[i].chunks);
        free(f->cur[i].buf);
    }
    free(f->cur);
    free(f->idx);
    free(f->meta.cpu);
    free(f);
}
