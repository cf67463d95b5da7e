/*
 * Scheduler lifecycle: create -> set -> start -> wait -> destroy, the
 * environment defaults, and the counters' public face.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fault.h"
#include "core/core.h"
#include "core/fiber.h"
#include "core/monitor.h"
#include "core/park.h"
#include "core/pin.h"
#include "core/preempt.h"
#include "core/registry.h"
#include "core/sched.h"
#include "core/schedtrace.h"
#include "core/statshm.h"
#include "base/error.h"
#include "base/export.h"


static int set_str(char **dst, const char *v)
{
    char *c = v ? usched__strdup(v) : NULL;
    if (v && !c) return -ENOMEM;
    free(*dst);
    *dst = c;
    return 0;
}

/* "64k", "1m", "65536" -> bytes; at least 16 KiB, at most 1 GiB. */
static int parse_size(const char *v, size_t *out)
{
    if (!v || !*v) return usched__error(EINVAL, "stack_size: empty value");
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (end == v || errno == ERANGE || v[0] == '-')
        return usched__error(EINVAL, "stack_size: '%s' is not a size (bytes, suffix k or m)", v);
    if (*end == 'k' || *end == 'K') n <<= 10, end++;
    else if (*end == 'm' || *end == 'M') n <<= 20, end++;
    if (*end != '\0')
        return usched__error(EINVAL, "stack_size: '%s' is not a size (bytes, suffix k or m)", v);
    if (n < 16 * 1024 || n > (1ull << 30))
        return usched__error(EINVAL, "stack_size: %s is out of range [16k, 1024m]", v);
    *out = (size_t)n;
    return 0;
}

static int check_policy(const char *v)
{
    if (!v || !usched__policy_find(v))
        return usched__error(EINVAL, "policy: unknown policy '%s' (see `usched policies`)",
                             v ? v : "(null)");
    return 0;
}

/* A 0/1 setting fixed at start (pin, emulate). */
static int set_flag(const char *key, const char *value, bool started, int *out)
{
    if (started) return usched__error(EBUSY, "%s: cannot change after start", key);
    if (value && strcmp(value, "0") == 0) *out = 0;
    else if (value && strcmp(value, "1") == 0) *out = 1;
    else return usched__error(EINVAL, "%s: '%s' is not 0 or 1", key, value ? value : "(null)");
    return 0;
}

USCHED_EXPORT int usched_set(usched_t *s, const char *key, const char *value)
{
    if (!s || !key) return usched__error(EINVAL, "set: scheduler or key is NULL");
    bool started = atomic_load(&s->started);
    if (strcmp(key, "knobs") == 0) return usched__knobs_parse(&s->knobs, value, started);
    if (strcmp(key, "policy") == 0) {
        if (started) return usched__error(EBUSY, "policy: cannot change after start");
        int rc = check_policy(value);
        return rc < 0 ? rc : set_str(&s->cfg.policy, value);
    }
    if (strcmp(key, "topology") == 0) {
        if (started) return usched__error(EBUSY, "topology: cannot change after start");
        return set_str(&s->cfg.topology, value && *value ? value : NULL);
    }
    if (strcmp(key, "cpus") == 0) {
        if (started) return usched__error(EBUSY, "cpus: cannot change after start");
        if (value && !*value) return usched__error(EINVAL, "cpus: empty CPU list");
        if (value) {
            uint64_t probe[64];
            char err[200];
            int rc = usched__cpulist_parse(value, 4096, probe, 64, err, sizeof err);
            if (rc < 0) return usched__error(-rc, "%s", err);
        }
        return set_str(&s->cfg.cpus, value);
    }
    if (strcmp(key, "stack_size") == 0) {
        if (started) return usched__error(EBUSY, "stack_size: cannot change after start");
        size_t n = 0;
        int rc = parse_size(value, &n);
        if (rc == 0) s->cfg.stack_size = n;
        return rc;
    }
    if (strcmp(key, "pin") == 0) return set_flag(key, value, started, &s->cfg.pin);
    if (strcmp(key, "emulate") == 0) return set_flag(key, value, started, &s->cfg.emulate);
    if (strcmp(key, "trace") == 0) {
        if (started) return usched__error(EBUSY, "trace: cannot change after start");
        return set_str(&s->trace_path, value && *value ? value : NULL);
    }
    int trc = usched__trace_set(s, key, value, started);
    if (trc != -ENOENT) return trc;
    if (strcmp(key, "schedtrace") == 0) {
        if (started) return usched__error(EBUSY, "schedtrace: cannot change after start");
        char *end;
        errno = 0;
        long ms = value ? strtol(value, &end, 10) : -1;
        if (!value || end == value || *end || errno || ms < 0 || ms > 3600000)
            return usched__error(EINVAL, "schedtrace: '%s' is not a number of milliseconds in [0, 3600000]",
                                 value ? value : "(null)");
        s->schedtrace_ms = (int)ms;
        return 0;
    }
    return usched__error(ENOENT, "set: unknown key '%s' (policy, topology, cpus, knobs, stack_size, pin, emulate, "
                         "trace, trace_mb, trace_mode, trace_signal, trace_stall_dump, trace_clock, schedtrace)",
                         key);
}

static int apply_env(usched_t *s)
{
    static const struct { const char *env, *key; } map[] = {
        {"USCHED_POLICY", "policy"}, {"USCHED_KNOBS", "knobs"},
        {"USCHED_TOPOLOGY", "topology"}, {"USCHED_CPUS", "cpus"},
        {"USCHED_EMULATE", "emulate"}, {"USCHED_PIN", "pin"}, {"USCHED_TRACE", "trace"},
        {"USCHED_SCHEDTRACE", "schedtrace"}, {"USCHED_TRACE_MB", "trace_mb"},
        {"USCHED_TRACE_MODE", "trace_mode"}, {"USCHED_TRACE_STALL_DUMP", "trace_stall_dump"},
        {"USCHED_TRACE_CLOCK", "trace_clock"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        const char *v = getenv(map[i].env);
        if (!v) continue;
        int rc = usched_set(s, map[i].key, v);
        if (rc < 0) {
            char detail[256];
            snprintf(detail, sizeof detail, "%s", usched_last_error());
            return usched__error(-rc, "%s: %s", map[i].env, detail);
        }
    }
    return 0;
}

USCHED_EXPORT int usched_create(usched_t **out)
{
    if (!out) return usched__error(EINVAL, "create: out is NULL");
    *out = NULL;
    usched_t *s = usched__calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->cfg.stack_size = USCHED_DEFAULT_STACK;
    s->cfg.pin = -1;
    usched__knobs_default(&s->knobs);
    pthread_mutex_init(&s->gq.lock, NULL);
    pthread_mutex_init(&s->out.lock, NULL);
    s->pol.s = s;
    atomic_store(&s->life.next_id_block, 1); /* id 0 means "not a fiber" */
    s->cfg.policy = usched__strdup("usched");
    int rc = s->cfg.policy ? apply_env(s) : -ENOMEM;
    if (rc < 0) {
        usched_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void free_workers(usched_t *s)
{
    if (!s->wk) return;
    usched__preempt_stop(s); /* its slots point at the workers */
    for (int c = 0; c < s->ncpus; c++) {
        if (!s->wk[c]) continue;
        usched__timers_fini(&s->wk[c]->timers);
        free(s->wk[c]->pol_state);
        free(s->wk[c]->vlook);
        free(s->wk[c]);
    }
    free(s->wk);
    s->wk = NULL;
}

/* ---- SMT emulation (docs/emulation.md): the real CPU of each worker -------- */

static int emulate_setup(usched_t *s, char *err, size_t errlen)
{
    if (!s->cfg.emulate) return 0;
    int real[CPU_SETSIZE];
    int nreal = usched__topo_allowed_cpus(real, CPU_SETSIZE);
    if (nreal < 0) {
        snprintf(err, errlen, "emulate: cannot read this process's CPUs");
        return nreal;
    }
    if (!(s->emu_os = usched__malloc((size_t)s->ncpus * sizeof *s->emu_os))) {
        snprintf(err, errlen, "emulate: out of memory");
        return -ENOMEM;
    }
    int rc = usched__topo_emulate_map(s->topo, real, nreal, s->emu_os, err, errlen);
    return rc < 0 ? rc : 0;
}

/* ---- end of SMT emulation ------------------------------------------------ */

/* The worker thread's entry: publishes its thread id for the monitor's run
 * delay reads (monitor.c, C1), then runs the worker loop. */
static void *worker_entry(void *arg)
{
    struct usched__wk *w = arg;
    atomic_store_explicit(&w->tid, (int32_t)gettid(), memory_order_release);
    return usched__worker_main(w);
}

/* A start that failed after workers were created: stop and join them. */
static void stop_workers(usched_t *s)
{
    atomic_store(&s->stopping, 1);
    usched__wk_kick_all(s);
    for (int j = 0; j < s->ncpus; j++) {
        if (!s->wk[j]->thread_started) continue;
        pthread_join(s->wk[j]->thread, NULL);
        s->wk[j]->thread_started = 0;
    }
    atomic_store(&s->started, 0);
    atomic_store(&s->stopping, 0);
}

USCHED_EXPORT int usched_start(usched_t *s)
{
    if (!s) return usched__error(EINVAL, "start: scheduler is NULL");
    if (atomic_load(&s->started)) return usched__error(EBUSY, "start: already started");
    s->ops = usched__policy_find(s->cfg.policy);
    if (!s->ops) return check_policy(s->cfg.policy);
    /* New fibers start with the FP modes of this thread, which the workers
     * inherit too (docs/stacks.md): the same for every fiber, whichever CPU
     * makes its context, and read once instead of at every first run. */
    s->fpmode = usched__ctx_fpmode();
    bool pol_inited = false;
    char err[256];
    int rc = usched__statshm_wanted(); /* a bad USCHED_STATS_SHM fails here (monitor.c makes it) */
    if (rc < 0) return rc;
    rc = usched__trace_open(s); /* a bad trace path fails here, not at the end */
    if (rc < 0) return rc;
    rc = usched__topo_load(&s->topo, s->cfg.topology, s->cfg.cpus, err, sizeof err);
    if (rc < 0) {
        usched__trace_close(s);
        return usched__error(-rc, "%s", err);
    }
    /* CPU quota (src/topo/quota.c): no more workers than a cgroup limit pays for. */
    if (usched__knob_get(&s->knobs, USCHED_KNOB_quota) &&
        (rc = usched__topo_apply_quota(s->topo, s->cfg.topology, NULL, err, sizeof err)) < 0) {
        usched__topo_free(s->topo);
        s->topo = NULL;
        usched__trace_close(s);
        return usched__error(-rc, "%s", err);
    }
    s->ncpus = usched__topo_ncpus(s->topo);
    if ((rc = emulate_setup(s, err, sizeof err)) < 0) {
        usched__error(-rc, "%s", err);
        goto fail;
    }
    /* What the policy declared, read once: the worker loop tests these. */
    s->track_time = (s->ops->flags & USCHED_OPS_TRACK_TIME) != 0;
    s->yield_shared = (s->ops->flags & USCHED_OPS_SHARED_RQ) != 0;
    s->fork_next = (s->ops->flags & USCHED_OPS_FORK_NEXT) != 0;
    usched__next_asym_init(s);
    s->smt = usched__topo_smt_width(s->topo) > 1;
    s->smt_rule = (s->ops->flags & USCHED_OPS_SMT_RULE) && s->smt;
    s->pol_steals = s->ncpus > 1 && !(s->ops->flags & (USCHED_OPS_NO_STEAL | USCHED_OPS_SHARED_RQ));
    if ((rc = usched__idlemask_init(&s->idle_cpus, s->ncpus)) < 0 ||
        (rc = usched__idlemask_init(&s->idle_cores, s->ncpus)) < 0)
        goto fail;
    s->wk = usched__calloc((size_t)s->ncpus, sizeof *s->wk);
    if (!s->wk) {
        rc = -ENOMEM;
        goto fail;
    }
    for (int c = 0; c < s->ncpus; c++) {
        struct usched__wk *w = usched__alloc_lines(sizeof *w);
        if (!w) {
            rc = -ENOMEM;
            goto fail;
        }
        memset(w, 0, sizeof *w);
        s->wk[c] = w;
        w->s = s;
        w->cpu = c;
        w->io_home = -1;
        w->rng = 0x9e3779b9u * (unsigned)(c + 1);
        w->lat_rng = w->rng ^ 0x5bd1e995u;
        w->lat_left = 1; /* the first wake-up it decides is measured (worker.h) */
        atomic_init(&w->pack_to, c); /* its own CPU until it is packed (monitor.c, K1) */
        usched__ring_init(&w->ring);
        /* One CPU: no thief, and the monitor leaves a stalled CPU's ring
         * alone (monitor.c, move_queues): its owner alone consumes it. */
        usched__ring_set_solo(&w->ring, s->ncpus == 1);
        usched__inbox_init(&w->inbox);
        usched__timers_init(&w->timers);
        if (s->pol_steals && !(w->vlook = usched__calloc((size_t)s->ncpus, sizeof *w->vlook))) {
            rc = -ENOMEM;
            goto fail;
        }
        if (s->ops->cpu_state_size) {
            /* Whole cache lines, so that two CPUs' states share none. */
            if (!(w->pol_state = usched__alloc_lines(s->ops->cpu_state_size))) {
                rc = -ENOMEM;
                goto fail;
            }
            memset(w->pol_state, 0, s->ops->cpu_state_size);
        }
    }
    if (s->ops->init && (rc = s->ops->init(&s->pol)) < 0) {
        usched__error(-rc, "policy %s: init failed", s->ops->name);
        goto fail;
    }
    pol_inited = true;
    usched__park_start(s); /* the I/O backend: raise RLIMIT_NOFILE (src/io) */
    if ((rc = usched__trace_start(s)) < 0) goto fail; /* before the workers: they read s->tracing */
    atomic_store(&s->started, 1);
    bool pin = s->cfg.pin == 1 || (s->cfg.pin == -1 && usched__topo_is_live(s->topo)) || s->emu_os;
    s->pinned = pin;
    for (int c = 0; c < s->ncpus; c++) {
        struct usched__wk *w = s->wk[c];
        if ((rc = -usched__thread_create(&w->thread, NULL, worker_entry, w)) < 0) {
            usched__error(-rc, "start: cannot create worker %d", c);
            stop_workers(s);
            goto fail;
        }
        w->thread_started = 1;
        if (pin) usched__wk_pin(s, w, NULL); /* best effort: a CPU may be gone */
    }
    /* Preemption (preempt.c), before the monitor that asks for it. */
    if ((rc = usched__preempt_start(s)) < 0) {
        stop_workers(s);
        goto fail;
    }
    /* The stall monitor (monitor.c), once the workers run. */
    if ((rc = usched__monitor_start(s)) < 0) {
        usched__error(-rc, "start: cannot start the stall monitor");
        stop_workers(s);
        goto fail;
    }
    return 0;
fail:
    if (pol_inited && s->ops->exit) s->ops->exit(&s->pol); /* the workers are stopped */
    usched__trace_close(s);
    if (s->wk) usched__trace_stop(s); /* frees the buffers; the file is closed */
    free_workers(s);
    usched__idlemask_fini(&s->idle_cpus);
    usched__idlemask_fini(&s->idle_cores);
    usched__topo_free(s->topo);
    s->topo = NULL;
    free(s->emu_os);
    s->emu_os = NULL;
    s->ncpus = 0;
    return rc;
}

USCHED_EXPORT int usched_ncpus(usched_t *s)
{
    if (!s) return usched__error(EINVAL, "ncpus: scheduler is NULL");
    if (!atomic_load(&s->started)) return usched__error(ESRCH, "ncpus: scheduler not started");
    return s->ncpus;
}

USCHED_EXPORT int usched_wait(usched_t *s)
{
    if (!s) return usched__error(EINVAL, "wait: scheduler is NULL");
    if (!atomic_load(&s->started)) return usched__error(ESRCH, "wait: scheduler not started");
    struct usched__wk *w = usched__self_wk();
    if (w && w->s == s) return usched__error(EDEADLK, "wait: called from a fiber of the same scheduler");
    usched__wait_live(s, false);
    return 0;
}

/*
 * Schedulers destroyed with fibers blocked forever. Such a fiber still
 * points at its scheduler, and a thread the scheduler cannot see (a plain
 * thread that sends on a channel later) may still wake it: the wake-up
 * reads the scheduler, its workers, topology and policy. So destroy stops
 * the workers and writes the trace but frees none of that; the scheduler
 * stays here, reachable, for the life of the process, and a late wake-up
 * queues the fiber where no worker will run it.
 */
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
static usched_t *retired; /* under retired_lock, linked by retired_next */

static void retire(usched_t *s)
{
    pthread_mutex_lock(&retired_lock);
    s->out.retired_next = retired;
    retired = s;
    pthread_mutex_unlock(&retired_lock);
}

USCHED_EXPORT int usched_destroy(usched_t *s)
{
    if (!s) return usched__error(EINVAL, "destroy: scheduler is NULL");
    struct usched__wk *self = usched__self_wk();
    if (self && self->s == s) return usched__error(EDEADLK, "destroy: called from a fiber of the same scheduler");
    int rc = 0;
    if (atomic_load(&s->started)) {
        bool deadlock = usched__wait_live(s, true) == -EDEADLK;
        if (deadlock) {
            unsigned long long n = (unsigned long long)atomic_load(&s->life.live);
            fprintf(stderr, "usched: destroy: %llu fiber%s blocked forever; the scheduler's memory and "
                    "their stacks are not reclaimed\n", n, n == 1 ? "" : "s");
            rc = usched__error(EDEADLK, "destroy: %llu fibers were blocked forever", n);
            usched__cancel_owaiters(s);
        }
        usched__monitor_stop(s); /* before the workers: it reads their state */
        atomic_store(&s->stopping, 1);
        usched__wk_kick_all(s);
        for (int c = 0; c < s->ncpus; c++)
            if (s->wk[c]->thread_started) pthread_join(s->wk[c]->thread, NULL);
        if (deadlock) {
            usched__trace_stop(s); /* its error, if any, is on stderr; -EDEADLK says more */
            retire(s);
            return rc;
        }
        if (s->ops->exit) s->ops->exit(&s->pol);
        usched__park_fini(s); /* the I/O backend's poller, once no worker polls */
        int trc = usched__trace_stop(s); /* writes the trace, once no worker records */
        if (trc < 0 && rc == 0) rc = trc;
    }
    free_workers(s);
    usched__idlemask_fini(&s->idle_cpus);
    usched__idlemask_fini(&s->idle_cores);
    usched__topo_free(s->topo);
    free(s->emu_os);
    pthread_mutex_destroy(&s->gq.lock);
    pthread_mutex_destroy(&s->out.lock);
    free(s->cfg.policy);
    free(s->cfg.topology);
    free(s->cfg.cpus);
    free(s->trace_path);
    free(s);
    return rc;
}

/* ---- counters ----------------------------------------------------------- */

static uint64_t stat_sum(usched_t *s, int id)
{
    uint64_t v = atomic_load_explicit(&s->out.stats.v[id], memory_order_relaxed);
    for (int c = 0; c < s->ncpus; c++)
        v += atomic_load_explicit(&s->wk[c]->stats.v[id], memory_order_relaxed);
    return v;
}

USCHED_EXPORT int usched_stat(usched_t *s, const char *name, uint64_t *value)
{
    if (!s || !name || !value) return usched__error(EINVAL, "stat: NULL argument");
    int id = usched__stat_lookup(name);
    if (id < 0) return usched__error(ENOENT, "stat: unknown counter '%s'", name);
    *value = stat_sum(s, id);
    return 0;
}

USCHED_EXPORT int usched_stats_print(usched_t *s, FILE *f)
{
    if (!s || !f) return usched__error(EINVAL, "stats_print: NULL argument");
    for (int i = 0; i < USCHED_NSTATS; i++)
        fprintf(f, "%-20s %llu\n", usched__stat_name(i), (unsigned long long)stat_sum(s, i));
    if (atomic_load(&s->started)) usched__wakelat_print(s, f);
    return 0;
}

USCHED_EXPORT int usched_stats_reset(usched_t *s)
{
    if (!s) return usched__error(EINVAL, "stats_reset: NULL argument");
    for (int i = 0; i < USCHED_NSTATS; i++) {
        atomic_store(&s->out.stats.v[i], 0);
        for (int c = 0; c < s->ncpus; c++) atomic_store(&s->wk[c]->stats.v[i], 0);
    }
    if (s->wk) usched__wakelat_reset(s);
    return 0;
}
