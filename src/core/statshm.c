/*
 * The live statistics segment (docs/top.md, layout in
 * include/usched/stats_shm.h). Only the stall monitor's thread writes it:
 * every USCHED__STATSHM_PERIOD_NS while a worker is awake, and once more
 * before the monitor sleeps because every worker parked, so an idle
 * program's segment holds its final counts. The workers keep counting into
 * their own lines as before (stats.h); the monitor reads those lines ten
 * times a second, which costs a worker at most one cache miss per counter
 * line per read.
 *
 * A segment outlives a program killed before usched_destroy (SIGKILL, a
 * crash, exit() without destroy). Such stale segments are found by their
 * name (the PID) and removed: by every program that creates a segment
 * (those of PIDs that no longer run, owned by the same user), and by
 * `usched top`, which also tells a live process that reuses the PID from
 * the segment's owner by its memory map.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "usched/stats_shm.h"
#include "base/atomic.h"
#include "base/error.h"
#include "base/fault.h"
#include "core/queue.h"
#include "core/statshm.h"
#include "core/trace.h"

struct usched__statshm {
    struct usched_stats_shm_hdr *h; /* the mapping */
    size_t size;
    uint64_t last_ns;               /* the last rewrite */
    char name[64];                  /* for shm_unlink */
};

static _Atomic uint32_t next_index; /* the process's schedulers, in start order */

int usched__statshm_wanted(void)
{
    const char *v = getenv("USCHED_STATS_SHM");
    if (!v || !*v || !strcmp(v, "0")) return 0;
    if (!strcmp(v, "1")) return 1;
    return usched__error(EINVAL, "USCHED_STATS_SHM: '%s' is not 0 or 1", v);
}

/* Removes the segments of this user whose process no longer runs. */
static void remove_stale(void)
{
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    const char *prefix = &USCHED_STATS_SHM_PREFIX[1]; /* without the '/' */
    size_t plen = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, plen) != 0) continue;
        char *end;
        long pid = strtol(e->d_name + plen, &end, 10);
        struct stat st;
        if (end == e->d_name + plen || *end != '.' || pid <= 0 || pid == getpid()) continue;
        if (fstatat(dirfd(d), e->d_name, &st, 0) < 0 || st.st_uid != geteuid()) continue;
        if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
            char name[300];
            snprintf(name, sizeof name, "/%s", e->d_name);
            shm_unlink(name);
        }
    }
    closedir(d);
}

/* Where each part goes (include/usched/stats_shm.h). */
static size_t layout(struct usched_stats_shm_hdr *h, int ncpus)
{
    size_t off = sizeof *h;
    h->hdr_size = (uint32_t)sizeof *h;
    h->ncpus = (uint32_t)ncpus;
    h->nstats = USCHED_NSTATS;
    h->lat_nb = USCHED__LAT_NB;
    h->nlevels = USCHED_NLEVELS;
    h->cpu_size = (uint32_t)(sizeof(struct usched_stats_shm_cpu) + 8u * (USCHED_NSTATS + USCHED__LAT_NB));
    h->levels_off = (uint32_t)off, off += (size_t)h->nlevels * USCHED_STATS_SHM_NAME_LEN;
    h->names_off = (uint32_t)off, off += (size_t)h->nstats * USCHED_STATS_SHM_NAME_LEN;
    h->lat_low_off = (uint32_t)off, off += 8u * h->lat_nb;
    h->outside_off = (uint32_t)off, off += 8u * h->nstats;
    h->cpus_off = (uint32_t)off, off += (size_t)ncpus * h->cpu_size;
    h->size = off;
    return off;
}

_Static_assert(USCHED_NLEVELS <= USCHED_STATS_SHM_MAX_LEVELS, "stats_shm.h: too few levels in a CPU record");
_Static_assert(sizeof(struct usched_stats_shm_hdr) % 8 == 0 && sizeof(struct usched_stats_shm_cpu) % 8 == 0,
               "stats_shm.h: the records keep their counters 8-byte aligned");

static struct usched_stats_shm_cpu *cpu_rec(struct usched_stats_shm_hdr *h, int c)
{
    return (struct usched_stats_shm_cpu *)((char *)h + h->cpus_off + (size_t)c * h->cpu_size);
}

/* The parts written once. */
static void fill_static(struct usched__statshm *m, struct usched *s, uint32_t index)
{
    struct usched_stats_shm_hdr *h = m->h;
    char *base = (char *)h;
    h->version = USCHED_STATS_SHM_VERSION;
    h->pid = (int32_t)getpid();
    h->index = index;
    h->start_ns = usched__now_ns();
    snprintf(h->policy, sizeof h->policy, "%s", s->ops->name);
    for (int l = 0; l < USCHED_NLEVELS; l++)
        snprintf(base + h->levels_off + (size_t)l * USCHED_STATS_SHM_NAME_LEN, USCHED_STATS_SHM_NAME_LEN, "%s",
                 usched__topo_level_name(l));
    for (int i = 0; i < USCHED_NSTATS; i++)
        snprintf(base + h->names_off + (size_t)i * USCHED_STATS_SHM_NAME_LEN, USCHED_STATS_SHM_NAME_LEN, "%s",
                 usched__stat_name(i));
    uint64_t *low = (uint64_t *)(base + h->lat_low_off);
    /* Buckets SUB to 2 SUB - 1 stay empty (4 ns and up start at bucket
     * 2 SUB, usched__lat_bucket), and usched__lat_low has no answer for
     * them: they start where the next used one does. */
    for (int i = 0; i < USCHED__LAT_NB; i++)
        low[i] = i >= USCHED__LAT_SUB && i < 2 * USCHED__LAT_SUB ? usched__lat_low(2 * USCHED__LAT_SUB)
                                                                  : usched__lat_low(i);
    bool live = usched__topo_is_live(s->topo);
    for (int c = 0; c < s->ncpus; c++) {
        struct usched_stats_shm_cpu *r = cpu_rec(h, c);
        r->os_cpu = s->emu_os ? s->emu_os[c] : live ? usched__topo_os_index(s->topo, c) : -1;
        for (int l = 0; l < USCHED_NLEVELS; l++) r->group[l] = usched__topo_group(s->topo, c, l);
    }
}

struct usched__statshm *usched__statshm_create(struct usched *s)
{
    if (usched__statshm_wanted() <= 0) return NULL; /* a bad value failed usched_start already */
    struct usched__statshm *m = usched__calloc(1, sizeof *m);
    if (!m) {
        fprintf(stderr, "usched: USCHED_STATS_SHM: out of memory; no statistics segment\n");
        return NULL;
    }
    remove_stale();
    uint32_t index = atomic_fetch_add(&next_index, 1);
    snprintf(m->name, sizeof m->name, USCHED_STATS_SHM_PREFIX "%d.%u", (int)getpid(), index);
    struct usched_stats_shm_hdr h0 = {0};
    m->size = layout(&h0, s->ncpus);
    /* Mode 0400: readable by the user, writable through this mapping only.
     * A segment of this very name was left by an earlier process with this
     * PID (this one numbers its own): it is stale. */
    int fd = shm_open(m->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
    if (fd < 0 && errno == EEXIST && shm_unlink(m->name) == 0)
        fd = shm_open(m->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
    void *p = MAP_FAILED;
    int err = 0;
    if (fd < 0) {
        err = errno;
    } else {
        if (ftruncate(fd, (off_t)m->size) < 0 ||
            (p = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
            err = errno;
        close(fd);
    }
    if (p == MAP_FAILED) {
        fprintf(stderr, "usched: USCHED_STATS_SHM: cannot create /dev/shm%s: %s; no statistics segment\n",
                m->name, strerror(err));
        if (fd >= 0) shm_unlink(m->name);
        free(m);
        return NULL;
    }
    m->h = p;
    *m->h = h0;
    fill_static(m, s, index);
    usched__statshm_publish(m, s, true);
    /* The magic last: a reader that sees it sees the rest. */
    usched__full_fence();
    memcpy(m->h->magic, USCHED_STATS_SHM_MAGIC, sizeof m->h->magic);
    return m;
}

void usched__statshm_publish(struct usched__statshm *m, struct usched *s, bool force)
{
    if (!m) return;
    uint64_t now = usched__now_ns();
    if (!force && now - m->last_ns < USCHED__STATSHM_PERIOD_NS) return;
    m->last_ns = now;
    struct usched_stats_shm_hdr *h = m->h;
    uint64_t seq = __atomic_load_n(&h->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&h->seq, seq + 1, __ATOMIC_RELAXED);
    usched__full_fence(); /* odd before any rewritten field (a release fence would do) */
    h->published_ns = now;
    h->publishes++;
    h->live = atomic_load_explicit(&s->life.live, memory_order_relaxed);
    h->global_queue = atomic_load_explicit(&s->gq.n, memory_order_relaxed);
    h->spinning = atomic_load_explicit(&s->park.nspinning, memory_order_relaxed);
    h->parked = atomic_load_explicit(&s->park.nparked, memory_order_relaxed);
    uint64_t *out = (uint64_t *)((char *)h + h->outside_off);
    for (int i = 0; i < USCHED_NSTATS; i++)
        out[i] = atomic_load_explicit(&s->out.stats.v[i], memory_order_relaxed);
    for (int c = 0; c < s->ncpus; c++) {
        struct usched__wk *w = s->wk[c];
        struct usched_stats_shm_cpu *r = cpu_rec(h, c);
        uint32_t st = atomic_load_explicit(&w->state, memory_order_relaxed);
        bool running = atomic_load_explicit(&w->current, memory_order_relaxed) != NULL;
        r->state = st == WK_PARKED        ? USCHED_STATS_SHM_PARKED
                   : st == WK_PARKED_POLL ? USCHED_STATS_SHM_POLLER
                   : running              ? USCHED_STATS_SHM_RUNNING
                                          : USCHED_STATS_SHM_SPINNING;
        r->contended = usched__wk_packed(w) ? 2 : usched__wk_contended(w);
        r->runq = usched__ring_len(&w->ring);
        int32_t inbox = atomic_load_explicit(&w->inbox_n, memory_order_relaxed);
        r->inbox = inbox > 0 ? (uint32_t)inbox : 0;
        r->next = atomic_load_explicit(&w->next, memory_order_relaxed) != NULL;
        r->bound = atomic_load_explicit(&w->nbound, memory_order_relaxed);
        r->cur_id = running ? atomic_load_explicit(&w->cur_id, memory_order_relaxed) : 0;
        r->lat_max = atomic_load_explicit(&w->lat.max, memory_order_relaxed);
        uint64_t *v = (uint64_t *)(r + 1);
        for (int i = 0; i < USCHED_NSTATS; i++) v[i] = atomic_load_explicit(&w->stats.v[i], memory_order_relaxed);
        v += USCHED_NSTATS;
        for (int i = 0; i < USCHED__LAT_NB; i++) v[i] = atomic_load_explicit(&w->lat.n[i], memory_order_relaxed);
    }
    __atomic_store_n(&h->seq, seq + 2, __ATOMIC_RELEASE);
}

void usched__statshm_destroy(struct usched__statshm *m)
{
    if (!m) return;
    shm_unlink(m->name);
    munmap(m->h, m->size);
    free(m);
}
