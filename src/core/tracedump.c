/*
 * The dump (docs/trace.md): the trace clock's conversion to CLOCK_MONOTONIC
 * ns, the records encoded as Perfetto packets (tracefmt/tracefmt.h) and the
 * file written: its header (clocks, tracks, the "usched" event), then each
 * buffer's chunks, oldest first. trace.c records and decides when to dump.
 *
 * Why Perfetto's protobuf and a hand-written encoder: see docs/trace.md.
 *
 * What a record becomes at a dump (a: its argument, b, c as in trace.h):
 *   run       a slice begins on the CPU's track, named "fiber ID" (iid
 *             TF_FIBER_IID + ID); "runq" when it changed; the end of the
 *             fiber's wake-up flow
 *   stop      the slice ends; "end" (1 yield, 2 block, 3 exit, 4 preempted), "on" when
 *             it blocked (USCHED__TBLK_*)
 *   spawn, wake, io_ready  an instant: "fiber", "cpu" chosen, "reason";
 *             "waker" only when it is not the fiber running on this track
 *             (the reader knows that one); the start of a flow
 *   steal     an instant: "fiber", "fibers" taken, "victim", "level"
 *   migrate   an instant: "fiber", "from", "level"
 *   park, unpark  a slice "parked" or "parked (I/O poller)"
 *   io_wait, name  an instant about the running fiber: "fd" or "name"
 *   stall     an instant on the held CPU's track: "fiber", "cpu", "held_ns"
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "tracefmt/tracefmt.h"

/* ---- the fixed interned names ------------------------------------------------- */

static const char *const ename_str[TF_NENAMES] = {
#define X(id, str) str,
    TF_EVENT_NAMES(X)
#undef X
};
static const char *const aname_str[TF_NANAMES] = {
#define X(id) #id,
    TF_ANNOT_NAMES(X)
#undef X
};

/* The InternedData body every chunk's first packet carries. */
static uint8_t interned[1024];
static size_t interned_len;
static pthread_once_t interned_once = PTHREAD_ONCE_INIT;

static uint8_t *intern_table(uint8_t *p, unsigned field, const char *const *names, int n)
{
    for (int i = 0; i < n; i++) {
        uint8_t *e = tf_open(p, field);
        uint8_t *q = tf_uint(e, TF_IN_IID, (uint64_t)i + 1);
        q = tf_bytes(q, TF_IN_NAME, names[i], strlen(names[i]));
        p = tf_close(e, q);
    }
    return p;
}

static void interned_build(void)
{
    uint8_t *p = intern_table(interned, TF_I_EVENT_NAMES, ename_str, TF_NENAMES);
    p = intern_table(p, TF_I_ANNOT_NAMES, aname_str, TF_NANAMES);
    interned_len = (size_t)(p - interned);
}

/* ---- the trace clock ---------------------------------------------------------- */

/* A reading of both clocks at one instant: the ticks halfway between two
 * reads around the clock_gettime, from the closest of five tries (a try
 * the kernel interrupted is far apart). */
void usched__trace_clock_pair(bool tsc, uint64_t *ticks, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t t1 = usched__trace_ticks(tsc), n = usched__now_ns(), t2 = usched__trace_ticks(tsc);
        if (t2 - t1 < best) {
            best = t2 - t1;
            *ticks = t1 + (t2 - t1) / 2;
            *ns = n;
        }
    }
}

/* Ticks to CLOCK_MONOTONIC ns: the line through the start's reading and the
 * dump's (trace.h). */
struct tconv {
    uint64_t t0, ns0;
    double ns_per_tick;
};

/* At least this long between the two readings: a shorter span would make
 * the rate's error, tens of ns over the span, a visible fraction. */
#define CALIBRATE_NS 2000000ull

static struct tconv tconv_now(struct usched *s)
{
    struct tconv cv = {s->tcfg.t0_ticks, s->tcfg.t0_ns, 1.0};
    if (!s->tcfg.tsc) return cv;
    uint64_t t1 = 0, n1 = 0;
    usched__trace_clock_pair(true, &t1, &n1);
    if (n1 - cv.ns0 < CALIBRATE_NS) {
        uint64_t left = CALIBRATE_NS - (n1 - cv.ns0);
        struct timespec ts = {0, (long)left};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
        usched__trace_clock_pair(true, &t1, &n1);
    }
    if (t1 > cv.t0 && n1 > cv.ns0) cv.ns_per_tick = (double)(n1 - cv.ns0) / (double)(t1 - cv.t0);
    return cv;
}

static uint64_t tconv_ns(const struct tconv *cv, uint64_t ticks)
{
    return cv->ns0 + (uint64_t)((double)(int64_t)(ticks - cv->t0) * cv->ns_per_tick);
}

/* ---- encoding (at a dump) -------------------------------------------------------- */

/* What the encoder of one buffer keeps from packet to packet. */
struct enc {
    const struct tconv *cv;
    uint32_t seq;
    uint64_t uuid;
    uint64_t last_ns;   /* timestamp of the last packet (deltas; never decreasing) */
    uint64_t cur_fiber; /* the fiber running (a wake-up by it omits its id) */
    uint32_t runq;      /* the last run queue length written */
    uint64_t named[64]; /* fibers whose run name is interned in this chunk (by id % 64) */
};

/* The first packet of a chunk: clears the sequence's incremental state, sets
 * the clock (absolute here, deltas after), the defaults and the names. */
static uint8_t *chunk_begin(struct enc *e, uint8_t *p, uint64_t now)
{
    uint8_t *pk = tf_open(p, TF_TRACE_PACKET);
    uint8_t *q = tf_uint(pk, TF_P_TIMESTAMP, now);
    q = tf_uint(q, TF_P_CLOCK_ID, TF_CLOCK_MONOTONIC);
    q = tf_uint(q, TF_P_SEQ, e->seq);
    q = tf_uint(q, TF_P_SEQ_FLAGS, TF_SEQ_CLEARED);
    uint8_t *cs = tf_open(q, TF_P_CLOCK_SNAPSHOT);
    uint8_t *ck = tf_open(cs, TF_CS_CLOCK);
    uint8_t *r = tf_uint(tf_uint(ck, TF_CK_ID, TF_CLOCK_MONOTONIC), TF_CK_TS, now);
    r = tf_close(ck, r);
    ck = tf_open(r, TF_CS_CLOCK);
    r = tf_uint(tf_uint(tf_uint(ck, TF_CK_ID, TF_CLOCK_INCR), TF_CK_TS, now), TF_CK_INCR, 1);
    r = tf_close(ck, r);
    q = tf_close(cs, r);
    uint8_t *d = tf_open(q, TF_P_DEFAULTS);
    r = tf_uint(d, TF_D_CLOCK_ID, TF_CLOCK_INCR);
    uint8_t *ted = tf_open(r, TF_D_TE_DEFAULTS);
    r = tf_close(ted, tf_uint(ted, TF_TED_TRACK, e->uuid));
    q = tf_close(d, r);
    q = tf_bytes(q, TF_P_INTERNED, interned, interned_len);
    e->last_ns = now;
    e->runq = UINT32_MAX;
    e->cur_fiber = 0; /* not known: the first wake-ups name their waker */
    memset(e->named, 0, sizeof e->named);
    return tf_close(pk, q);
}

static uint8_t *annot(uint8_t *p, int name, unsigned kind, uint64_t v)
{
    uint8_t *a = tf_open(p, TF_E_ANNOT);
    return tf_close(a, tf_uint(tf_uint(a, TF_A_NAME_IID, (uint64_t)name + 1), kind, v));
}
#define ANN(p, name, v) annot(p, TF_A_##name, TF_A_UINT, (v))

/* The interned name of fiber id's run slices, once per chunk (a cache
 * slot taken by another fiber only costs a second copy). */
static uint8_t *intern_fiber(struct enc *e, uint8_t *q, uint64_t id)
{
    uint64_t *slot = &e->named[id % 64];
    if (*slot == id) return q;
    *slot = id;
    char name[32];
    int n = snprintf(name, sizeof name, "fiber %llu", (unsigned long long)id);
    uint8_t *in = tf_open(q, TF_P_INTERNED);
    uint8_t *en = tf_open(in, TF_I_EVENT_NAMES);
    uint8_t *r = tf_bytes(tf_uint(en, TF_IN_IID, TF_FIBER_IID + id), TF_IN_NAME, name, (size_t)n);
    return tf_close(in, tf_close(en, r));
}

static uint8_t *instant(uint8_t *q, int name)
{
    return tf_uint(tf_uint(q, TF_E_TYPE, TF_T_INSTANT), TF_E_NAME_IID, (uint64_t)name + 1);
}

/* The largest packet a record makes (a name event with its string, or a
 * run with its interned name). */
#define MAXPKT 256

/* An event read back from its records (trace.h): text, a name's. */
struct tev {
    uint64_t ts, id, a;
    uint32_t b;
    uint16_t c;
    int type;
    const void *text;
};

/* Reads the event at r (m records left in its chunk; *base, the base of a
 * short record, which a long one replaces with its reading) into ev;
 * returns how many records it takes, 0 when it was not published whole. */
static uint32_t rec_read(const struct usched__trec *r, uint32_t m, uint64_t *base, struct tev *ev)
{
    if (!(r->type & USCHED__TREC_LONG)) {
        *ev = (struct tev){.ts = *base + r->dt, .id = r->id, .a = r->a, .b = r->b, .c = r->c, .type = r->type};
        return 1;
    }
    if (m < 2) return 0;
    struct usched__trec_long l;
    memcpy(&l, &r[1], sizeof l);
    *ev = (struct tev){.ts = (uint64_t)r->id << 32 | r->dt, .id = l.id, .a = l.a, .b = r->a, .c = r->b,
                       .type = r->type & ~USCHED__TREC_LONG, .text = &r[2]};
    uint32_t k = 2;
    if (ev->type == USCHED__TEV_name) k += (uint32_t)((ev->b + sizeof *r - 1) / sizeof *r);
    if (k > m) return 0;
    *base = ev->ts;
    return k;
}

/* One event as a packet at p; returns its end. */
static uint8_t *encode_rec(struct enc *e, uint8_t *p, const struct tev *rec)
{
    uint64_t now = tconv_ns(e->cv, rec->ts);
    if (now < e->last_ns) now = e->last_ns;
    uint64_t id = rec->id, a = rec->a;
    uint32_t b = rec->b;
    uint16_t c = rec->c;
    int type = rec->type;
    uint8_t *pk = tf_open(p, TF_TRACE_PACKET);
    uint8_t *q = tf_uint(pk, TF_P_TIMESTAMP, now - e->last_ns);
    q = tf_uint(q, TF_P_SEQ, e->seq);
    if (type == USCHED__TEV_run) q = intern_fiber(e, q, id);
    uint8_t *te = tf_open(q, TF_P_TRACK_EVENT);
    q = te;
    switch (type) {
    case USCHED__TEV_run:
        q = tf_uint(tf_uint(q, TF_E_TYPE, TF_T_BEGIN), TF_E_NAME_IID, TF_FIBER_IID + id);
        if (b != e->runq) q = ANN(q, runq, b);
        q = tf_uint(q, TF_E_FLOW_END, id);
        e->runq = b;
        e->cur_fiber = id;
        break;
    case USCHED__TEV_stop:
        q = ANN(tf_uint(q, TF_E_TYPE, TF_T_END), end, c);
        if (c == USCHED__TSTOP_BLOCK) q = ANN(q, on, b);
        e->cur_fiber = 0;
        break;
    case USCHED__TEV_spawn:
    case USCHED__TEV_wake:
    case USCHED__TEV_io_ready:
        q = instant(q, type == USCHED__TEV_spawn ? TF_N_spawn : type == USCHED__TEV_wake ? TF_N_wake : TF_N_io_ready);
        q = ANN(q, fiber, id);
        if (a != e->cur_fiber) q = ANN(q, waker, a);
        q = ANN(ANN(q, cpu, b), reason, c);
        q = tf_uint(q, TF_E_FLOW, id);
        break;
    case USCHED__TEV_steal:
        q = ANN(ANN(ANN(ANN(instant(q, TF_N_steal), fiber, id), fibers, a), victim, b), level, c);
        break;
    case USCHED__TEV_migrate:
        q = ANN(ANN(ANN(instant(q, TF_N_migrate), fiber, id), from, b), level, c);
        break;
    case USCHED__TEV_park:
        q = tf_uint(tf_uint(q, TF_E_TYPE, TF_T_BEGIN), TF_E_NAME_IID, (uint64_t)(c ? TF_N_park_poll : TF_N_park) + 1);
        break;
    case USCHED__TEV_unpark:
        q = tf_uint(q, TF_E_TYPE, TF_T_END);
        break;
    case USCHED__TEV_io_wait:
        q = annot(instant(q, TF_N_io_wait), TF_A_fd, TF_A_INT, a);
        break;
    case USCHED__TEV_stall:
        q = tf_uint(instant(q, TF_N_stall), TF_E_TRACK, TF_UUID_CPU(b));
        q = ANN(ANN(ANN(q, fiber, id), cpu, b), held_ns, a);
        break;
    case USCHED__TEV_name: {
        uint8_t *an = tf_open(instant(q, TF_N_name), TF_E_ANNOT);
        uint8_t *r = tf_uint(an, TF_A_NAME_IID, TF_A_name + 1);
        q = tf_close(an, tf_bytes(r, TF_A_STRING, rec->text, b));
        break;
    }
    default:
        break;
    }
    q = tf_close(te, q);
    e->last_ns = now;
    return tf_close(pk, q);
}

/* Encodes n records of one chunk (its base: base) as a chunk of packets
 * into out (room for MAXPKT per record and a first packet); returns the
 * bytes written. */
static size_t encode_chunk(struct enc *e, uint8_t *out, const struct usched__trec *r, uint32_t n, uint64_t base)
{
    struct tev ev;
    uint32_t k = n ? rec_read(r, n, &base, &ev) : 0;
    if (!k) return 0;
    uint64_t first = tconv_ns(e->cv, ev.ts);
    uint8_t *p = chunk_begin(e, out, first > e->last_ns ? first : e->last_ns);
    for (uint32_t i = 0; k; k = i < n ? rec_read(&r[i], n - i, &base, &ev) : 0) {
        p = encode_rec(e, p, &ev);
        i += k;
    }
    return (size_t)(p - out);
}

/* ---- the file ------------------------------------------------------------------ */

uint64_t usched__trace_dropped(struct usched *s)
{
    uint64_t d = atomic_load_explicit(&s->tout.dropped, memory_order_relaxed);
    for (int c = 0; c < s->ncpus; c++) d += atomic_load_explicit(&s->wk[c]->tbuf.dropped, memory_order_relaxed);
    return d;
}

static uint8_t *str_field(uint8_t *p, unsigned field, const char *str)
{
    return tf_bytes(p, field, str, strlen(str));
}

/* A track descriptor: a process (tid < 0) or a thread of process pid. */
static uint8_t *track(uint8_t *p, uint64_t uuid, uint64_t parent, int pid, int tid, const char *name)
{
    uint8_t *pk = tf_open(p, TF_TRACE_PACKET);
    uint8_t *q = tf_uint(pk, TF_P_SEQ, TF_SEQ_HEADER);
    uint8_t *td = tf_open(q, TF_P_TRACK_DESC);
    q = tf_uint(td, TF_TD_UUID, uuid);
    if (parent) q = tf_uint(q, TF_TD_PARENT, parent);
    uint8_t *d = tf_open(q, tid < 0 ? TF_TD_PROCESS : TF_TD_THREAD);
    q = tf_uint(d, TF_PD_PID, (uint64_t)pid);
    if (tid >= 0) q = str_field(tf_uint(q, TF_TH_TID, (uint64_t)tid), TF_TH_NAME, name);
    else q = str_field(q, TF_PD_NAME, name);
    q = tf_close(d, q);
    return tf_close(pk, tf_close(td, q));
}

static uint8_t *meta_str(uint8_t *p, const char *name, const char *v)
{
    uint8_t *a = tf_open(p, TF_E_ANNOT);
    return tf_close(a, str_field(str_field(a, TF_A_NAME, name), TF_A_STRING, v));
}

static uint8_t *meta_uint(uint8_t *p, const char *name, uint64_t v)
{
    uint8_t *a = tf_open(p, TF_E_ANNOT);
    return tf_close(a, tf_uint(str_field(a, TF_A_NAME, name), TF_A_UINT, v));
}

/* The header: clocks, tracks, and the "usched" event (tracefmt/tracefmt.h). */
static int write_header(struct usched *s, FILE *f)
{
    usched__topo_t *t = s->topo;
    int n = s->ncpus;
    size_t cap = 4096 + (size_t)n * 160;
    uint8_t *buf = malloc(cap), *p = buf;
    char *cpus = malloc((size_t)n * 64 + 1);
    if (!buf || !cpus) {
        free(buf);
        free(cpus);
        return -ENOMEM;
    }
    struct timespec mono, boot;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_BOOTTIME, &boot);
    uint8_t *pk = tf_open(p, TF_TRACE_PACKET);
    uint8_t *q = tf_uint(pk, TF_P_SEQ, TF_SEQ_HEADER);
    uint8_t *cs = tf_open(q, TF_P_CLOCK_SNAPSHOT);
    uint8_t *ck = tf_open(cs, TF_CS_CLOCK);
    q = tf_close(ck, tf_uint(tf_uint(ck, TF_CK_ID, TF_CLOCK_MONOTONIC), TF_CK_TS,
                             (uint64_t)mono.tv_sec * 1000000000ull + (uint64_t)mono.tv_nsec));
    ck = tf_open(q, TF_CS_CLOCK);
    q = tf_close(ck, tf_uint(tf_uint(ck, TF_CK_ID, TF_CLOCK_BOOTTIME), TF_CK_TS,
                             (uint64_t)boot.tv_sec * 1000000000ull + (uint64_t)boot.tv_nsec));
    q = tf_uint(q, TF_CS_PRIMARY, TF_CLOCK_MONOTONIC);
    p = tf_close(pk, tf_close(cs, q));

    char name[96];
    int nllc = usched__topo_ngroups(t, TOPO_LLC), last = -1;
    for (int c = 0; c < n; c++) {
        int llc = usched__topo_group(t, c, TOPO_LLC);
        if (llc != last) {
            snprintf(name, sizeof name, "package %d, LLC %d", usched__topo_group(t, c, TOPO_PACKAGE), llc);
            p = track(p, TF_UUID_LLC(llc), 0, llc + 1, -1, name);
            last = llc;
        }
        snprintf(name, sizeof name, "cpu %d, core %d", c, usched__topo_group(t, c, TOPO_SMT));
        p = track(p, TF_UUID_CPU(c), TF_UUID_LLC(llc), llc + 1, c + 1, name);
    }
    p = track(p, TF_UUID_LLC(nllc), 0, nllc + 1, -1, "outside threads");
    p = track(p, TF_UUID_CPU(n), TF_UUID_LLC(nllc), nllc + 1, n + 1, "spawns and wake-ups from outside threads");

    pk = tf_open(p, TF_TRACE_PACKET);
    q = tf_uint(pk, TF_P_SEQ, TF_SEQ_HEADER);
    uint8_t *td = tf_open(q, TF_P_TRACK_DESC);
    q = tf_close(td, str_field(tf_uint(td, TF_TD_UUID, TF_UUID_META), TF_TD_NAME, TF_META_EVENT));
    p = tf_close(pk, q);

    size_t len = 0;
    for (int c = 0; c < n; c++)
        len += (size_t)sprintf(cpus + len, "%d,%d,%d,%d,%d;", usched__topo_os_index(t, c),
                               usched__topo_group(t, c, TOPO_PACKAGE), usched__topo_group(t, c, TOPO_LLC),
                               usched__topo_group(t, c, TOPO_L2), usched__topo_group(t, c, TOPO_SMT));
    pk = tf_open(p, TF_TRACE_PACKET);
    q = tf_uint(tf_uint(pk, TF_P_TIMESTAMP, s->trace_t0), TF_P_CLOCK_ID, TF_CLOCK_MONOTONIC);
    q = tf_uint(q, TF_P_SEQ, TF_SEQ_HEADER);
    uint8_t *te = tf_open(q, TF_P_TRACK_EVENT);
    q = tf_uint(tf_uint(te, TF_E_TYPE, TF_T_INSTANT), TF_E_TRACK, TF_UUID_META);
    q = str_field(q, TF_E_NAME, TF_META_EVENT);
    q = meta_str(q, "version", USCHED_VERSION_STRING);
    q = meta_str(q, "policy", s->ops->name);
    q = meta_uint(q, "ncpus", (uint64_t)n);
    q = meta_uint(q, "smt", (uint64_t)usched__topo_smt_width(t));
    q = meta_str(q, "mode", s->tcfg.ring ? "ring" : "file");
    q = meta_uint(q, "dropped", usched__trace_dropped(s));
    q = meta_str(q, TF_META_CPUS, cpus);
    p = tf_close(pk, tf_close(te, q));
    int rc = fwrite(buf, 1, (size_t)(p - buf), f) == (size_t)(p - buf) ? 0 : -EIO;
    free(buf);
    free(cpus);
    return rc;
}

/* Copies tb's chunks (oldest first) under its lock, then encodes and
 * writes them. */
static int write_buffer(struct usched__tbuf *tb, FILE *f, const struct tconv *cv)
{
    usched__spin_lock(&tb->lock);
    size_t total = 0;
    uint32_t nch = tb->count;
    for (uint32_t i = 0; i < nch; i++)
        total += atomic_load_explicit(&tb->ring[(tb->head + i) % tb->max]->n, memory_order_acquire);
    struct usched__trec *copy = total ? malloc(total * sizeof *copy) : NULL;
    uint32_t *lens = nch ? malloc(nch * sizeof *lens) : NULL;
    uint64_t *bases = nch ? malloc(nch * sizeof *bases) : NULL;
    size_t k = 0;
    uint32_t got = 0;
    for (; copy && lens && bases && got < nch; got++) {
        struct usched__tchunk *ch = tb->ring[(tb->head + got) % tb->max];
        uint32_t n = atomic_load_explicit(&ch->n, memory_order_acquire);
        if (k + n > total) n = (uint32_t)(total - k); /* grew since counted: what was counted */
        memcpy(copy + k, ch->rec, n * sizeof *copy);
        lens[got] = n;
        bases[got] = ch->base;
        k += n;
    }
    usched__spin_unlock(&tb->lock);
    int rc = 0;
    uint8_t *out = k ? malloc(USCHED__TRACE_NREC * MAXPKT + 1024) : NULL;
    if ((total && (!copy || !lens || !bases)) || (k && !out)) rc = -ENOMEM;
    struct enc e = {.cv = cv, .seq = tb->seq, .uuid = tb->uuid};
    k = 0;
    for (uint32_t i = 0; rc == 0 && out && i < got; i++) {
        size_t len = encode_chunk(&e, out, copy + k, lens[i], bases[i]);
        if (len && fwrite(out, 1, len, f) != len) rc = -EIO;
        k += lens[i];
    }
    free(out);
    free(bases);
    free(lens);
    free(copy);
    return rc;
}

int usched__trace_dump_to(struct usched *s, FILE *f)
{
    pthread_once(&interned_once, interned_build);
    struct tconv cv = tconv_now(s);
    int rc = write_header(s, f);
    for (int c = 0; rc == 0 && c < s->ncpus; c++) rc = write_buffer(&s->wk[c]->tbuf, f, &cv);
    if (rc == 0) rc = write_buffer(&s->tout, f, &cv);
    if (rc == 0 && fflush(f) != 0) rc = -EIO;
    return rc;
}
