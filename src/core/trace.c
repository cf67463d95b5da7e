/*
 * Tracing (docs/trace.md): the per-CPU event buffers (recording protocol in
 * trace.h), the Chrome trace / Perfetto JSON writer run when the scheduler
 * is destroyed, the wake-up latency reports, fiber names, and the periodic
 * one-line summary (USCHED_SCHEDTRACE).
 *
 * The file. One process per LLC ("package P, LLC L", pid L + 1), one thread
 * per CPU ("cpu C, core K", tid C + 1), sorted by topology; a complete slice ("X") per fiber
 * run named by the fiber's name or id; a flow arrow from the waker's slice
 * to the wakee's next run; instant events for spawns, steals, migrations
 * and I/O waits; a slice per park; a counter per CPU for its run queue
 * length. A top-level "usched" object carries the topology (each CPU's
 * package, LLC and core), the policy, and the counts of events written and
 * dropped: `usched trace` reads it. Per CPU, events appear in time order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/export.h"
#include "core/core.h"

/* ---- recording ---------------------------------------------------------------- */

void usched__trace_rec(struct usched *s, struct usched__wk *w, int type, uint64_t id, uint64_t a,
                       uint32_t b, uint16_t c)
{
    struct usched__tbuf *tb = (w && w->s == s) ? &w->tbuf : &s->tout;
    bool outside = tb == &s->tout;
    if (outside) usched__spin_lock(&tb->lock);
    struct usched__tchunk *ch = tb->cur;
    if (!ch || ch->n == USCHED__TRACE_CHUNK) {
        struct usched__tchunk *nc = NULL;
        if (tb->nchunks < USCHED__TRACE_MAX_CHUNKS) nc = malloc(sizeof *nc);
        if (!nc) {
            tb->dropped++;
            if (type == USCHED__TEV_name) free((void *)(uintptr_t)a);
            goto out;
        }
        nc->next = NULL;
        nc->n = 0;
        if (ch) ch->next = nc;
        else tb->head = nc;
        tb->cur = nc;
        tb->nchunks++;
        ch = nc;
    }
    struct usched__tev *e = &ch->ev[ch->n++];
    e->ns = usched__now_ns();
    e->id = id;
    e->a = a;
    e->b = b;
    e->c = c;
    e->type = (uint8_t)type;
    e->blk = 0;
out:
    if (outside) usched__spin_unlock(&tb->lock);
}

static void tbuf_free(struct usched__tbuf *tb)
{
    for (struct usched__tchunk *ch = tb->head, *nx; ch; ch = nx) {
        nx = ch->next;
        for (uint32_t i = 0; i < ch->n; i++)
            if (ch->ev[i].type == USCHED__TEV_name) free((void *)(uintptr_t)ch->ev[i].a);
        free(ch);
    }
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
    char *copy = strdup(name);
    if (!copy) return -ENOMEM;
    usched__trace_rec(s, w, USCHED__TEV_name, w->cur->id, (uint64_t)(uintptr_t)copy, 0, 0);
    return 0;
}

/* ---- start and stop -------------------------------------------------------------- */

static void *schedtrace_main(void *arg);

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

int usched__trace_start(struct usched *s)
{
    s->trace_t0 = usched__now_ns();
    s->tracing = s->trace_f != NULL;
    if (s->schedtrace_ms > 0) {
        pthread_mutex_init(&s->st_lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->st_cond, &ca);
        pthread_condattr_destroy(&ca);
        s->st_stop = 0;
        int rc = -pthread_create(&s->st_thread, NULL, schedtrace_main, s);
        if (rc < 0) {
            pthread_cond_destroy(&s->st_cond);
            pthread_mutex_destroy(&s->st_lock);
            return usched__error(-rc, "schedtrace: cannot start its thread");
        }
        s->st_started = 1;
    }
    return 0;
}

void usched__schedtrace_stop(struct usched *s)
{
    if (!s->st_started) return;
    pthread_mutex_lock(&s->st_lock);
    s->st_stop = 1;
    pthread_cond_signal(&s->st_cond);
    pthread_mutex_unlock(&s->st_lock);
    pthread_join(s->st_thread, NULL);
    pthread_cond_destroy(&s->st_cond);
    pthread_mutex_destroy(&s->st_lock);
    s->st_started = 0;
}

/* ---- the writer -------------------------------------------------------------------- */

struct tref {
    struct usched__tev *e;
    int cpu; /* -1: outside threads */
    uint32_t seq;
};

static int tref_cmp(const void *pa, const void *pb)
{
    const struct tref *a = pa, *b = pb;
    if (a->e->ns != b->e->ns) return a->e->ns < b->e->ns ? -1 : 1;
    if (a->cpu != b->cpu) return a->cpu < b->cpu ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* What the writer knows of a fiber: its pending wake-up and its name. */
struct fib {
    uint64_t id;
    uint64_t wake_ns, waker, flow;
    int wake_cpu, target, last_cpu;
    uint16_t reason;
    uint8_t kind; /* 0 none pending, else the event type + 1 */
    const char *name;
};

struct fibmap {
    struct fib *v;
    size_t cap, n;
};

static struct fib *fib_get(struct fibmap *m, uint64_t id)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 1024;
        struct fib *nv = calloc(ncap, sizeof *nv);
        if (!nv) return NULL;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->v[i].id) continue;
            size_t j = (size_t)(m->v[i].id * 0x9e3779b97f4a7c15ull) & (ncap - 1);
            while (nv[j].id) j = (j + 1) & (ncap - 1);
            nv[j] = m->v[i];
        }
        free(m->v);
        m->v = nv;
        m->cap = ncap;
    }
    size_t j = (size_t)(id * 0x9e3779b97f4a7c15ull) & (m->cap - 1);
    while (m->v[j].id && m->v[j].id != id) j = (j + 1) & (m->cap - 1);
    if (!m->v[j].id) {
        m->v[j].id = id;
        m->v[j].last_cpu = -1;
        m->v[j].wake_cpu = -1;
        m->n++;
    }
    return &m->v[j];
}

static const char *const reason_names[] = {
#define X(id, name, desc) #name,
    USCHED_REASON_MAP(X)
#undef X
};

static const char *reason_name(unsigned r)
{
    return r < sizeof reason_names / sizeof reason_names[0] ? reason_names[r] : "?";
}

static const char *const tev_names[] = {
#define X(name, desc) #name,
    USCHED_TRACE_EVENTS(X)
#undef X
};

struct wctx {
    struct usched *s;
    FILE *f;
    uint64_t t0;
    int *pid; /* [cpu] process of the CPU (its LLC + 1); its thread is cpu + 1 */
    int out_pid, out_tid; /* the outside threads' process and thread */
    int first;
};

static void ts(struct wctx *c, uint64_t ns)
{
    uint64_t d = ns > c->t0 ? ns - c->t0 : 0;
    fprintf(c->f, "%llu.%03u", (unsigned long long)(d / 1000), (unsigned)(d % 1000));
}

static void ev_open(struct wctx *c, const char *ph, const char *cat, int cpu, uint64_t ns)
{
    fprintf(c->f, "%s\n{\"ph\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":", c->first ? "" : ",", ph,
            cat, cpu >= 0 ? c->pid[cpu] : c->out_pid, cpu >= 0 ? cpu + 1 : c->out_tid);
    c->first = 0;
    ts(c, ns);
}

static void fiber_label(FILE *f, const struct fib *fb, uint64_t id)
{
    if (fb && fb->name) fprintf(f, "\"%s\"", fb->name);
    else fprintf(f, "\"fiber %llu\"", (unsigned long long)id);
}

static void write_meta(struct wctx *c)
{
    usched_t *s = c->s;
    FILE *f = c->f;
    usched__topo_t *t = s->topo;
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\n\"usched\":{\"version\":\"%s\",\"policy\":\"%s\",\"ncpus\":%d,"
               "\"smt\":%d,\"cpus\":[",
            USCHED_VERSION_STRING, s->ops->name, s->ncpus, usched__topo_smt_width(t));
    for (int cpu = 0; cpu < s->ncpus; cpu++)
        fprintf(f, "%s{\"cpu\":%d,\"os\":%d,\"package\":%d,\"llc\":%d,\"l2\":%d,\"core\":%d}", cpu ? "," : "",
                cpu, usched__topo_os_index(t, cpu), usched__topo_group(t, cpu, TOPO_PACKAGE),
                usched__topo_group(t, cpu, TOPO_LLC), usched__topo_group(t, cpu, TOPO_L2),
                usched__topo_group(t, cpu, TOPO_SMT));
    uint64_t dropped = s->tout.dropped;
    for (int cpu = 0; cpu < s->ncpus; cpu++) dropped += s->wk[cpu]->tbuf.dropped;
    fprintf(f, "],\"dropped\":%llu},\n\"traceEvents\":[", (unsigned long long)dropped);
    c->first = 1;
    /* Ids from 1: viewers treat pid and tid 0 as the kernel's idle task. */
    fprintf(f, "\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"outside threads\"}}",
            c->out_pid);
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
            c->out_pid, c->out_pid);
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"spawns and "
               "wake-ups from outside threads\"}}",
            c->out_pid, c->out_tid);
    c->first = 0;
    int last_pid = -1;
    for (int cpu = 0; cpu < s->ncpus; cpu++) {
        int pid = c->pid[cpu];
        if (pid != last_pid) {
            fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"package %d, LLC %d\"}}",
                    pid, usched__topo_group(t, cpu, TOPO_PACKAGE), pid - 1);
            fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
                    pid, pid);
            last_pid = pid;
        }
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"cpu %d, core %d\"}}",
                pid, cpu + 1, cpu, usched__topo_group(t, cpu, TOPO_SMT));
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                pid, cpu + 1, cpu);
    }
}

/* Pairs each run with its stop and each park with its unpark on one CPU:
 * the duration goes into the opening event's `a`. Events left open end at
 * `end`. */
static void pair_slices(struct usched__tbuf *tb, uint64_t end)
{
    struct usched__tev *run = NULL, *park = NULL;
    for (struct usched__tchunk *ch = tb->head; ch; ch = ch->next)
        for (uint32_t i = 0; i < ch->n; i++) {
            struct usched__tev *e = &ch->ev[i];
            switch (e->type) {
            case USCHED__TEV_run:
                if (run) run->a = e->ns - run->ns;
                run = e;
                e->a = 0;
                e->c = 0;
                e->blk = 0;
                break;
            case USCHED__TEV_stop:
                if (run && run->id == e->id) {
                    run->a = e->ns - run->ns;
                    run->c = e->c; /* how it ended */
                    run->blk = (uint8_t)e->b; /* on what, if it blocked */
                }
                run = NULL;
                break;
            case USCHED__TEV_park:
                park = e;
                e->a = 0;
                break;
            case USCHED__TEV_unpark:
                if (park) park->a = e->ns - park->ns;
                park = NULL;
                break;
            default:
                break;
            }
        }
    if (run) run->a = end > run->ns ? end - run->ns : 0;
    if (park) park->a = end > park->ns ? end - park->ns : 0;
}

static size_t tbuf_count(const struct usched__tbuf *tb, uint64_t *last)
{
    size_t n = 0;
    for (const struct usched__tchunk *ch = tb->head; ch; ch = ch->next) {
        n += ch->n;
        if (ch->n && ch->ev[ch->n - 1].ns > *last) *last = ch->ev[ch->n - 1].ns;
    }
    return n;
}

static size_t tbuf_refs(struct usched__tbuf *tb, int cpu, struct tref *out)
{
    size_t n = 0;
    for (struct usched__tchunk *ch = tb->head; ch; ch = ch->next)
        for (uint32_t i = 0; i < ch->n; i++, n++) out[n] = (struct tref){&ch->ev[i], cpu, (uint32_t)n};
    return n;
}

static void write_run(struct wctx *c, struct fibmap *m, const struct tref *r, const int *running)
{
    usched_t *s = c->s;
    usched__topo_t *t = s->topo;
    const struct usched__tev *e = r->e;
    int cpu = r->cpu;
    struct fib *fb = fib_get(m, e->id);
    FILE *f = c->f;
    ev_open(c, "X", "run", cpu, e->ns);
    fprintf(f, ",\"dur\":%llu.%03u,\"name\":", (unsigned long long)(e->a / 1000), (unsigned)(e->a % 1000));
    fiber_label(f, fb, e->id);
    static const char *const ends[] = {"running", "yield", "block", "exit"};
    fprintf(f, ",\"args\":{\"fiber\":%llu,\"runq\":%u,\"end\":\"%s\"", (unsigned long long)e->id, e->b,
            ends[e->c < 4 ? e->c : 0]);
    static const char *const blks[] = {
#define X(name) #name,
        USCHED_TRACE_BLOCKS(X)
#undef X
    };
    if (e->c == USCHED__TSTOP_BLOCK) fprintf(f, ",\"on\":\"%s\"", blks[e->blk < USCHED__NTBLK ? e->blk : 0]);
    if (fb && fb->kind) {
        const char *kind = tev_names[fb->kind - 1];
        fprintf(f, ",\"woken\":\"%s\",\"wake_ts\":", kind);
        ts(c, fb->wake_ns);
        fprintf(f, ",\"wait_ns\":%llu,\"reason\":\"%s\"", (unsigned long long)(e->ns - fb->wake_ns),
                reason_name(fb->reason));
        if (fb->wake_cpu >= 0) fprintf(f, ",\"waker_cpu\":%d", fb->wake_cpu);
        if (fb->waker) fprintf(f, ",\"waker\":%llu", (unsigned long long)fb->waker);
        /* Crossed an LLC: ran outside the LLC of both the waker's CPU and
         * the fiber's previous CPU (as the wake_cross_llc counter). */
        int llc = usched__topo_group(t, cpu, TOPO_LLC);
        int ref = fb->wake_cpu >= 0 ? fb->wake_cpu : fb->last_cpu;
        if (ref >= 0 && llc != usched__topo_group(t, ref, TOPO_LLC) &&
            (fb->last_cpu < 0 || llc != usched__topo_group(t, fb->last_cpu, TOPO_LLC)))
            fprintf(f, ",\"xllc\":1");
        /* Landed beside a busy SMT sibling. */
        int core = usched__topo_group(t, cpu, TOPO_SMT);
        for (int o = 0; o < s->ncpus; o++)
            if (o != cpu && running[o] && usched__topo_group(t, o, TOPO_SMT) == core) {
                fprintf(f, ",\"busy_sibling\":1");
                break;
            }
    }
    if (fb && fb->last_cpu >= 0 && fb->last_cpu != cpu) fprintf(f, ",\"from_cpu\":%d", fb->last_cpu);
    fprintf(f, "}}");
    if (fb && fb->kind && fb->flow) {
        ev_open(c, "f", "wake", cpu, e->ns);
        fprintf(f, ",\"bp\":\"e\",\"name\":\"wake\",\"id\":%llu}", (unsigned long long)fb->flow);
    }
    if (fb) {
        fb->kind = 0;
        fb->flow = 0;
        fb->last_cpu = cpu;
    }
}

static int write_file(struct usched *s)
{
    FILE *f = s->trace_f;
    int n = s->ncpus;
    uint64_t end = 0;
    size_t total = tbuf_count(&s->tout, &end);
    for (int cpu = 0; cpu < n; cpu++) total += tbuf_count(&s->wk[cpu]->tbuf, &end);
    struct tref *refs = malloc((total ? total : 1) * sizeof *refs);
    int *pid = calloc((size_t)n, sizeof *pid);
    int *running = calloc((size_t)n, sizeof *running);
    uint32_t *runq = calloc((size_t)n, sizeof *runq);
    struct fibmap m = {0};
    int rc = 0;
    if (!refs || !pid || !running || !runq) {
        rc = -ENOMEM;
        goto out;
    }
    size_t k = 0;
    for (int cpu = 0; cpu < n; cpu++) {
        pair_slices(&s->wk[cpu]->tbuf, end);
        k += tbuf_refs(&s->wk[cpu]->tbuf, cpu, refs + k);
        pid[cpu] = usched__topo_group(s->topo, cpu, TOPO_LLC) + 1;
        runq[cpu] = UINT32_MAX;
    }
    k += tbuf_refs(&s->tout, -1, refs + k);
    qsort(refs, k, sizeof *refs, tref_cmp);

    struct wctx c = {.s = s, .f = f, .t0 = s->trace_t0, .pid = pid,
                     .out_pid = usched__topo_ngroups(s->topo, TOPO_LLC) + 1, .out_tid = n + 1};
    write_meta(&c);
    uint64_t flows = 0;
    for (size_t i = 0; i < k; i++) {
        const struct usched__tev *e = refs[i].e;
        int cpu = refs[i].cpu;
        switch (e->type) {
        case USCHED__TEV_spawn:
        case USCHED__TEV_wake:
        case USCHED__TEV_io_ready: {
            struct fib *fb = fib_get(&m, e->id);
            if (!fb) {
                rc = -ENOMEM;
                goto out;
            }
            fb->kind = (uint8_t)(e->type + 1);
            fb->wake_ns = e->ns;
            fb->wake_cpu = cpu;
            fb->target = (int)e->b;
            fb->waker = e->a;
            fb->reason = e->c;
            fb->flow = 0;
            if (e->type == USCHED__TEV_spawn) {
                ev_open(&c, "i", "spawn", cpu, e->ns);
                fprintf(f, ",\"s\":\"t\",\"name\":\"spawn\",\"args\":{\"fiber\":%llu,\"parent\":%llu,"
                           "\"cpu\":%d,\"reason\":\"%s\"}}",
                        (unsigned long long)e->id, (unsigned long long)e->a, (int)e->b, reason_name(e->c));
            } else if (cpu >= 0 && running[cpu]) {
                /* A flow from the waker's running slice. */
                fb->flow = ++flows;
                ev_open(&c, "s", "wake", cpu, e->ns);
                fprintf(f, ",\"name\":\"wake\",\"id\":%llu}", (unsigned long long)fb->flow);
            }
            break;
        }
        case USCHED__TEV_run:
            if (cpu < 0) break;
            write_run(&c, &m, &refs[i], running);
            running[cpu] = 1;
            if (e->b != runq[cpu]) {
                runq[cpu] = e->b;
                ev_open(&c, "C", "runq", cpu, e->ns);
                fprintf(f, ",\"name\":\"runq cpu %d\",\"args\":{\"fibers\":%u}}", cpu, e->b);
            }
            break;
        case USCHED__TEV_stop:
            if (cpu >= 0) running[cpu] = 0;
            break;
        case USCHED__TEV_steal:
            ev_open(&c, "i", "steal", cpu, e->ns);
            fprintf(f, ",\"s\":\"t\",\"name\":\"steal\",\"args\":{\"fiber\":%llu,\"victim\":%u,\"level\":\"%s\","
                       "\"fibers\":%llu}}",
                    (unsigned long long)e->id, e->b, usched__topo_level_name(e->c), (unsigned long long)e->a);
            break;
        case USCHED__TEV_migrate:
            ev_open(&c, "i", "migrate", cpu, e->ns);
            fprintf(f, ",\"s\":\"t\",\"name\":\"migrate\",\"args\":{\"fiber\":%llu,\"from\":%u,\"level\":\"%s\"}}",
                    (unsigned long long)e->id, e->b, usched__topo_level_name(e->c));
            break;
        case USCHED__TEV_park:
            ev_open(&c, "X", "idle", cpu, e->ns);
            fprintf(f, ",\"dur\":%llu.%03u,\"name\":\"%s\"}", (unsigned long long)(e->a / 1000),
                    (unsigned)(e->a % 1000), e->c ? "parked (I/O poller)" : "parked");
            break;
        case USCHED__TEV_io_wait:
            ev_open(&c, "i", "io", cpu, e->ns);
            fprintf(f, ",\"s\":\"t\",\"name\":\"io_wait\",\"args\":{\"fiber\":%llu,\"fd\":%lld}}",
                    (unsigned long long)e->id, (long long)e->a);
            break;
        case USCHED__TEV_stall:
            ev_open(&c, "i", "stall", (int)e->b < n ? (int)e->b : -1, e->ns);
            fprintf(f, ",\"s\":\"t\",\"name\":\"stall\",\"args\":{\"fiber\":%llu,\"held_us\":%llu}}",
                    (unsigned long long)e->id, (unsigned long long)(e->a / 1000));
            break;
        case USCHED__TEV_name: {
            struct fib *fb = fib_get(&m, e->id);
            if (fb) fb->name = (const char *)(uintptr_t)e->a;
            break;
        }
        default:
            break;
        }
    }
    fprintf(f, "\n]}\n");
out:
    free(refs);
    free(pid);
    free(running);
    free(runq);
    free(m.v);
    return rc;
}

int usched__trace_stop(struct usched *s)
{
    int rc = 0;
    if (s->trace_f) {
        rc = write_file(s);
        if (ferror(s->trace_f)) rc = -EIO;
        if (fclose(s->trace_f) != 0 && rc == 0) rc = -EIO;
        s->trace_f = NULL;
        if (rc < 0) {
            fprintf(stderr, "usched: trace: writing '%s' failed: %s\n", s->trace_path, strerror(-rc));
            rc = usched__error(-rc, "trace: writing '%s' failed", s->trace_path);
        } else {
            uint64_t dropped = s->tout.dropped;
            for (int cpu = 0; cpu < s->ncpus; cpu++) dropped += s->wk[cpu]->tbuf.dropped;
            if (dropped)
                fprintf(stderr, "usched: trace: %llu events dropped (a CPU's buffer reached %d MiB); '%s' says so\n",
                        (unsigned long long)dropped,
                        (int)((size_t)USCHED__TRACE_MAX_CHUNKS * sizeof(struct usched__tchunk) >> 20),
                        s->trace_path);
        }
    }
    s->tracing = false;
    tbuf_free(&s->tout);
    for (int cpu = 0; cpu < s->ncpus; cpu++)
        if (s->wk[cpu]) tbuf_free(&s->wk[cpu]->tbuf); /* a failed start may leave holes */
    return rc;
}

/* ---- wake-up latency --------------------------------------------------------------- */

static void lat_sum(usched_t *s, int cpu, uint64_t *n, uint64_t *max)
{
    for (int c = 0; c < s->ncpus; c++) {
        if (cpu >= 0 && c != cpu) continue;
        usched__lat_t *h = &s->wk[c]->lat;
        for (int i = 0; i < USCHED__LAT_NB; i++) n[i] += atomic_load_explicit(&h->n[i], memory_order_relaxed);
        uint64_t mx = atomic_load_explicit(&h->max, memory_order_relaxed);
        if (mx > *max) *max = mx;
    }
}

/* The upper end of the bucket holding the q-quantile, capped at max. */
static uint64_t lat_quantile(const uint64_t *n, uint64_t count, uint64_t max, double q)
{
    if (!count) return 0;
    uint64_t want = (uint64_t)(q * (double)count + 0.999999), acc = 0;
    if (want < 1) want = 1;
    for (int i = 0; i < USCHED__LAT_NB; i++) {
        acc += n[i];
        if (acc >= want) {
            uint64_t hi = i + 1 < USCHED__LAT_NB ? usched__lat_low(i + 1) - 1 : UINT64_MAX;
            return hi < max ? hi : max;
        }
    }
    return max;
}

USCHED_EXPORT int usched_wakelat(usched_t *s, int cpu, struct usched_wakelat *out)
{
    if (!s || !out) return usched__error(EINVAL, "wakelat: NULL argument");
    if (!atomic_load(&s->started)) return usched__error(ESRCH, "wakelat: scheduler not started");
    if (cpu < -1 || cpu >= s->ncpus)
        return usched__error(EINVAL, "wakelat: cpu %d out of range [-1, %d)", cpu, s->ncpus);
    uint64_t n[USCHED__LAT_NB] = {0}, max = 0, count = 0;
    lat_sum(s, cpu, n, &max);
    for (int i = 0; i < USCHED__LAT_NB; i++) count += n[i];
    memset(out, 0, sizeof *out);
    out->count = count;
    out->p50_ns = lat_quantile(n, count, max, 0.50);
    out->p90_ns = lat_quantile(n, count, max, 0.90);
    out->p99_ns = lat_quantile(n, count, max, 0.99);
    out->max_ns = max;
    return 0;
}

void usched__wakelat_print(usched_t *s, FILE *f)
{
    for (int cpu = -1; cpu < s->ncpus; cpu++) {
        struct usched_wakelat l;
        if (usched_wakelat(s, cpu, &l) < 0) return;
        char what[32];
        if (cpu < 0) snprintf(what, sizeof what, "wake_latency");
        else snprintf(what, sizeof what, "wake_latency cpu %d", cpu);
        fprintf(f, "%-20s n=%llu p50=%lluns p90=%lluns p99=%lluns max=%lluns\n", what,
                (unsigned long long)l.count, (unsigned long long)l.p50_ns, (unsigned long long)l.p90_ns,
                (unsigned long long)l.p99_ns, (unsigned long long)l.max_ns);
    }
}

void usched__wakelat_reset(usched_t *s)
{
    for (int c = 0; c < s->ncpus; c++) {
        usched__lat_t *h = &s->wk[c]->lat;
        for (int i = 0; i < USCHED__LAT_NB; i++) atomic_store(&h->n[i], 0);
        atomic_store(&h->max, 0);
    }
}

/* ---- the periodic summary (USCHED_SCHEDTRACE=MS) ---------------------------------- */

static const char *wk_state(struct usched__wk *w)
{
    uint32_t st = atomic_load_explicit(&w->state, memory_order_relaxed);
    if (st == WK_PARKED) return "parked";
    if (st == WK_PARKED_POLL) return "polling";
    return atomic_load_explicit(&w->current, memory_order_relaxed) ? "running" : "spinning";
}

static void *schedtrace_main(void *arg)
{
    usched_t *s = arg;
    uint64_t *last = calloc((size_t)s->ncpus, sizeof *last);
    char *line = malloc((size_t)s->ncpus * 64 + 128);
    if (!last || !line) {
        free(last);
        free(line);
        return NULL;
    }
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    pthread_mutex_lock(&s->st_lock);
    while (!s->st_stop) {
        dl.tv_nsec += (long)(s->schedtrace_ms % 1000) * 1000000L;
        dl.tv_sec += s->schedtrace_ms / 1000 + dl.tv_nsec / 1000000000L;
        dl.tv_nsec %= 1000000000L;
        int rc = 0;
        while (!s->st_stop && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&s->st_cond, &s->st_lock, &dl);
        if (s->st_stop) break;
        uint64_t ms = (usched__now_ns() - s->trace_t0) / 1000000;
        int len = snprintf(line, 128, "usched: schedtrace %llums: live=%llu global=%u", (unsigned long long)ms,
                           (unsigned long long)atomic_load(&s->live), atomic_load(&s->gq_n));
        for (int c = 0; c < s->ncpus; c++) {
            struct usched__wk *w = s->wk[c];
            uint64_t sw = atomic_load_explicit(&w->stats.v[USCHED_STAT_switches], memory_order_relaxed);
            unsigned q = usched__ring_len(&w->ring) + (unsigned)atomic_load(&w->inbox_n) +
                         (atomic_load_explicit(&w->next, memory_order_relaxed) != NULL);
            len += snprintf(line + len, 64, " | cpu%d %s q=%u sw=%llu", c, wk_state(w), q,
                            (unsigned long long)(sw >= last[c] ? sw - last[c] : sw)); /* reset since */
            last[c] = sw;
        }
        fprintf(stderr, "%s\n", line);
    }
    pthread_mutex_unlock(&s->st_lock);
    free(last);
    free(line);
    return NULL;
}

void usched__trace_io_wait(int fd)
{
    struct usched__wk *w = usched__self_wk();
    if (w && w->cur) USCHED__TRACE(w->s, w, io_wait, w->cur->id, (uint64_t)(int64_t)fd, 0, 0);
}

_Static_assert((int)POST_YIELD == (int)USCHED__TSTOP_YIELD && (int)POST_BLOCK == (int)USCHED__TSTOP_BLOCK &&
                   (int)POST_EXIT == (int)USCHED__TSTOP_EXIT,
               "trace stop codes are the worker's post codes");
