/*
 * Tracing (docs/trace.md): the per-CPU recorders, which store each event as
 * a record when it happens (the hook in trace.h writes a worker's in line;
 * here a new chunk, the outside threads' buffer and names), the trace
 * clock, the dumps that encode the records as Perfetto packets
 * (tracefmt/tracefmt.h) and write a file (usched_trace_dump, at destroy, on
 * SIGUSR2 when allowed, after a stall when asked), the wake-up latency
 * reports, fiber names, and the periodic one-line summary
 * (USCHED_SCHEDTRACE).
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
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "base/error.h"
#include "base/export.h"
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

/* Whether the TSC ticks at one rate, through frequency changes and sleep
 * states: on x86-64 the kernel's constant_tsc and nonstop_tsc flags; the
 * generic timer of aarch64 always does. */
static bool tsc_usable(void)
{
#if defined(__x86_64__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char *line = NULL;
    size_t cap = 0;
    bool ok = false;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "flags", 5) != 0) continue;
        ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
        break;
    }
    free(line);
    fclose(f);
    return ok;
#elif defined(__aarch64__)
    return true;
#else
    return false;
#endif
}

/* A reading of both clocks at one instant: the ticks halfway between two
 * reads around the clock_gettime, from the closest of five tries (a try
 * the kernel interrupted is far apart). */
static void clock_pair(bool tsc, uint64_t *ticks, uint64_t *ns)
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
    clock_pair(true, &t1, &n1);
    if (n1 - cv.ns0 < CALIBRATE_NS) {
        uint64_t left = CALIBRATE_NS - (n1 - cv.ns0);
        struct timespec ts = {0, (long)left};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
        clock_pair(true, &t1, &n1);
    }
    if (t1 > cv.t0 && n1 > cv.ns0) cv.ns_per_tick = (double)(n1 - cv.ns0) / (double)(t1 - cv.t0);
    return cv;
}

static uint64_t tconv_ns(const struct tconv *cv, uint64_t ticks)
{
    return cv->ns0 + (uint64_t)((double)(int64_t)(ticks - cv->t0) * cv->ns_per_tick);
}

/* ---- recording ---------------------------------------------------------------- */

/* A new chunk for tb (its owner): a new one while under the limit, else the
 * oldest for a flight recorder; NULL when the event must be dropped.
 * locked: the caller holds tb->lock (the outside buffer). */
static void list_lock(struct usched__tbuf *tb, bool locked)
{
    if (!locked) usched__spin_lock(&tb->lock);
}

static void list_unlock(struct usched__tbuf *tb, bool locked)
{
    if (!locked) usched__spin_unlock(&tb->lock);
}

static struct usched__trec *next_chunk(struct usched *s, struct usched__tbuf *tb, bool locked)
{
    if (tb->full) return NULL;
    if (!tb->ring) {
        struct usched__tchunk **ring = calloc(s->tcfg.chunks, sizeof *ring);
        if (!ring) return NULL;
        list_lock(tb, locked);
        tb->ring = ring;
        tb->max = s->tcfg.chunks;
        list_unlock(tb, locked);
    }
    struct usched__tchunk *nc = NULL;
    if (tb->count < tb->max) {
        if (!tb->slab_left) {
            uint32_t n = tb->max - tb->count < USCHED__TRACE_SLAB ? tb->max - tb->count : USCHED__TRACE_SLAB;
            void *m = mmap(NULL, n * sizeof *nc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                           -1, 0);
            if (m == MAP_FAILED) return NULL;
            tb->slab = m;
            tb->slab_left = n;
        }
        nc = tb->slab++;
        tb->slab_left--;
    } else if (!s->tcfg.ring) {
        tb->full = true;
        return NULL;
    }
    list_lock(tb, locked); /* against a dump copying the ring */
    if (nc) {
        tb->ring[(tb->head + tb->count) % tb->max] = nc;
        tb->count++;
    } else { /* the oldest becomes the newest: its slot is the tail's */
        nc = tb->ring[tb->head];
        tb->head = (tb->head + 1) % tb->max;
    }
    atomic_store_explicit(&nc->n, 0, memory_order_relaxed);
    list_unlock(tb, locked);
    tb->cur = nc;
    tb->pos = nc->rec;
    tb->end = nc->rec + USCHED__TRACE_NREC;
    return tb->pos;
}

static void count_drop(struct usched__tbuf *tb)
{
    atomic_store_explicit(&tb->dropped, atomic_load_explicit(&tb->dropped, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

void usched__trace_rec(struct usched *s, struct usched__wk *w, int type, uint64_t id, uint64_t a,
                       uint32_t b, uint16_t c)
{
    struct usched__tbuf *tb = (w && w->s == s) ? &w->tbuf : &s->tout;
    bool outside = tb == &s->tout;
    if (outside) usched__spin_lock(&tb->lock);
    struct usched__trec *r = tb->pos;
    if (r == tb->end && !(r = next_chunk(s, tb, outside)))
        count_drop(tb);
    else
        usched__trace_fill(tb, r, s->tcfg.tsc, type, id, a, b, c);
    if (outside) usched__spin_unlock(&tb->lock);
}

/* A name event: its record, then its text in the records that follow (in
 * one chunk). */
static void rec_name(struct usched *s, struct usched__wk *w, uint64_t id, const char *name)
{
    struct usched__tbuf *tb = &w->tbuf;
    size_t len = strnlen(name, USCHED_NAME_MAX);
    uint32_t k = 1 + (uint32_t)((len + sizeof(struct usched__trec) - 1) / sizeof(struct usched__trec));
    if ((size_t)(tb->end - tb->pos) < k && !next_chunk(s, tb, false)) {
        count_drop(tb);
        return;
    }
    struct usched__trec *r = tb->pos;
    *r = (struct usched__trec){.ts = usched__trace_ticks(s->tcfg.tsc), .id = id, .b = (uint32_t)len,
                               .type = USCHED__TEV_name, .n = (uint8_t)(k - 1)};
    memset(r + 1, 0, (k - 1) * sizeof *r);
    memcpy(r + 1, name, len);
    tb->pos = r + k;
    atomic_store_explicit(&tb->cur->n, (uint32_t)(tb->pos - tb->cur->rec), memory_order_release);
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

/* One record as a packet at p; returns its end. */
static uint8_t *encode_rec(struct enc *e, uint8_t *p, const struct usched__trec *rec)
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
        q = tf_close(an, tf_bytes(r, TF_A_STRING, rec + 1, b));
        break;
    }
    default:
        break;
    }
    q = tf_close(te, q);
    e->last_ns = now;
    return tf_close(pk, q);
}

/* Encodes n records of one chunk as a chunk of packets into out (room for
 * MAXPKT per record and a first packet); returns the bytes written. */
static size_t encode_chunk(struct enc *e, uint8_t *out, const struct usched__trec *r, uint32_t n)
{
    if (!n) return 0;
    uint64_t first = tconv_ns(e->cv, r[0].ts);
    uint8_t *p = chunk_begin(e, out, first > e->last_ns ? first : e->last_ns);
    for (uint32_t i = 0; i < n; i += 1u + r[i].n) {
        if (i + 1u + r[i].n > n) break; /* a name's text cut off (not published whole) */
        p = encode_rec(e, p, &r[i]);
    }
    return (size_t)(p - out);
}

/* Maps and populates tb's first n chunks, and its ring, at start (before
 * the workers run). On failure the worker maps them as it needs them. */
static void tbuf_prefault(struct usched *s, struct usched__tbuf *tb, uint32_t n)
{
    tb->ring = calloc(s->tcfg.chunks, sizeof *tb->ring);
    if (!tb->ring) return;
    tb->max = s->tcfg.chunks;
    void *m = mmap(NULL, n * sizeof(struct usched__tchunk), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (m == MAP_FAILED) return;
    tb->map0 = tb->slab = m;
    tb->map0_n = tb->slab_left = n;
}

/* Unmaps the chunks: the mapping made at start, then the slabs a worker
 * mapped, each begins at a chunk whose index in allocation order is map0_n
 * plus a multiple of USCHED__TRACE_SLAB and holds at most that many (fewer
 * at the end of the ring). The ring's slot order is the allocation order
 * until a flight recorder reuses its oldest, which never happens before
 * all max chunks exist: the slots then hold them in allocation order still,
 * rotated (slot i holds chunk i). */
static void tbuf_free(struct usched__tbuf *tb)
{
    if (tb->map0) munmap(tb->map0, tb->map0_n * sizeof(struct usched__tchunk));
    for (uint32_t i = tb->map0_n; i < tb->count; i += USCHED__TRACE_SLAB) {
        uint32_t n = tb->max - i < USCHED__TRACE_SLAB ? tb->max - i : USCHED__TRACE_SLAB;
        munmap(tb->ring[i], n * sizeof(struct usched__tchunk));
    }
    free(tb->ring);
    memset(tb, 0, sizeof *tb);
}

USCHED_EXPORT int usched_set_name(const char *name)
{
    if (!name) return usched__error(EINVAL, "set_name: name is NULL");
    size_t len = strlen(name);
    if (len == 0 || len > USCHED_NAME_MAX)
        return usched__error(EINVAL, "set_name: name '%.80s' must have 1 to %d characters", name,
                             USCHED_NAME_MAX);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == '"' || name[i] == '\\' || name[i] == 0x7f)
            return usched__error(EINVAL, "set_name: name '%.80s' has a control character, quote or backslash",
                                 name);
    struct usched__wk *w = usched__self_wk();
    if (!w || !w->cur) return usched__error(EPERM, "set_name: not called from a fiber");
    usched_t *s = w->s;
    if (!s->tracing) return 0;
    rec_name(s, w, w->cur->id, name);
    return 0;
}

/* ---- settings ------------------------------------------------------------------ */

static int set_bool(const char *key, const char *value, bool *out)
{
    if (value && (!strcmp(value, "1") || !strcmp(value, "0"))) {
        *out = value[0] == '1';
        return 0;
    }
    return usched__error(EINVAL, "%s: '%s' is not 0 or 1", key, value ? value : "(null)");
}

int usched__trace_set(struct usched *s, const char *key, const char *value, bool started)
{
    struct usched__tcfg *t = &s->tcfg;
    bool is_mb = !strcmp(key, "trace_mb"), is_mode = !strcmp(key, "trace_mode");
    bool is_sig = !strcmp(key, "trace_signal"), is_stall = !strcmp(key, "trace_stall_dump");
    bool is_clock = !strcmp(key, "trace_clock");
    if (!is_mb && !is_mode && !is_sig && !is_stall && !is_clock) return -ENOENT;
    if (started) return usched__error(EBUSY, "%s: cannot change after start", key);
    if (is_mb) {
        char *end;
        errno = 0;
        long mb = value ? strtol(value, &end, 10) : -1;
        if (!value || end == value || *end || errno || mb < 1 || mb > 65536)
            return usched__error(EINVAL, "trace_mb: '%s' is not a number of MiB in [1, 65536]",
                                 value ? value : "(null)");
        t->mb = (uint32_t)mb;
        return 0;
    }
    if (is_mode) {
        if (value && (!strcmp(value, "file") || !strcmp(value, "ring"))) {
            t->ring = value[0] == 'r';
            return 0;
        }
        return usched__error(EINVAL, "trace_mode: '%s' is not file or ring", value ? value : "(null)");
    }
    if (is_clock) {
        if (value && (!strcmp(value, "auto") || !strcmp(value, "monotonic"))) {
            t->monotonic = value[0] == 'm';
            return 0;
        }
        return usched__error(EINVAL, "trace_clock: '%s' is not auto or monotonic", value ? value : "(null)");
    }
    return set_bool(key, value, is_sig ? &t->signal : &t->stall_dump);
}

/* ---- start and stop -------------------------------------------------------------- */

static void *dumper_main(void *arg);
static int sig_register(struct usched *s, bool on);
#define SIG_MAX 16 /* schedulers that may take SIGUSR2 at once */

int usched__trace_open(struct usched *s)
{
    if (!s->trace_path) return 0;
    FILE *f = fopen(s->trace_path, "w");
    if (!f) {
        int e = errno;
        return usched__error(e, "trace: cannot create '%s': %s", s->trace_path, strerror(e));
    }
    s->trace_f = f;
    return 0;
}

void usched__trace_close(struct usched *s)
{
    if (s->trace_f) fclose(s->trace_f);
    s->trace_f = NULL;
    s->tracing = false;
}

/* What a dump thread and the dumps share (trace.c only). */
struct usched__trace {
    pthread_mutex_t lock; /* one dump at a time */
    sem_t wake;           /* posted by SIGUSR2 and stalls */
    pthread_t thread;
    bool thread_started;
    _Atomic int stop;
    _Atomic uint32_t stall_pending; /* a stall asked for a dump not yet taken */
    _Atomic uint32_t sig_pending;   /* SIGUSR2s not yet served (lock-free: the handler adds) */
    unsigned ndumps;      /* under lock: numbers the files FILE.N */
};

int usched__trace_start(struct usched *s)
{
    s->trace_t0 = usched__now_ns();
    s->tracing = s->trace_f != NULL;
    if (s->tracing) {
        pthread_once(&interned_once, interned_build);
        s->tcfg.tsc = !s->tcfg.monotonic && tsc_usable();
        clock_pair(s->tcfg.tsc, &s->tcfg.t0_ticks, &s->tcfg.t0_ns);
        uint32_t mb = s->tcfg.mb ? s->tcfg.mb : USCHED__TRACE_MB_DEFAULT;
        uint64_t per = ((uint64_t)mb << 20) / sizeof(struct usched__tchunk) / (uint64_t)(s->ncpus + 1);
        s->tcfg.chunks = per < 2 ? 2 : per > UINT32_MAX ? UINT32_MAX : (uint32_t)per;
        uint64_t pre = ((uint64_t)USCHED__TRACE_PREFAULT_MB << 20) / sizeof(struct usched__tchunk) /
                       (uint64_t)(s->ncpus + 1);
        if (pre > s->tcfg.chunks) pre = s->tcfg.chunks;
        if (pre < 1) pre = 1;
        for (int c = 0; c < s->ncpus; c++) {
            s->wk[c]->tbuf.seq = (uint32_t)c + 1;
            s->wk[c]->tbuf.uuid = TF_UUID_CPU(c);
            tbuf_prefault(s, &s->wk[c]->tbuf, (uint32_t)pre);
        }
        s->tout.seq = (uint32_t)s->ncpus + 1;
        s->tout.uuid = TF_UUID_CPU(s->ncpus);
        tbuf_prefault(s, &s->tout, 1); /* rare events: one chunk ahead */
        struct usched__trace *tr = calloc(1, sizeof *tr);
        if (!tr) return -ENOMEM;
        pthread_mutex_init(&tr->lock, NULL);
        sem_init(&tr->wake, 0, 0);
        s->tr = tr;
        if (s->tcfg.signal || s->tcfg.stall_dump) {
            int rc = -pthread_create(&tr->thread, NULL, dumper_main, s);
            if (rc < 0) return usched__error(-rc, "trace: cannot start its dump thread");
            tr->thread_started = true;
        }
        if (s->tcfg.signal && sig_register(s, true) < 0)
            return usched__error(EBUSY, "trace_signal: at most %d schedulers may take SIGUSR2", SIG_MAX);
    }
    return 0;
}

/* ---- dumps --------------------------------------------------------------------- */

static uint64_t dropped_count(struct usched *s)
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
    q = meta_uint(q, "dropped", dropped_count(s));
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
    size_t k = 0;
    uint32_t got = 0;
    for (; copy && lens && got < nch; got++) {
        struct usched__tchunk *ch = tb->ring[(tb->head + got) % tb->max];
        uint32_t n = atomic_load_explicit(&ch->n, memory_order_acquire);
        if (k + n > total) n = (uint32_t)(total - k); /* grew since counted: what was counted */
        memcpy(copy + k, ch->rec, n * sizeof *copy);
        lens[got] = n;
        k += n;
    }
    usched__spin_unlock(&tb->lock);
    int rc = 0;
    uint8_t *out = k ? malloc(USCHED__TRACE_NREC * MAXPKT + 1024) : NULL;
    if ((total && (!copy || !lens)) || (k && !out)) rc = -ENOMEM;
    struct enc e = {.cv = cv, .seq = tb->seq, .uuid = tb->uuid};
    k = 0;
    for (uint32_t i = 0; rc == 0 && out && i < got; i++) {
        size_t len = encode_chunk(&e, out, copy + k, lens[i]);
        if (len && fwrite(out, 1, len, f) != len) rc = -EIO;
        k += lens[i];
    }
    free(out);
    free(lens);
    free(copy);
    return rc;
}

static int dump_to(struct usched *s, FILE *f)
{
    struct tconv cv = tconv_now(s);
    int rc = write_header(s, f);
    for (int c = 0; rc == 0 && c < s->ncpus; c++) rc = write_buffer(&s->wk[c]->tbuf, f, &cv);
    if (rc == 0) rc = write_buffer(&s->tout, f, &cv);
    if (rc == 0 && fflush(f) != 0) rc = -EIO;
    return rc;
}

USCHED_EXPORT int usched_trace_dump(usched_t *s, const char *path)
{
    if (!s || !path || !*path) return usched__error(EINVAL, "trace_dump: NULL scheduler or empty path");
    if (!atomic_load(&s->started)) return usched__error(ESRCH, "trace_dump: scheduler not started");
    struct usched__trace *tr = s->tr;
    if (!tr) return usched__error(ENODATA, "trace_dump: not tracing (set \"trace\" before usched_start)");
    FILE *f = fopen(path, "w");
    if (!f) {
        int e = errno;
        return usched__error(e, "trace_dump: cannot create '%s': %s", path, strerror(e));
    }
    pthread_mutex_lock(&tr->lock);
    int rc = dump_to(s, f);
    pthread_mutex_unlock(&tr->lock);
    if (fclose(f) != 0 && rc == 0) rc = -EIO;
    if (rc < 0) return usched__error(-rc, "trace_dump: writing '%s' failed: %s", path, strerror(-rc));
    return 0;
}

/* ---- SIGUSR2 and stalls: the dump thread ------------------------------------------ */

/* Schedulers that allowed SIGUSR2 (trace_signal): the handler posts each
 * one's semaphore (sem_post is async-signal-safe); its dump thread writes
 * FILE.N. The handler, once installed, stays (doing nothing without
 * schedulers); it replaces the program's own, which is why a program must
 * ask for it. */
static struct usched *_Atomic sig_sched[SIG_MAX];
static pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;
static bool sig_installed;

/* Handlers running: a scheduler leaving the registry waits for none to be
 * (S1 then S2 in the handler, U1 then U2 when leaving; all seq_cst: either
 * the handler's S2 sees the slot emptied, or U2 sees it counted). */
static _Atomic int sig_inflight;

static void sig_handler(int sig)
{
    (void)sig;
    atomic_fetch_add(&sig_inflight, 1); /* S1 */
    for (int i = 0; i < SIG_MAX; i++) {
        struct usched *s = atomic_load(&sig_sched[i]); /* S2 */
        if (!s) continue;
        atomic_fetch_add_explicit(&s->tr->sig_pending, 1, memory_order_relaxed);
        sem_post(&s->tr->wake);
    }
    atomic_fetch_sub(&sig_inflight, 1);
}

static int sig_register(struct usched *s, bool on)
{
    int rc = on ? -EBUSY : 0;
    pthread_mutex_lock(&sig_lock);
    for (int i = 0; i < SIG_MAX; i++) {
        struct usched *want = on ? NULL : s, *put = on ? s : NULL;
        if (atomic_load(&sig_sched[i]) == want) {
            atomic_store(&sig_sched[i], put); /* U1 when leaving */
            rc = 0;
            break;
        }
    }
    while (!on && atomic_load(&sig_inflight)) /* U2: a handler may still use s */
        sched_yield();
    if (on && !sig_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = sig_handler;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sig_installed = sigaction(SIGUSR2, &sa, NULL) == 0;
    }
    pthread_mutex_unlock(&sig_lock);
    return rc;
}

static void *dumper_main(void *arg)
{
    struct usched *s = arg;
    struct usched__trace *tr = s->tr;
    for (;;) {
        while (sem_wait(&tr->wake) < 0 && errno == EINTR) {}
        /* A request made before the scheduler stopped is served first. */
        bool sig = atomic_exchange(&tr->sig_pending, 0) != 0;
        bool stall = atomic_exchange(&tr->stall_pending, 0) != 0;
        if (!sig && !stall) {
            if (atomic_load(&tr->stop)) break;
            continue;
        }
        pthread_mutex_lock(&tr->lock);
        unsigned k = ++tr->ndumps;
        pthread_mutex_unlock(&tr->lock);
        char path[4096];
        snprintf(path, sizeof path, "%s.%u", s->trace_path, k);
        if (usched_trace_dump(s, path) < 0)
            fprintf(stderr, "usched: %s\n", usched_last_error());
        else
            fprintf(stderr, "usched: trace: the last %s written to '%s'%s\n", s->tcfg.ring ? "events" : "events so far",
                    path, stall ? " after a stall" : "");
    }
    return NULL;
}

void usched__trace_stalled(struct usched *s)
{
    struct usched__trace *tr = s->tr;
    if (!tr || !s->tcfg.stall_dump || atomic_exchange(&tr->stall_pending, 1)) return;
    sem_post(&tr->wake);
}

int usched__trace_stop(struct usched *s)
{
    int rc = 0;
    struct usched__trace *tr = s->tr;
    if (tr) {
        if (s->tcfg.signal) sig_register(s, false); /* not there: nothing done */
        if (tr->thread_started) {
            atomic_store(&tr->stop, 1);
            sem_post(&tr->wake);
            pthread_join(tr->thread, NULL);
        }
    }
    if (s->trace_f) {
        rc = s->wk ? dump_to(s, s->trace_f) : 0;
        if (ferror(s->trace_f)) rc = -EIO;
        if (fclose(s->trace_f) != 0 && rc == 0) rc = -EIO;
        s->trace_f = NULL;
        if (rc < 0) {
            fprintf(stderr, "usched: trace: writing '%s' failed: %s\n", s->trace_path, strerror(-rc));
            rc = usched__error(-rc, "trace: writing '%s' failed", s->trace_path);
        } else {
            uint64_t dropped = dropped_count(s);
            if (dropped)
                fprintf(stderr, "usched: trace: %llu events dropped (the trace reached trace_mb, %u MiB); '%s' says so\n",
                        (unsigned long long)dropped, s->tcfg.mb ? s->tcfg.mb : USCHED__TRACE_MB_DEFAULT,
                        s->trace_path);
        }
    }
    s->tracing = false;
    tbuf_free(&s->tout);
    for (int cpu = 0; cpu < s->ncpus; cpu++)
        if (s->wk && s->wk[cpu]) tbuf_free(&s->wk[cpu]->tbuf); /* a failed start may leave holes */
    if (tr) {
        sem_destroy(&tr->wake);
        pthread_mutex_destroy(&tr->lock);
        free(tr);
        s->tr = NULL;
    }
    return rc;
}

void usched__trace_io_wait(int fd)
{
    struct usched__wk *w = usched__self_wk();
    if (w && w->cur) USCHED__TRACE(w->s, w, io_wait, w->cur->id, (uint64_t)(int64_t)fd, 0, 0);
}

_Static_assert((int)POST_YIELD == (int)USCHED__TSTOP_YIELD && (int)POST_BLOCK == (int)USCHED__TSTOP_BLOCK &&
                   (int)POST_EXIT == (int)USCHED__TSTOP_EXIT && (int)POST_PREEMPT == (int)USCHED__TSTOP_PREEMPT,
               "trace stop codes are the worker's post codes");
