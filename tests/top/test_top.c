/*
 * `usched top` and the live statistics segment (docs/top.md). argv[1] is
 * the built CLI, argv[2] the part:
 *   json    a scheduler of this process with USCHED_STATS_SHM=1 runs a
 *           workload; `usched top PID --once --json` must report exactly
 *           the counters usched_stat and the latency usched_wakelat give,
 *           with the topology's grouping; the segment is mode 0400 and gone
 *           after usched_destroy
 *   errors  bad usage, no such process, a process without a segment, a bad
 *           USCHED_STATS_SHM, and segments (copies of a real one, altered)
 *           that are truncated, of another version or malformed
 *   stale   the segment of a program killed with SIGKILL: `usched top` says
 *           so and removes it; a new program removes those of dead PIDs,
 *           `usched top --clean` those whose PID names another program
 *   tmux    `usched top` in a real terminal (tmux) against `usched serve` on
 *           a virtual 2-package topology: the rows, their grouping by
 *           package, LLC and core, the refresh, and the end of the program
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "run.h"
#include "test.h"
#include "usched.h"
#include "usched/stats_shm.h"

static const char *cli;

#define TOPO "pack:2 l3:1 l2:2 core:1 pu:2" /* 8 CPUs: package c/4, core c/2 */

/* Runs argv[0 .. n-1] and then the arguments a0, ... up to a NULL. */
static struct test_run run_va(const char **argv, int n, const char *a0, va_list ap, bool host)
{
    for (const char *a = a0; a && n < 23; a = va_arg(ap, const char *)) argv[n++] = a;
    argv[n] = NULL;
    return host ? test_run_host_argv(argv, NULL) : test_run_argv(argv, NULL);
}

static struct test_run top(const char *a0, ...)
{
    const char *argv[24] = {cli, "top"};
    va_list ap;
    va_start(ap, a0);
    struct test_run r = run_va(argv, 2, a0, ap, false);
    va_end(ap);
    return r;
}

static void expect(struct test_run r, int status, const char *needle)
{
    if (r.status != status || !strstr(r.err, needle))
        TEST_FAIL_("expected exit %d and \"%s\" on stderr, got %d\nstdout: %s\nstderr: %s", status, needle, r.status,
                   r.out, r.err);
    test_run_free(r);
}

static char *seg_path(char *buf, size_t len, long pid, int index)
{
    snprintf(buf, len, "/dev/shm%s%ld.%d", USCHED_STATS_SHM_PREFIX, pid, index);
    return buf;
}

static usched_t *start_sched(void)
{
    usched_t *s;
    ASSERT_OK(setenv("USCHED_STATS_SHM", "1", 1));
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", TOPO));
    ASSERT_OK(usched_set(s, "policy", "usched"));
    ASSERT_OK(usched_start(s));
    return s;
}

static void sleeper(void *arg)
{
    long n = (long)(intptr_t)arg;
    for (long i = 0; i < n; i++) {
        usched_sleep_ns(20000);
        usched_yield();
    }
}

static void pid_str(char *buf, size_t len, long pid)
{
    snprintf(buf, len, "%ld", pid);
}

/* ---- json ------------------------------------------------------------------------ */

static int stat_index(const char *name)
{
    for (int i = 0; i < usched_stat_count(); i++)
        if (!strcmp(usched_stat_name(i), name)) return i;
    TEST_FAIL_("no counter '%s'", name);
}

static void part_json(void)
{
    usched_t *s = start_sched();
    char path[128], pid[32];
    pid_str(pid, sizeof pid, (long)getpid());
    struct stat st;
    ASSERT_OK(stat(seg_path(path, sizeof path, getpid(), 0), &st));
    ASSERT_EQ(st.st_mode & 0777, 0400); /* read-only to every reader */
    /* 3,000 wake-ups, not scaled: one in at most 127 a CPU decides is
     * measured, so over 8 CPUs some are, whatever the spread */
    for (long i = 0; i < 100; i++) ASSERT_OK(usched_spawn(s, NULL, sleeper, (void *)(intptr_t)30));
    ASSERT_OK(usched_wait(s));

    /* The counters settle once the workers park; the monitor then rewrites
     * the segment before it sleeps. Until the program's counts held still
     * across a whole `usched top` and top showed exactly them, look again. */
    int n = usched_stat_count();
    uint64_t *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b);
    ASSERT(a && b);
    double deadline = test_now() + 60;
    char why[512] = "";
    for (int tries = 0;; tries++) {
        if (test_now() > deadline) TEST_FAIL_("usched top never matched the program's counters: %s", why);
        struct usched_wakelat la, lb;
        for (int i = 0; i < n; i++) ASSERT_OK(usched_stat(s, usched_stat_name(i), &a[i]));
        ASSERT_OK(usched_wakelat(s, -1, &la));
        struct test_run r = top(pid, "--once", "--json", NULL);
        for (int i = 0; i < n; i++) ASSERT_OK(usched_stat(s, usched_stat_name(i), &b[i]));
        ASSERT_OK(usched_wakelat(s, -1, &lb));
        if (r.status != 0) TEST_FAIL_("usched top --once --json: exit %d\n%s", r.status, r.err);
        json_error_t je;
        json_t *j = json_loads(r.out, 0, &je);
        if (!j) TEST_FAIL_("not JSON (%s): %s", je.text, r.out);
        test_run_free(r);
        bool held = !memcmp(a, b, (size_t)n * sizeof *a) && la.count == lb.count && la.max_ns == lb.max_ns;
        json_t *tot = json_object_get(json_object_get(j, "total"), "counters");
        ASSERT(tot);
        bool same = true;
        for (int i = 0; i < n && same; i++) {
            json_t *v = json_object_get(tot, usched_stat_name(i));
            if (!v || (uint64_t)json_integer_value(v) != a[i]) {
                snprintf(why, sizeof why, "%s: top %lld, program %llu", usched_stat_name(i),
                         v ? (long long)json_integer_value(v) : -1LL, (unsigned long long)a[i]);
                same = false;
            }
        }
        json_t *lat = json_object_get(json_object_get(j, "total"), "wake_latency");
        uint64_t lc = (uint64_t)json_integer_value(json_object_get(lat, "count"));
        if (same && lc != la.count) {
            snprintf(why, sizeof why, "wake_latency count: top %llu, program %llu", (unsigned long long)lc,
                     (unsigned long long)la.count);
            same = false;
        }
        if (!held || !same) {
            json_decref(j);
            continue;
        }
        /* held still and matched: the rest of the document */
        ASSERT_GT(a[stat_index("switches")], 0);
        ASSERT_GT(la.count, 0);
        ASSERT_EQ_U(json_integer_value(json_object_get(lat, "p50_ns")), la.p50_ns);
        ASSERT_EQ_U(json_integer_value(json_object_get(lat, "p99_ns")), la.p99_ns);
        ASSERT_EQ_U(json_integer_value(json_object_get(lat, "max_ns")), la.max_ns);
        ASSERT_EQ(json_integer_value(json_object_get(j, "version")), USCHED_STATS_SHM_VERSION);
        ASSERT_EQ(json_integer_value(json_object_get(j, "pid")), getpid());
        ASSERT_EQ(json_integer_value(json_object_get(j, "sched")), 0);
        ASSERT_STR_EQ(json_string_value(json_object_get(j, "policy")), "usched");
        ASSERT_EQ(json_integer_value(json_object_get(j, "ncpus")), usched_ncpus(s));
        ASSERT_EQ(json_integer_value(json_object_get(j, "live_fibers")), 0);
        json_t *cpus = json_object_get(j, "cpus");
        ASSERT_EQ(json_array_size(cpus), 8);
        uint64_t sw = (uint64_t)json_integer_value(
            json_object_get(json_object_get(json_object_get(j, "outside"), "counters"), "switches"));
        for (size_t c = 0; c < 8; c++) {
            json_t *cpu = json_array_get(cpus, c), *g = json_object_get(cpu, "groups");
            ASSERT_EQ(json_integer_value(json_object_get(cpu, "cpu")), (long)c);
            ASSERT_EQ(json_integer_value(json_object_get(g, "package")), (long)c / 4);
            ASSERT_EQ(json_integer_value(json_object_get(g, "llc")), (long)c / 4);
            ASSERT_EQ(json_integer_value(json_object_get(g, "core")), (long)c / 2);
            const char *state = json_string_value(json_object_get(cpu, "state"));
            ASSERT(state);
            /* idle now: parked, in the poller, or on its way there */
            ASSERT(!strcmp(state, "parked") || !strcmp(state, "poller") || !strcmp(state, "spinning"));
            ASSERT_EQ(json_integer_value(json_object_get(cpu, "runq")), 0);
            sw += (uint64_t)json_integer_value(json_object_get(json_object_get(cpu, "counters"), "switches"));
        }
        ASSERT_EQ_U(sw, a[stat_index("switches")]); /* per CPU + outside = total */
        json_decref(j);
        fprintf(stderr, "top_json: matched after %d looks\n", tries + 1);
        break;
    }
    free(a);
    free(b);
    ASSERT_OK(usched_destroy(s));
    ASSERT(access(path, F_OK) < 0 && errno == ENOENT); /* removed at destroy */
    expect(top(pid, "--once", NULL), 1, "has no usched statistics segment");
}

/* ---- errors ----------------------------------------------------------------------- */

/* A copy of the segment of a scheduler of this process. */
static unsigned char *real_segment(size_t *size)
{
    usched_t *s = start_sched();
    char path[128];
    int fd = -1;
    /* this process's schedulers number from 0 in start order: find ours */
    for (int i = 0; i < 64 && fd < 0; i++) fd = open(seg_path(path, sizeof path, getpid(), i), O_RDONLY);
    ASSERT(fd >= 0);
    struct stat st;
    ASSERT_OK(fstat(fd, &st));
    *size = (size_t)st.st_size;
    unsigned char *buf = malloc(*size);
    ASSERT(buf);
    /* A copy the monitor was rewriting meanwhile (seq odd, or moved) is
     * one no viewer would keep: take it again, as a viewer does (under
     * ThreadSanitizer one copy in eight caught the writer in the middle). */
    const struct usched_stats_shm_hdr *h = (const void *)buf;
    const off_t at = (off_t)offsetof(struct usched_stats_shm_hdr, seq);
    for (int tries = 0;; tries++) {
        uint64_t before, after;
        ASSERT_EQ(pread(fd, &before, sizeof before, at), (long)sizeof before);
        ASSERT_EQ(pread(fd, buf, *size, 0), (long)*size);
        ASSERT_EQ(pread(fd, &after, sizeof after, at), (long)sizeof after);
        if (!(before & 1) && before == after && h->seq == before) break;
        ASSERT_LT(tries, 100000);
        usleep(100);
    }
    close(fd);
    ASSERT_OK(usched_destroy(s));
    return buf;
}

/* Writes len bytes of data as this process's segment 0 and keeps it mapped
 * (a segment its process maps is not stale). */
static void *fake_segment(const void *data, size_t len)
{
    char name[64];
    snprintf(name, sizeof name, "%s%d.0", USCHED_STATS_SHM_PREFIX, (int)getpid());
    shm_unlink(name);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT(fd >= 0);
    ASSERT_OK(ftruncate(fd, (off_t)len));
    if (len) ASSERT_EQ(pwrite(fd, data, len, 0), (long)len);
    void *map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT(map != MAP_FAILED);
    close(fd);
    return map;
}

static void fake_done(void *map)
{
    char name[64];
    snprintf(name, sizeof name, "%s%d.0", USCHED_STATS_SHM_PREFIX, (int)getpid());
    munmap(map, 4096);
    ASSERT_OK(shm_unlink(name));
}

static void expect_fake(const void *data, size_t len, int status, const char *needle)
{
    char pid[32];
    pid_str(pid, sizeof pid, (long)getpid());
    void *map = fake_segment(data, len);
    expect(top(pid, "--once", NULL), status, needle);
    fake_done(map);
}

static void part_errors(void)
{
    char pid[32];
    pid_str(pid, sizeof pid, (long)getpid());
    expect(top(NULL), 2, "no PID given");
    expect(top("abc", NULL), 2, "PID");
    expect(top("0", NULL), 2, "PID");
    expect(top(pid, "--interval", "0", NULL), 2, "--interval '0'");
    expect(top(pid, "--count", "x", NULL), 2, "--count");
    expect(top("--clean", pid, NULL), 2, "--clean takes no PID");
    expect(top(pid, "--bogus", NULL), 2, "unknown option '--bogus'");

    /* no such process: a child that has exited and been reaped */
    pid_t child = fork();
    ASSERT(child >= 0);
    if (child == 0) _exit(0);
    ASSERT_EQ(waitpid(child, NULL, 0), child);
    char dead[32];
    pid_str(dead, sizeof dead, (long)child);
    expect(top(dead, "--once", NULL), 1, "no process");
    /* a process without a segment: this one, before any scheduler */
    expect(top(pid, "--once", NULL), 1, "has no usched statistics segment: start it with USCHED_STATS_SHM=1");

    /* a bad USCHED_STATS_SHM fails usched_start, naming it */
    usched_t *s;
    ASSERT_OK(setenv("USCHED_STATS_SHM", "yes", 1));
    ASSERT_OK(usched_create(&s));
    ASSERT_EQ(usched_start(s), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "USCHED_STATS_SHM: 'yes' is not 0 or 1");
    ASSERT_OK(usched_destroy(s));

    /* segments: a real one, then altered */
    size_t size;
    unsigned char *seg = real_segment(&size), *bad = malloc(size);
    ASSERT(bad);
    struct usched_stats_shm_hdr *h = (void *)bad;
    void *map = fake_segment(seg, size);
    struct test_run r = top(pid, "--once", NULL);
    ASSERT_EQ(r.status, 0); /* the copy itself reads (so what fails below is the alteration) */
    ASSERT_STR_CONTAINS(r.out, "cpu 7");
    test_run_free(r);
    fake_done(map);
    char msg[160];

    expect_fake(seg, 0, 1, "truncated: empty");
    expect_fake(seg, 40, 1, "truncated: 40 bytes, shorter than the");
    snprintf(msg, sizeof msg, "truncated: %zu bytes, its header says %zu", size / 2, size);
    expect_fake(seg, size / 2, 1, msg);

    memcpy(bad, seg, size);
    memcpy(h->magic, "NOTUSCHD", 8);
    expect_fake(bad, size, 1, "not a usched statistics segment");

    memcpy(bad, seg, size);
    h->version = 99;
    expect_fake(bad, size, 1, "layout version 99, this usched reads version 1");

    memcpy(bad, seg, size);
    h->cpu_size += 8;
    expect_fake(bad, size, 1, "malformed: its header's CPU record size");

    memcpy(bad, seg, size);
    h->ncpus = 1000;
    expect_fake(bad, size, 1, "malformed: its header's CPU records offset");

    memcpy(bad, seg, size);
    h->names_off = (uint32_t)size;
    expect_fake(bad, size, 1, "malformed: its header's counter names offset");

    memcpy(bad, seg, size);
    h->pid = 1;
    expect_fake(bad, size, 1, "malformed: its header names process 1");
    free(bad);
    free(seg);
}

/* ---- stale ----------------------------------------------------------------------- */

static void part_stale(void)
{
    /* a program killed before usched_destroy */
    int p[2];
    ASSERT_OK(pipe(p));
    pid_t child = fork();
    ASSERT(child >= 0);
    if (child == 0) {
        close(p[0]);
        usched_t *s = start_sched();
        (void)s;
        if (write(p[1], "r", 1) != 1) _exit(1);
        for (;;) pause();
    }
    close(p[1]);
    char c;
    ASSERT_EQ(read(p[0], &c, 1), 1); /* its scheduler started */
    close(p[0]);
    char path[128], cpid[32];
    seg_path(path, sizeof path, child, 0);
    ASSERT_OK(access(path, F_OK));
    ASSERT_OK(kill(child, SIGKILL));
    int st;
    ASSERT_EQ(waitpid(child, &st, 0), child);
    ASSERT_OK(access(path, F_OK)); /* left behind */
    pid_str(cpid, sizeof cpid, (long)child);
    struct test_run r = top(cpid, "--once", NULL);
    ASSERT_EQ(r.status, 1);
    ASSERT_STR_CONTAINS(r.err, "removed the stale segment");
    ASSERT_STR_CONTAINS(r.err, "is gone");
    test_run_free(r);
    ASSERT(access(path, F_OK) < 0 && errno == ENOENT);

    /* a new program removes the segments of dead PIDs (of its user) */
    child = fork();
    ASSERT(child >= 0);
    if (child == 0) _exit(0);
    ASSERT_EQ(waitpid(child, NULL, 0), child);
    char name[64];
    snprintf(name, sizeof name, "%s%d.3", USCHED_STATS_SHM_PREFIX, (int)child);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0400);
    ASSERT(fd >= 0);
    close(fd);
    /* and leaves those of live PIDs: a child that runs, though it maps nothing */
    pid_t other = fork();
    ASSERT(other >= 0);
    if (other == 0) {
        for (;;) pause();
    }
    char live[64];
    snprintf(live, sizeof live, "%s%d.0", USCHED_STATS_SHM_PREFIX, (int)other);
    ASSERT((fd = shm_open(live, O_RDWR | O_CREAT | O_EXCL, 0400)) >= 0);
    close(fd);
    usched_t *s = start_sched();
    ASSERT_OK(usched_destroy(s));
    ASSERT(access(seg_path(path, sizeof path, child, 3), F_OK) < 0 && errno == ENOENT);
    snprintf(path, sizeof path, "/dev/shm%s", live);
    ASSERT_OK(access(path, F_OK));
    /* usched top --clean leaves it while it is young: a program that has
     * just created its segment maps it a moment later */
    r = top("--clean", NULL);
    ASSERT_EQ(r.status, 0);
    ASSERT(!strstr(r.err, live + 1)); /* other tests' stale segments may go */
    test_run_free(r);
    ASSERT_OK(access(path, F_OK));
    /* and removes it once it is older: the child does not map it */
    struct timespec old_t[2] = {{.tv_sec = time(NULL) - 60}, {.tv_sec = time(NULL) - 60}};
    ASSERT_OK(utimensat(AT_FDCWD, path, old_t, 0));
    r = top("--clean", NULL);
    ASSERT_OK(kill(other, SIGKILL));
    ASSERT_EQ(waitpid(other, NULL, 0), other);
    ASSERT_EQ(r.status, 0);
    ASSERT_STR_CONTAINS(r.err, "does not map it");
    ASSERT_STR_CONTAINS(r.out, "stale segment");
    test_run_free(r);
    ASSERT(access(path, F_OK) < 0 && errno == ENOENT);
}

/* ---- tmux ------------------------------------------------------------------------ */

static char tmux_sock[128];
static const char *tmux_bin;

static struct test_run tmux(const char *a0, ...)
{
    const char *argv[24] = {tmux_bin, "-f", "/dev/null", "-S", tmux_sock};
    va_list ap;
    va_start(ap, a0);
    struct test_run r = run_va(argv, 5, a0, ap, true);
    va_end(ap);
    return r;
}

static char *capture(void)
{
    struct test_run r = tmux("capture-pane", "-p", "-t", "top", NULL);
    if (r.status != 0) TEST_FAIL_("tmux capture-pane: exit %d: %s", r.status, r.err);
    free(r.err);
    return r.out;
}

/* The pane once it holds every needle (state: what top has drawn). */
static char *wait_pane(const char *const *needles)
{
    double deadline = test_now() + 60;
    for (;;) {
        char *pane = capture();
        bool all = true;
        for (int i = 0; needles[i] && all; i++) all = strstr(pane, needles[i]) != NULL;
        if (all) return pane;
        if (test_now() > deadline) TEST_FAIL_("the pane never showed all of its rows:\n%s", pane);
        free(pane);
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
}

/* The line of the pane, after line `after`, that starts with prefix (its
 * index), or a failure. */
static int line_at(char **lines, int n, int after, const char *prefix, const char *pane)
{
    for (int i = after + 1; i < n; i++)
        if (!strncmp(lines[i], prefix, strlen(prefix))) return i;
    TEST_FAIL_("no line \"%s\" after line %d:\n%s", prefix, after, pane);
}

static void part_tmux(void)
{
    tmux_bin = !access("/usr/bin/tmux", X_OK) ? "/usr/bin/tmux" : !access("/bin/tmux", X_OK) ? "/bin/tmux" : NULL;
    if (!tmux_bin) {
        fprintf(stderr, "skipped: tmux is missing (scripts/deps.sh test installs it)\n");
        exit(77);
    }
    unsetenv("TMUX");
    snprintf(tmux_sock, sizeof tmux_sock, "/tmp/usched-top-tmux.%d", (int)getpid());
    ASSERT_OK(setenv("USCHED_STATS_SHM", "1", 1));
    /* --duration: a failed test leaves no server behind */
    const char *sargv[] = {cli, "serve", "echo", "--port", "0", "--topology", TOPO, "--duration", "150", NULL};
    struct test_proc srv = test_start_argv(sargv);
    char line[256];
    ASSERT(fgets(line, sizeof line, srv.out));
    ASSERT_STR_CONTAINS(line, "listening on");
    char cmd[512], header[64];
    const char *emu = getenv("USCHED_TEST_EMULATOR"); /* a cross build's qemu line (tests/run.h) */
    snprintf(cmd, sizeof cmd, "%s '%s' top %d --interval 0.2; echo top-exit=$?; sleep 600", emu ? emu : "", cli,
             (int)srv.pid);
    struct test_run r = tmux("new-session", "-d", "-s", "top", "-x", "170", "-y", "45", cmd, NULL);
    if (r.status != 0) TEST_FAIL_("tmux new-session: exit %d: %s", r.status, r.err);
    test_run_free(r);

    /* a second view (rates over the last interval), all 8 CPUs */
    snprintf(header, sizeof header, "usched top - pid %d, scheduler 0, policy usched, 8 CPUs", (int)srv.pid);
    const char *needles[] = {header, "over the last", "cpu 7", NULL};
    char *pane = wait_pane(needles);
    char *lines[64], *save;
    int n = 0;
    char *copy = strdup(pane);
    ASSERT(copy);
    for (char *l = strtok_r(copy, "\n", &save); l && n < 64; l = strtok_r(NULL, "\n", &save)) lines[n++] = l;
    int at = line_at(lines, n, -1, "usched top - pid", pane);
    at = line_at(lines, n, at, "  ", pane); /* the column titles */
    ASSERT_STR_CONTAINS(lines[at], "STATE");
    ASSERT_STR_CONTAINS(lines[at], "WAKEp99");
    for (int pkg = 0; pkg < 2; pkg++) {
        char want[64];
        snprintf(want, sizeof want, "package %d", pkg);
        at = line_at(lines, n, at, want, pane);
        ASSERT_EQ(at + 1 < n, 1);
        snprintf(want, sizeof want, "  llc %d", pkg);
        ASSERT_EQ(line_at(lines, n, at, want, pane), at + 1);
        at++;
        for (int cpu = pkg * 4; cpu < pkg * 4 + 4; cpu++) {
            /* one row per CPU, right after the last; the core named on its first CPU */
            if (cpu % 2 == 0) snprintf(want, sizeof want, "    core %d   cpu %d ", cpu / 2, cpu);
            else snprintf(want, sizeof want, "             cpu %d ", cpu);
            ASSERT_EQ(line_at(lines, n, at, want, pane), at + 1);
            at++;
            const char *row = lines[at] + strlen(want);
            while (*row == ' ') row++;
            if (strncmp(row, "running", 7) && strncmp(row, "spinning", 8) && strncmp(row, "parked", 6) &&
                strncmp(row, "poller", 6))
                TEST_FAIL_("cpu %d: no state in \"%s\"", cpu, lines[at]);
        }
    }
    free(copy);
    free(pane);

    /* the program ends: top says so and exits 0 */
    ASSERT_OK(kill(srv.pid, SIGINT));
    char *rest;
    ASSERT_EQ(test_proc_wait(srv, &rest), 0);
    free(rest);
    const char *end[] = {"removed its segment", "top-exit=0", NULL};
    free(wait_pane(end));
    test_run_free(tmux("kill-server", NULL));
    unlink(tmux_sock);
}

int main(int argc, char **argv)
{
    if (argc != 3) TEST_FAIL_("usage: test_top CLI json|errors|stale|tmux");
    cli = argv[1];
    if (!strcmp(argv[2], "json")) part_json();
    else if (!strcmp(argv[2], "errors")) part_errors();
    else if (!strcmp(argv[2], "stale")) part_stale();
    else if (!strcmp(argv[2], "tmux")) part_tmux();
    else TEST_FAIL_("unknown part '%s'", argv[2]);
    return 0;
}
