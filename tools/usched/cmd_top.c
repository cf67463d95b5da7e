/*
 * usched top PID [--once] [--json] [--interval SEC] [--count N] [--sched N]
 * usched top --clean
 *
 * A live view of a running program that allowed it with USCHED_STATS_SHM=1
 * (docs/top.md): reads the statistics segment the program's stall monitor
 * rewrites (include/usched/stats_shm.h, read-only here) and shows, every
 * --interval seconds, each CPU's state, queue lengths, wake-up latency
 * p50/p99 and placement and I/O rates, grouped by package, LLC and core.
 * --once prints one view (counts since the start); --json prints it as one
 * JSON object per line (cumulative counts, for scripts). --clean removes
 * the stale segments of programs that were killed before they could.
 *
 * Exit status: 0 printed (or the program ended while watched); 1 no such
 * process, no segment, or a segment that is stale, truncated, of another
 * layout version or otherwise malformed (one line on stderr naming it);
 * 2 bad usage.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_opts.h"
#include "usched.h"
#include "usched/stats_shm.h"

int cmd_top(int argc, char **argv);

static const char top_usage[] =
    "usage: usched top PID [options]\n"
    "       usched top --clean\n"
    "\n"
    "Shows what the schedulers of a running program do, refreshed every second:\n"
    "each CPU's state, queue lengths, wake-up latency and placement and I/O\n"
    "rates, grouped by package, LLC and core. The program must allow it: run it\n"
    "with USCHED_STATS_SHM=1 (docs/top.md). Ctrl-C quits.\n"
    "\n"
    "  -1, --once           print one view (counts since the start) and exit\n"
    "  -j, --json           print JSON (cumulative counts), one object per line\n"
    "  -i, --interval SEC   seconds between views (default 1, 0.1 to 3600)\n"
    "  -n, --count N        stop after N views\n"
    "  -s, --sched N        the program's Nth started scheduler (default: the\n"
    "                       first whose segment exists)\n"
    "      --clean          remove the segments of programs that were killed\n"
    "                       before they could remove them, and exit\n"
    "  -h, --help           print this help\n";

#define SHM_DIR "/dev/shm"

/* ---- the segment ---------------------------------------------------------------- */

struct seg {
    char name[112]; /* "/usched-stats.PID.N" */
    char path[128]; /* under SHM_DIR */
    int fd;
    const struct usched_stats_shm_hdr *map;
    size_t size;
    unsigned char *copy; /* the last consistent snapshot */
};

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("usched top: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* Parses "usched-stats.PID.N"; false for any other name. */
static bool parse_name(const char *d_name, long *pid, long *index)
{
    const char *prefix = &USCHED_STATS_SHM_PREFIX[1];
    size_t plen = strlen(prefix);
    if (strncmp(d_name, prefix, plen) != 0) return false;
    char *end;
    errno = 0;
    *pid = strtol(d_name + plen, &end, 10);
    if (end == d_name + plen || *end != '.' || *pid <= 0 || errno) return false;
    const char *i = end + 1;
    *index = strtol(i, &end, 10);
    return end != i && !*end && *index >= 0 && !errno;
}

/* Does process pid map the segment file name (its memory map names it)? 1 yes,
 * 0 no, -1 its map cannot be read (another user's process). */
static int maps_segment(long pid, const char *file)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%ld/maps", pid);
    FILE *f = fopen(p, "r");
    if (!f) return -1;
    char line[4096];
    size_t flen = strlen(file);
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *at = strstr(line, SHM_DIR "/");
        if (at && !strncmp(at + sizeof SHM_DIR, file, flen) && (at[sizeof SHM_DIR + flen] == '\n' ||
                                                                 at[sizeof SHM_DIR + flen] == ' '))
            found = 1;
    }
    fclose(f);
    return found;
}

/* Process pid exists and is not a zombie (one killed but not yet reaped
 * has already lost its memory). */
static bool process_runs(long pid)
{
    if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) return false;
    char p[64], buf[512];
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f) return true; /* no /proc: kill() said it exists */
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the name may hold anything but ends at the last ')' */
    return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

/* A program creates its segment file (shm_open), then sizes and maps it: for
 * a moment its file exists and it maps nothing. A file of a running process
 * is judged by its mapping only once it is this old (its mtime: set by the
 * creation and the sizing). */
#define STALE_GRACE_S 10

/* The segment file (d_name form) was created or sized less than
 * STALE_GRACE_S ago (or cannot be read: then it is left alone too). */
static bool segment_young(const char *file)
{
    char p[300];
    snprintf(p, sizeof p, SHM_DIR "/%s", file);
    struct stat st;
    struct timespec now;
    if (stat(p, &st) < 0 || clock_gettime(CLOCK_REALTIME, &now) < 0) return true;
    return now.tv_sec - st.st_mtim.tv_sec < STALE_GRACE_S;
}

/* Why the segment file of process pid is stale, or NULL when it is not. */
static const char *stale_reason(long pid, const char *file, char *buf, size_t len)
{
    if (!process_runs(pid)) {
        snprintf(buf, len, "process %ld is gone (killed, or it exited without usched_destroy)", pid);
        return buf;
    }
    if (!segment_young(file) && maps_segment(pid, file) == 0) {
        snprintf(buf, len, "process %ld does not map it (the PID now names another program)", pid);
        return buf;
    }
    return NULL;
}

/* Removes the stale segment file (d_name form); says what it did. */
static void remove_stale(const char *file, const char *why)
{
    char name[300];
    snprintf(name, sizeof name, "/%s", file);
    if (shm_unlink(name) == 0)
        fprintf(stderr, "usched top: removed the stale segment " SHM_DIR "/%s: %s\n", file, why);
    else
        fprintf(stderr, "usched top: cannot remove the stale segment " SHM_DIR "/%s (%s): %s\n", file,
                strerror(errno), why);
}

static int do_clean(void)
{
    DIR *d = opendir(SHM_DIR);
    if (!d) return fail("cannot read " SHM_DIR ": %s", strerror(errno));
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        long pid, index;
        char why[160];
        if (!parse_name(e->d_name, &pid, &index) || !stale_reason(pid, e->d_name, why, sizeof why)) continue;
        remove_stale(e->d_name, why);
        n++;
    }
    closedir(d);
    printf("usched top: %d stale segment%s removed\n", n, n == 1 ? "" : "s");
    return 0;
}

/* The segment file of pid: index `want`, or the lowest when want < 0. 0 and
 * its d_name in file, or 1 after saying why there is none. */
static int find_segment(long pid, long want, char *file, size_t len)
{
    long best = -1;
    if (want >= 0) {
        char p[160];
        snprintf(p, sizeof p, SHM_DIR "%s%ld.%ld", USCHED_STATS_SHM_PREFIX, pid, want);
        if (access(p, F_OK) == 0) best = want;
    } else {
        DIR *d = opendir(SHM_DIR);
        if (!d) return fail("cannot read " SHM_DIR ": %s", strerror(errno));
        struct dirent *e;
        long p, i;
        while ((e = readdir(d)))
            if (parse_name(e->d_name, &p, &i) && p == pid && (best < 0 || i < best)) best = i;
        closedir(d);
    }
    bool alive = process_runs(pid);
    if (best < 0) {
        if (!alive) return fail("no process %ld", pid);
        char comm[64] = "?", p[64];
        snprintf(p, sizeof p, "/proc/%ld/comm", pid);
        FILE *f = fopen(p, "r");
        if (f) {
            if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = '\0';
            fclose(f);
        }
        if (want >= 0)
            return fail("process %ld (%s) has no usched statistics segment for scheduler %ld (" SHM_DIR
                        "%s%ld.%ld)",
                        pid, comm, want, USCHED_STATS_SHM_PREFIX, pid, want);
        return fail("process %ld (%s) has no usched statistics segment: start it with USCHED_STATS_SHM=1 "
                    "(a program linked with usched, its scheduler started)",
                    pid, comm);
    }
    snprintf(file, len, "%s%ld.%ld", &USCHED_STATS_SHM_PREFIX[1], pid, best);
    char why[160];
    if (stale_reason(pid, file, why, sizeof why)) {
        remove_stale(file, why);
        return fail(alive ? "process %ld has no live usched statistics segment" : "no process %ld", pid);
    }
    return 0;
}

/* Checks the header of a segment of `size` bytes: NULL, or what is wrong. */
static const char *check_header(const struct usched_stats_shm_hdr *h, size_t size, char *buf, size_t len)
{
    if (size < sizeof h->magic + 2 * sizeof(uint32_t)) {
        snprintf(buf, len, "truncated: %zu bytes, shorter than a header", size);
        return buf;
    }
    if (memcmp(h->magic, USCHED_STATS_SHM_MAGIC, sizeof h->magic) != 0) {
        snprintf(buf, len, "not a usched statistics segment (no '%s' at its start)", USCHED_STATS_SHM_MAGIC);
        return buf;
    }
    if (h->version != USCHED_STATS_SHM_VERSION) {
        snprintf(buf, len, "layout version %u, this usched reads version %u (use the usched of the program's version)",
                 h->version, USCHED_STATS_SHM_VERSION);
        return buf;
    }
    if (size < sizeof *h) {
        snprintf(buf, len, "truncated: %zu bytes, shorter than the %zu-byte header", size, sizeof *h);
        return buf;
    }
    if (h->hdr_size != sizeof *h) {
        snprintf(buf, len, "malformed: header of %u bytes in layout version %u, expected %zu", h->hdr_size,
                 h->version, sizeof *h);
        return buf;
    }
    if (h->size > size) {
        snprintf(buf, len, "truncated: %zu bytes, its header says %llu", size, (unsigned long long)h->size);
        return buf;
    }
    uint64_t cpu_size = sizeof(struct usched_stats_shm_cpu) + 8ull * ((uint64_t)h->nstats + h->lat_nb);
    const char *bad = NULL;
    if (!h->ncpus || h->ncpus > 65536) bad = "CPU count";
    else if (!h->nstats || h->nstats > 65536) bad = "counter count";
    else if (!h->lat_nb || h->lat_nb > 65536) bad = "latency bucket count";
    else if (!h->nlevels || h->nlevels > USCHED_STATS_SHM_MAX_LEVELS) bad = "level count";
    else if (h->cpu_size != cpu_size) bad = "CPU record size";
    else if (h->levels_off < sizeof *h || (uint64_t)h->levels_off + h->nlevels * USCHED_STATS_SHM_NAME_LEN > h->size)
        bad = "level names offset";
    else if (h->names_off < sizeof *h || (uint64_t)h->names_off + (uint64_t)h->nstats * USCHED_STATS_SHM_NAME_LEN > h->size)
        bad = "counter names offset";
    else if (h->lat_low_off < sizeof *h || h->lat_low_off % 8 || (uint64_t)h->lat_low_off + 8ull * h->lat_nb > h->size)
        bad = "latency buckets offset";
    else if (h->outside_off < sizeof *h || h->outside_off % 8 || (uint64_t)h->outside_off + 8ull * h->nstats > h->size)
        bad = "outside counters offset";
    else if (h->cpus_off < sizeof *h || h->cpus_off % 8 || (uint64_t)h->cpus_off + cpu_size * h->ncpus > h->size)
        bad = "CPU records offset";
    if (bad) {
        snprintf(buf, len, "malformed: its header's %s does not fit its %llu bytes", bad,
                 (unsigned long long)h->size);
        return buf;
    }
    return NULL;
}

static void seg_close(struct seg *g)
{
    if (g->map) munmap((void *)g->map, g->size);
    if (g->fd >= 0) close(g->fd);
    free(g->copy);
    g->map = NULL, g->copy = NULL, g->fd = -1;
}

/* Opens and checks the segment file of process pid. 0, or 1 said. */
static int seg_open(struct seg *g, long pid, const char *file)
{
    memset(g, 0, sizeof *g);
    g->fd = -1;
    snprintf(g->name, sizeof g->name, "/%s", file);
    snprintf(g->path, sizeof g->path, SHM_DIR "/%s", file);
    g->fd = shm_open(g->name, O_RDONLY | O_CLOEXEC, 0);
    if (g->fd < 0) return fail("%s: %s", g->path, strerror(errno));
    struct stat st;
    if (fstat(g->fd, &st) < 0) {
        int e = errno;
        seg_close(g);
        return fail("%s: %s", g->path, strerror(e));
    }
    char why[200];
    g->size = (size_t)st.st_size;
    if (g->size == 0) {
        seg_close(g);
        return fail("%s: truncated: empty (0 bytes)", g->path);
    }
    void *p = mmap(NULL, g->size, PROT_READ, MAP_SHARED, g->fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        seg_close(g);
        return fail("%s: %s", g->path, strerror(e));
    }
    g->map = p;
    const char *bad = check_header(g->map, g->size, why, sizeof why);
    if (!bad && g->map->pid != pid) {
        snprintf(why, sizeof why, "malformed: its header names process %d", (int)g->map->pid);
        bad = why;
    }
    if (bad) {
        seg_close(g);
        return fail("%s: %s", g->path, bad);
    }
    if (!(g->copy = malloc(g->size))) {
        seg_close(g);
        return fail("%s: out of memory", g->path);
    }
    return 0;
}

/* The acquire fence between the copy and the second load of seq. GCC
 * rejects fences under ThreadSanitizer (-Wtsan), which cannot see the
 * writer, another process, anyway: there, only the compiler is held back. */
#if defined(__SANITIZE_THREAD__)
#define read_fence() __asm__ __volatile__("" ::: "memory")
#else
#define read_fence() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#endif

/* A consistent copy of the segment (the sequence lock of stats_shm.h).
 * 0, or 1 said: the segment shrank or never held still. */
static int seg_snapshot(struct seg *g)
{
    struct stat st;
    if (fstat(g->fd, &st) < 0 || (size_t)st.st_size < g->size)
        return fail("%s: truncated while read (%lld bytes now, %zu before)", g->path, (long long)st.st_size,
                    g->size);
    const uint64_t *seqp = &g->map->seq;
    for (int tries = 0; tries < 100000; tries++) {
        uint64_t a = __atomic_load_n(seqp, __ATOMIC_ACQUIRE);
        if (a & 1) continue;
        memcpy(g->copy, g->map, g->size);
        read_fence();
        if (__atomic_load_n(seqp, __ATOMIC_RELAXED) == a) {
            const struct usched_stats_shm_hdr *h = (const void *)g->copy;
            char why[200];
            /* the fixed part again, on the copy the views read */
            const char *bad = check_header(h, g->size, why, sizeof why);
            return bad ? fail("%s: %s", g->path, bad) : 0;
        }
    }
    return fail("%s: never held still (its writer rewrites it without end)", g->path);
}

/* ---- reading a snapshot ------------------------------------------------------------ */

struct view {
    const struct usched_stats_shm_hdr *h;
    uint64_t end_ns; /* the counts hold until then: the rewrite, or now while every worker parks */
    int lvl_package, lvl_llc, lvl_core;
    /* counter indexes, -1 when the segment has no such counter */
    int i_switches, i_local, i_remote, i_shared, i_stolen, i_io_events, i_io_polls;
};

static const char *level_name(const struct usched_stats_shm_hdr *h, uint32_t l)
{
    return (const char *)h + h->levels_off + (size_t)l * USCHED_STATS_SHM_NAME_LEN;
}

static const char *stat_name(const struct usched_stats_shm_hdr *h, uint32_t i)
{
    return (const char *)h + h->names_off + (size_t)i * USCHED_STATS_SHM_NAME_LEN;
}

static const struct usched_stats_shm_cpu *cpu_rec(const struct usched_stats_shm_hdr *h, uint32_t c)
{
    return (const void *)((const char *)h + h->cpus_off + (size_t)c * h->cpu_size);
}

static const uint64_t *cpu_stats(const struct usched_stats_shm_hdr *h, uint32_t c)
{
    return (const uint64_t *)(cpu_rec(h, c) + 1);
}

static const uint64_t *cpu_lat(const struct usched_stats_shm_hdr *h, uint32_t c)
{
    return cpu_stats(h, c) + h->nstats;
}

static int find_level(const struct usched_stats_shm_hdr *h, const char *name)
{
    for (uint32_t l = 0; l < h->nlevels; l++)
        if (!strncmp(level_name(h, l), name, USCHED_STATS_SHM_NAME_LEN)) return (int)l;
    return -1;
}

static int find_stat(const struct usched_stats_shm_hdr *h, const char *name)
{
    for (uint32_t i = 0; i < h->nstats; i++)
        if (!strncmp(stat_name(h, i), name, USCHED_STATS_SHM_NAME_LEN)) return (int)i;
    return -1;
}

static void view_init(struct view *v, const struct usched_stats_shm_hdr *h, uint64_t now)
{
    v->h = h;
    /* With every worker parked the monitor rewrote the segment before it
     * slept, and nothing counts until a worker wakes (and wakes it). */
    v->end_ns = h->parked == h->ncpus && now > h->published_ns ? now : h->published_ns;
    v->lvl_package = find_level(h, "package");
    v->lvl_llc = find_level(h, "llc");
    v->lvl_core = find_level(h, "core");
    v->i_switches = find_stat(h, "switches");
    v->i_local = find_stat(h, "wake_local");
    v->i_remote = find_stat(h, "wake_remote");
    v->i_shared = find_stat(h, "wake_shared");
    v->i_stolen = find_stat(h, "stolen_fibers");
    v->i_io_events = find_stat(h, "io_events");
    v->i_io_polls = find_stat(h, "io_polls");
}

/* The q-quantile of a latency histogram: the upper end of the bucket that
 * holds it, capped at max; 0 for none. */
static uint64_t quantile(const struct usched_stats_shm_hdr *h, const uint64_t *n, uint64_t max, double q)
{
    const uint64_t *low = (const uint64_t *)((const char *)h + h->lat_low_off);
    uint64_t count = 0, acc = 0;
    for (uint32_t i = 0; i < h->lat_nb; i++) count += n[i];
    if (!count) return 0;
    uint64_t want = (uint64_t)(q * (double)count + 0.999999);
    if (want < 1) want = 1;
    for (uint32_t i = 0; i < h->lat_nb; i++) {
        acc += n[i];
        if (acc >= want) {
            uint64_t hi = i + 1 < h->lat_nb && low[i + 1] > 0 ? low[i + 1] - 1 : UINT64_MAX;
            return hi < max ? hi : max;
        }
    }
    return max;
}

static const char *const state_names[] = {"running", "spinning", "parked", "poller"};

static const char *state_name(uint32_t st)
{
    return st < sizeof state_names / sizeof state_names[0] ? state_names[st] : "?";
}

/* ---- JSON -------------------------------------------------------------------------- */

static json_t *json_counters(const struct usched_stats_shm_hdr *h, const uint64_t *v)
{
    json_t *o = json_object();
    for (uint32_t i = 0; i < h->nstats; i++) {
        char name[USCHED_STATS_SHM_NAME_LEN + 1];
        snprintf(name, sizeof name, "%.*s", (int)USCHED_STATS_SHM_NAME_LEN, stat_name(h, i));
        json_object_set_new(o, name, json_integer((json_int_t)v[i]));
    }
    return o;
}

static json_t *json_latency(const struct usched_stats_shm_hdr *h, const uint64_t *n, uint64_t max)
{
    uint64_t count = 0;
    for (uint32_t i = 0; i < h->lat_nb; i++) count += n[i];
    return json_pack("{s:I, s:I, s:I, s:I}", "count", (json_int_t)count, "p50_ns",
                     (json_int_t)quantile(h, n, max, 0.50), "p99_ns", (json_int_t)quantile(h, n, max, 0.99),
                     "max_ns", (json_int_t)max);
}

static int print_json(const struct view *v, uint64_t now)
{
    const struct usched_stats_shm_hdr *h = v->h;
    uint64_t *tot = calloc(h->nstats, sizeof *tot), *lat = calloc(h->lat_nb, sizeof *lat), max = 0;
    json_t *root = json_object(), *cpus = json_array(), *levels = json_array();
    if (!tot || !lat || !root || !cpus || !levels) {
        free(tot), free(lat), json_decref(root), json_decref(cpus), json_decref(levels);
        return fail("out of memory");
    }
    const uint64_t *out = (const uint64_t *)((const char *)h + h->outside_off);
    for (uint32_t i = 0; i < h->nstats; i++) tot[i] = out[i];
    for (uint32_t l = 0; l < h->nlevels; l++)
        json_array_append_new(levels, json_stringn(level_name(h, l), strnlen(level_name(h, l), USCHED_STATS_SHM_NAME_LEN)));
    for (uint32_t c = 0; c < h->ncpus; c++) {
        const struct usched_stats_shm_cpu *r = cpu_rec(h, c);
        const uint64_t *st = cpu_stats(h, c), *ln = cpu_lat(h, c);
        for (uint32_t i = 0; i < h->nstats; i++) tot[i] += st[i];
        for (uint32_t i = 0; i < h->lat_nb; i++) lat[i] += ln[i];
        if (r->lat_max > max) max = r->lat_max;
        json_t *groups = json_object();
        for (uint32_t l = 0; l < h->nlevels; l++)
            json_object_set_new(groups, json_string_value(json_array_get(levels, l)), json_integer(r->group[l]));
        json_array_append_new(
            cpus, json_pack("{s:i, s:i, s:o, s:s, s:b, s:b, s:i, s:i, s:i, s:i, s:I, s:o, s:o}", "cpu", (int)c, "os_cpu",
                            (int)r->os_cpu, "groups", groups, "state", state_name(r->state), "contended",
                            r->contended != 0, "packed", r->contended == 2, "runq", (int)r->runq, "inbox", (int)r->inbox, "next", (int)r->next,
                            "bound", (int)r->bound, "fiber", (json_int_t)r->cur_id, "wake_latency",
                            json_latency(h, ln, r->lat_max), "counters", json_counters(h, st)));
    }
    json_object_set_new(root, "version", json_integer(h->version));
    json_object_set_new(root, "pid", json_integer(h->pid));
    json_object_set_new(root, "sched", json_integer(h->index));
    json_object_set_new(root, "policy", json_stringn(h->policy, strnlen(h->policy, sizeof h->policy)));
    json_object_set_new(root, "ncpus", json_integer(h->ncpus));
    json_object_set_new(root, "uptime_s", json_real((double)(now > h->start_ns ? now - h->start_ns : 0) / 1e9));
    json_object_set_new(root, "age_s", json_real(now > h->published_ns ? (double)(now - h->published_ns) / 1e9 : 0));
    json_object_set_new(root, "publishes", json_integer((json_int_t)h->publishes));
    json_object_set_new(root, "live_fibers", json_integer((json_int_t)h->live));
    json_object_set_new(root, "global_queue", json_integer(h->global_queue));
    json_object_set_new(root, "spinning", json_integer(h->spinning));
    json_object_set_new(root, "parked", json_integer(h->parked));
    json_object_set_new(root, "levels", levels);
    json_object_set_new(root, "cpus", cpus);
    json_object_set_new(root, "outside", json_pack("{s:o}", "counters", json_counters(h, out)));
    json_object_set_new(root, "total", json_pack("{s:o, s:o}", "counters", json_counters(h, tot), "wake_latency",
                                                 json_latency(h, lat, max)));
    int rc = json_dumpf(root, stdout, JSON_COMPACT) < 0 || fputc('\n', stdout) == EOF ? fail("writing stdout failed") : 0;
    json_decref(root);
    free(tot);
    free(lat);
    return rc;
}

/* ---- text -------------------------------------------------------------------------- */

static void fmt_ns(char *buf, size_t len, uint64_t ns, bool any)
{
    if (!any) snprintf(buf, len, "-");
    else if (ns < 1000) snprintf(buf, len, "%lluns", (unsigned long long)ns);
    else if (ns < 1000000) snprintf(buf, len, "%.1fus", (double)ns / 1e3);
    else if (ns < 1000000000) snprintf(buf, len, "%.1fms", (double)ns / 1e6);
    else snprintf(buf, len, "%.1fs", (double)ns / 1e9);
}

/* Counter i's rate (per second over secs) between prev and cur; "-" absent. */
static void fmt_rate(char *buf, size_t len, int i, const uint64_t *cur, const uint64_t *prev, double secs)
{
    if (i < 0) {
        snprintf(buf, len, "-");
        return;
    }
    uint64_t d = cur[i] - (prev ? prev[i] : 0);
    if (prev && cur[i] < prev[i]) d = cur[i]; /* reset since (usched_stats_reset) */
    double r = secs > 0 ? (double)d / secs : 0;
    if (r < 100000) snprintf(buf, len, "%.0f", r);
    else if (r < 100000000) snprintf(buf, len, "%.0fk", r / 1e3);
    else snprintf(buf, len, "%.0fM", r / 1e6);
}

/* One view: rates and latencies between prev (NULL: since the start) and v. */
static void print_text(const struct view *v, const struct view *prev, uint64_t now, bool clear)
{
    const struct usched_stats_shm_hdr *h = v->h, *ph = prev ? prev->h : NULL;
    double secs = (double)(v->end_ns - (prev ? prev->end_ns : h->start_ns)) / 1e9;
    if (clear) fputs("\033[H\033[2J", stdout);
    printf("usched top - pid %d, scheduler %u, policy %.*s, %u CPUs, up %.1f s\n", (int)h->pid, h->index,
           (int)sizeof h->policy, h->policy, h->ncpus, (double)(now > h->start_ns ? now - h->start_ns : 0) / 1e9);
    printf("fibers %llu, global queue %u, spinning %u, parked %u; rates per second %s %.1f s\n",
           (unsigned long long)h->live, h->global_queue, h->spinning, h->parked,
           ph ? "over the last" : "since the start,", secs);
    printf("\n%-22s %-8s %4s %5s %5s %4s %9s %8s %8s %8s %8s %8s %8s %8s %8s\n", "", "STATE", "CONT", "RUNQ",
           "INBOX", "NEXT", "SWITCH/s", "WAKEp50", "WAKEp99", "LOCAL/s", "REMOTE/s", "SHARED/s", "STOLEN/s",
           "IOEV/s", "POLLS/s");
    int last_pkg = -1, last_llc = -1, last_core = -1;
    for (uint32_t c = 0; c < h->ncpus; c++) {
        const struct usched_stats_shm_cpu *r = cpu_rec(h, c);
        int pkg = v->lvl_package >= 0 ? r->group[v->lvl_package] : 0;
        int llc = v->lvl_llc >= 0 ? r->group[v->lvl_llc] : 0;
        int core = v->lvl_core >= 0 ? r->group[v->lvl_core] : (int)c;
        bool new_pkg = c == 0 || pkg != last_pkg, new_llc = new_pkg || llc != last_llc;
        if (new_pkg && v->lvl_package >= 0) printf("package %d\n", pkg);
        if (new_llc && v->lvl_llc >= 0) printf("  llc %d\n", llc);
        char label[32] = "", cpu[24];
        if (new_llc || core != last_core) snprintf(label, sizeof label, "core %d", core);
        last_pkg = pkg, last_llc = llc, last_core = core;
        snprintf(cpu, sizeof cpu, "%-8s cpu %u", label, c);
        /* latency over the interval: the bucket counts' differences */
        const uint64_t *ln = cpu_lat(h, c), *pl = ph ? cpu_lat(ph, c) : NULL;
        uint64_t *d = calloc(h->lat_nb, sizeof *d), count = 0;
        char p50[16] = "-", p99[16] = "-";
        if (d) {
            for (uint32_t i = 0; i < h->lat_nb; i++) {
                d[i] = pl && ln[i] >= pl[i] ? ln[i] - pl[i] : ln[i];
                count += d[i];
            }
            fmt_ns(p50, sizeof p50, quantile(h, d, r->lat_max, 0.50), count > 0);
            fmt_ns(p99, sizeof p99, quantile(h, d, r->lat_max, 0.99), count > 0);
            free(d);
        }
        const uint64_t *st = cpu_stats(h, c), *ps = ph ? cpu_stats(ph, c) : NULL;
        char sw[16], lo[16], re[16], sh[16], so[16], ev[16], po[16];
        fmt_rate(sw, sizeof sw, v->i_switches, st, ps, secs);
        fmt_rate(lo, sizeof lo, v->i_local, st, ps, secs);
        fmt_rate(re, sizeof re, v->i_remote, st, ps, secs);
        fmt_rate(sh, sizeof sh, v->i_shared, st, ps, secs);
        fmt_rate(so, sizeof so, v->i_stolen, st, ps, secs);
        fmt_rate(ev, sizeof ev, v->i_io_events, st, ps, secs);
        fmt_rate(po, sizeof po, v->i_io_polls, st, ps, secs);
        printf("    %-18s %-8s %4s %5u %5u %4u %9s %8s %8s %8s %8s %8s %8s %8s %8s\n", cpu, state_name(r->state),
               r->contended == 2 ? "pack" : r->contended ? "yes" : "-", r->runq, r->inbox, r->next, sw, p50, p99, lo, re, sh, so, ev, po);
    }
    fflush(stdout);
}

/* ---- the command ------------------------------------------------------------------- */

static volatile sig_atomic_t top_stop;

static void on_signal(int sig)
{
    (void)sig;
    top_stop = 1;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleeps secs, or less when a signal asks to stop. */
static void pause_for(double secs)
{
    uint64_t end = mono_ns() + (uint64_t)(secs * 1e9);
    while (!top_stop) {
        uint64_t now = mono_ns();
        if (now >= end) break;
        uint64_t left = end - now < 50000000ull ? end - now : 50000000ull;
        struct timespec ts = {0, (long)left};
        nanosleep(&ts, NULL);
    }
}

/* The program went away while watched: 1 if it did (said on stderr). */
static int gone(const struct seg *g, long pid)
{
    if (access(g->path, F_OK) < 0) {
        fprintf(stderr, "usched top: process %ld removed its segment (its scheduler was destroyed)\n", pid);
        return 1;
    }
    char why[160];
    if (stale_reason(pid, g->path + sizeof SHM_DIR, why, sizeof why)) {
        remove_stale(g->path + sizeof SHM_DIR, why);
        return 1;
    }
    return 0;
}

int cmd_top(int argc, char **argv)
{
    static const struct option opts[] = {
        {"once", no_argument, NULL, '1'},          {"json", no_argument, NULL, 'j'},
        {"interval", required_argument, NULL, 'i'}, {"count", required_argument, NULL, 'n'},
        {"sched", required_argument, NULL, 's'},   {"clean", no_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    bool once = false, json = false, clean = false;
    double interval = 1.0;
    long count = -1, sched = -1, pid = 0;
    int o, rc;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":1ji:n:s:h", opts, NULL)) != -1) {
        switch (o) {
        case '1': once = true; break;
        case 'j': json = true; break;
        case 'C': clean = true; break;
        case 'i': {
            char *end;
            errno = 0;
            interval = strtod(optarg, &end);
            if (end == optarg || *end || errno || !(interval >= 0.1 && interval <= 3600))
                return cli_usage_error("top", "top", "--interval '%s': not a number of seconds in [0.1, 3600]",
                                       optarg);
            break;
        }
        case 'n':
            if ((rc = cli_parse_long("top", "top", "--count", optarg, 1, 1000000000, &count))) return rc;
            break;
        case 's':
            if ((rc = cli_parse_long("top", "top", "--sched", optarg, 0, 1000000000, &sched))) return rc;
            break;
        case 'h': fputs(top_usage, stdout); return 0;
        case ':': return cli_usage_error("top", "top", "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error("top", "top", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (clean) {
        if (optind < argc) return cli_usage_error("top", "top", "--clean takes no PID ('%s')", argv[optind]);
        return do_clean();
    }
    if (optind >= argc) return cli_usage_error("top", "top", "no PID given");
    if (optind + 1 < argc) return cli_usage_error("top", "top", "unexpected argument '%s'", argv[optind + 1]);
    if ((rc = cli_parse_long("top", "top", "PID", argv[optind], 1, 4194304, &pid))) return rc;
    if (once) count = 1;

    char file[96];
    struct seg g;
    if ((rc = find_segment(pid, sched, file, sizeof file)) || (rc = seg_open(&g, pid, file))) return rc;
    unsigned char *prev_copy = NULL;
    struct view v, pv;
    bool have_prev = false, tty = isatty(STDOUT_FILENO) && !json;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    rc = 0;
    for (long n = 0; !top_stop && (count < 0 || n < count); n++) {
        if (n) {
            pause_for(interval);
            if (top_stop || gone(&g, pid)) break;
        }
        if ((rc = seg_snapshot(&g))) break;
        uint64_t now = mono_ns();
        view_init(&v, (const void *)g.copy, now);
        if (json) rc = print_json(&v, now);
        else print_text(&v, have_prev ? &pv : NULL, now, tty);
        if (rc) break;
        /* this snapshot becomes the previous one */
        if (!prev_copy && !(prev_copy = malloc(g.size))) {
            rc = fail("out of memory");
            break;
        }
        memcpy(prev_copy, g.copy, g.size);
        pv = v;
        pv.h = (const void *)prev_copy;
        have_prev = true;
        if (!tty && !json && count != 1) putchar('\n');
    }
    free(prev_copy);
    seg_close(&g);
    if (fflush(stdout) != 0 && !rc) rc = fail("writing stdout failed");
    return rc;
}
