/*
 * Tracing (docs/trace.md): the per-CPU recorders, which store each event as
 * a record when it happens (the hook in trace.h writes a worker's in line;
 * here a new chunk, the outside threads' buffer and names), the settings,
 * start and stop, and the dumps' triggers (usched_trace_dump, at destroy, on
 * SIGUSR2 when allowed, after a stall when asked). tracedump.c encodes the
 * records as Perfetto packets and writes the file.
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
    nc->base = tb->base = usched__trace_ticks(s->tcfg.tsc); /* before any reading that follows */
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
        usched__trace_fill(s, tb, r, outside, s->tcfg.tsc, type, id, a, b, c);
    if (outside) usched__spin_unlock(&tb->lock);
}

/* The long form's two records at r (trace.h). */
static void put_long(struct usched__trec *r, uint64_t ts, int type, uint64_t id, uint64_t a, uint32_t b, uint16_t c)
{
    r[0] = (struct usched__trec){.dt = (uint32_t)ts, .type = (uint8_t)(type | USCHED__TREC_LONG), .b = c,
                                 .id = (uint32_t)(ts >> 32), .a = b};
    struct usched__trec_long l = {.id = id, .a = a};
    memcpy(&r[1], &l, sizeof l);
}

void usched__trace_long(struct usched *s, struct usched__tbuf *tb, bool locked, uint64_t ts, int type, uint64_t id,
                        uint64_t a, uint32_t b, uint16_t c)
{
    struct usched__trec *r = tb->pos;
    if (tb->end - r < 2 && !(r = next_chunk(s, tb, locked))) { /* the last record stays unused */
        count_drop(tb);
        return;
    }
    put_long(r, ts, type, id, a, b, c);
    tb->base = ts; /* the base of the short records that follow */
    tb->pos = r + 2;
    atomic_store_explicit(&tb->cur->n, (uint32_t)(tb->pos - tb->cur->rec), memory_order_release);
}

/* A name event: its record in the long form, then its text in the records
 * that follow (in one chunk). */
static void rec_name(struct usched *s, struct usched__wk *w, uint64_t id, const char *name)
{
    struct usched__tbuf *tb = &w->tbuf;
    size_t len = strnlen(name, USCHED_NAME_MAX);
    uint32_t k = 2 + (uint32_t)((len + sizeof(struct usched__trec) - 1) / sizeof(struct usched__trec));
    if ((size_t)(tb->end - tb->pos) < k && !next_chunk(s, tb, false)) {
        count_drop(tb);
        return;
    }
    struct usched__trec *r = tb->pos;
    tb->base = usched__trace_ticks(s->tcfg.tsc);
    put_long(r, tb->base, USCHED__TEV_name, id, 0, (uint32_t)len, 0);
    memset(r + 2, 0, (k - 2) * sizeof *r);
    memcpy(r + 2, name, len);
    tb->pos = r + k;
    atomic_store_explicit(&tb->cur->n, (uint32_t)(tb->pos - tb->cur->rec), memory_order_release);
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
        s->tcfg.tsc = !s->tcfg.monotonic && tsc_usable();
        usched__trace_clock_pair(s->tcfg.tsc, &s->tcfg.t0_ticks, &s->tcfg.t0_ns);
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
    int rc = usched__trace_dump_to(s, f);
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
        rc = s->wk ? usched__trace_dump_to(s, s->trace_f) : 0;
        if (ferror(s->trace_f)) rc = -EIO;
        if (fclose(s->trace_f) != 0 && rc == 0) rc = -EIO;
        s->trace_f = NULL;
        if (rc < 0) {
            fprintf(stderr, "usched: trace: writing '%s' failed: %s\n", s->trace_path, strerror(-rc));
            rc = usched__error(-rc, "trace: writing '%s' failed", s->trace_path);
        } else {
            uint64_t dropped = usched__trace_dropped(s);
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
