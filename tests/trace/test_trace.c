/*
 * Tracing (docs/trace.md). argv[1] the built CLI, argv[2] python3, argv[3]
 * check_trace.py, argv[4] the part:
 *   machine   a known workload traced on this machine: the file's protobuf
 *             wire format checked by check_trace.py pb (its own decoder);
 *             `usched trace` summarises it, draws an SVG with a lane per
 *             CPU and converts it to JSON, which check_trace.py json checks
 *             (spawn events = the spawns counters, runs after their
 *             wake-ups, fields, per-CPU time order, topology groups, what
 *             blocked runs waited for: a sleep at least once a parent); the
 *             wake-up latency statistic counted the wake-ups
 *   virtual   the same on the virtual 2x6x2 topology (24 CPUs), recording
 *             CLOCK_MONOTONIC (trace_clock) rather than the TSC: the file
 *             carries 2 packages, 2 LLCs, 12 cores
 *   errors    a bad trace path fails usched_start naming the path; bad
 *             schedtrace and trace_* values (trace_clock among them), usched_trace_dump,
 *             usched_set_name and usched_wakelat misuse; `usched trace` on a
 *             missing, foreign, truncated or corrupt file and bad windows
 *   bounded   trace_mb: a file trace past it drops events and says so; a
 *             flight recorder (trace_mode=ring) keeps its last trace_mb
 *             MiB, dropping none; usched_trace_dump while running; SIGUSR2
 *             (trace_signal) and a stall (trace_stall_dump) write FILE.N;
 *             a preemption on one CPU ends its slice with "preempted",
 *             counted by the summary as the scheduler counted it
 *   large     a workload traced for more than a second, read back under a
 *             memory limit (ulimit -v; not under sanitizers, whose shadow
 *             memory needs more address space): the summary's event counts
 *             equal the scheduler's own counters of the run; an SVG and a
 *             JSON conversion of a 100 ms window, which holds as many runs
 *             as the summary of that window counts
 *   schedtrace  USCHED_SCHEDTRACE prints per-CPU lines on stderr
 *   cli       --trace on usched bench (one file per run when there are
 *             several) and usched serve; a bad --trace path is an error
 *             naming it; the wake-up latency in bench --json
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tracefmt/tracefmt.h"
#include "run.h"
#include "test.h"
#include "usched.h"

#define VIRTUAL "pack:2 l3:1 l2:6 core:1 pu:2"

static const char *cli, *python, *checker;
static char dir[] = "/tmp/usched-trace-XXXXXX";

/* ---- the known workload --------------------------------------------------------- */

#define PARENTS 8 /* each blocks once on a sleep */
#define STR_(x) #x
#define STR(x) STR_(x)
#define CHILDREN 4
#define MESSAGES 50

struct parent {
    int i;
    usched_chan_t *ch;
};

static void child(void *arg)
{
    struct parent *p = arg;
    for (int m = 0; m < MESSAGES / CHILDREN; m++) {
        usched_chan_send(p->ch, (void *)(uintptr_t)(m + 1));
        if (m % 4 == 0) usched_yield();
    }
}

static void parent(void *arg)
{
    struct parent *p = arg;
    char name[32];
    snprintf(name, sizeof name, "parent-%d", p->i);
    ASSERT_OK(usched_set_name(name));
    usched_task_t *kids[CHILDREN];
    for (int k = 0; k < CHILDREN; k++) ASSERT_OK(usched_spawn(usched_self(), &kids[k], child, p));
    void *msg;
    for (int m = 0; m < (MESSAGES / CHILDREN) * CHILDREN; m++) ASSERT_OK(usched_chan_recv(p->ch, &msg));
    usched_sleep_ns(100 * 1000);
    for (int k = 0; k < CHILDREN; k++) ASSERT_OK(usched_join(kids[k]));
}

/* Runs the workload with a trace into path; returns the spawns counted. */
static uint64_t traced_run(const char *topology, const char *path, int *ncpus)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    if (topology) ASSERT_OK(usched_set(s, "topology", topology));
    /* The virtual topology's run records CLOCK_MONOTONIC, this machine's
     * the TSC where it is usable: both files pass the same checks. */
    if (topology) ASSERT_OK(usched_set(s, "trace_clock", "monotonic"));
    ASSERT_OK(usched_set(s, "trace", path));
    ASSERT_OK(usched_start(s));
    ASSERT_EQ(usched_set(s, "trace", "/tmp/other.json"), -EBUSY);
    *ncpus = usched_ncpus(s);
    struct parent ps[PARENTS];
    for (int i = 0; i < PARENTS; i++) {
        ps[i].i = i;
        ASSERT_OK(usched_chan_create(&ps[i].ch, 0));
        ASSERT_OK(usched_spawn(s, NULL, parent, &ps[i]));
    }
    ASSERT_OK(usched_wait(s));
    uint64_t in = 0, out = 0;
    ASSERT_OK(usched_stat(s, "spawns", &in));
    ASSERT_OK(usched_stat(s, "spawns_outside", &out));
    ASSERT_EQ_U(in + out, PARENTS * (CHILDREN + 1));
    /* Every message over a rendezvous channel woke someone. */
    struct usched_wakelat l;
    ASSERT_OK(usched_wakelat(s, -1, &l));
    ASSERT_GT(l.count, 0);
    ASSERT(l.p50_ns <= l.p90_ns && l.p90_ns <= l.p99_ns && l.p99_ns <= l.max_ns);
    uint64_t per_cpu = 0;
    for (int c = 0; c < *ncpus; c++) {
        struct usched_wakelat lc;
        ASSERT_OK(usched_wakelat(s, c, &lc));
        per_cpu += lc.count;
    }
    ASSERT_EQ_U(per_cpu, l.count);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ASSERT_OK(usched_stats_print(s, m));
    fclose(m);
    ASSERT_STR_CONTAINS(buf, "wake_latency ");
    ASSERT_STR_CONTAINS(buf, "wake_latency cpu 0 ");
    free(buf);
    ASSERT_OK(usched_destroy(s)); /* writes the trace */
    for (int i = 0; i < PARENTS; i++) ASSERT_OK(usched_chan_destroy(ps[i].ch));
    return in + out;
}

static void expect_ok(struct test_run r, const char *what)
{
    if (r.status != 0) TEST_FAIL_("%s: exit %d\nstdout:\n%s\nstderr:\n%s", what, r.status, r.out, r.err);
    fputs(r.out, stdout);
}

static void expect_all(const char *out, const char *const *needles)
{
    for (; *needles; needles++) ASSERT_STR_CONTAINS(out, *needles);
}

static void test_traced(const char *topology, const char *groups)
{
    char path[256], svg[256], jpath[256], nc[16], sp[32];
    snprintf(path, sizeof path, "%s/run.pftrace", dir);
    snprintf(svg, sizeof svg, "%s/run.svg", dir);
    snprintf(jpath, sizeof jpath, "%s/run.json", dir);
    int ncpus = 0;
    uint64_t spawns = traced_run(topology, path, &ncpus);
    snprintf(nc, sizeof nc, "%d", ncpus);
    snprintf(sp, sizeof sp, "%llu", (unsigned long long)spawns);

    const char *pb[] = {python, checker, "pb", path, "--ncpus", nc, NULL};
    struct test_run r = test_run_host_argv(pb, NULL);
    expect_ok(r, "check_trace.py pb");
    test_run_free(r);

    const char *sum[] = {cli, "trace", path, "--svg", svg, "--json", jpath, "--top", "1000", NULL};
    r = test_run_argv(sum, NULL);
    expect_ok(r, "usched trace --svg --json");
    expect_all(r.out, (const char *const[]){"busy", "wake-up latency", "migrations", "longest runs:",
                                            "fibers that waited longest", "(parent-", NULL});
    /* every parent blocked once in a sleep */
    const char *bl = strstr(r.out, "blocked on ");
    ASSERT(bl);
    const char *sl = strstr(bl, " sleep ");
    ASSERT(sl && sl < strchr(bl, '\n'));
    ASSERT_GE(atol(sl + 7), PARENTS);
    test_run_free(r);

    const char *json[] = {python, checker, "json", jpath, "--spawns", sp, "--ncpus", nc,
                          "--name", "parent-0", "--min-on", "sleep=" STR(PARENTS),
                          groups ? "--groups" : NULL, groups, NULL};
    r = test_run_host_argv(json, NULL);
    expect_ok(r, "check_trace.py json");
    test_run_free(r);

    const char *xml[] = {python, checker, "svg", svg, "--ncpus", nc, NULL};
    r = test_run_host_argv(xml, NULL);
    expect_ok(r, "check_trace.py svg");
    test_run_free(r);
    unlink(path);
    unlink(svg);
    unlink(jpath);
}

/* ---- errors ---------------------------------------------------------------------- */

static void expect_cli_error(const char *file, const char *msg)
{
    const char *argv[] = {cli, "trace", file, NULL};
    struct test_run r = test_run_argv(argv, NULL);
    if (r.status != 1) TEST_FAIL_("usched trace %s: exit %d, expected 1\n%s", file, r.status, r.err);
    ASSERT_STR_CONTAINS(r.err, file);
    ASSERT_STR_CONTAINS(r.err, msg);
    ASSERT_STR_EQ(r.out, "");
    test_run_free(r);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fputs(text, f);
    fclose(f);
}

static void write_bytes(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ASSERT(f);
    ASSERT_EQ_U(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* A header packet: the "usched" event of ncpus CPUs with that cpus list. */
static uint8_t *header(uint8_t *p, int ncpus, const char *cpus)
{
    uint8_t *pk = tf_open(p, TF_TRACE_PACKET);
    uint8_t *q = tf_uint(tf_uint(pk, TF_P_TIMESTAMP, 1), TF_P_SEQ, TF_SEQ_HEADER);
    uint8_t *te = tf_open(q, TF_P_TRACK_EVENT);
    q = tf_bytes(tf_uint(te, TF_E_TYPE, TF_T_INSTANT), TF_E_NAME, TF_META_EVENT, strlen(TF_META_EVENT));
    uint8_t *a = tf_open(q, TF_E_ANNOT);
    q = tf_close(a, tf_uint(tf_bytes(a, TF_A_NAME, "ncpus", 5), TF_A_UINT, (uint64_t)ncpus));
    a = tf_open(q, TF_E_ANNOT);
    q = tf_close(a, tf_bytes(tf_bytes(a, TF_A_NAME, TF_META_CPUS, strlen(TF_META_CPUS)), TF_A_STRING, cpus,
                             strlen(cpus)));
    return tf_close(pk, tf_close(te, q));
}

/* A chunk's first packet on sequence seq, at time 1000. */
static uint8_t *chunk_start(uint8_t *p, unsigned seq)
{
    uint8_t *pk = tf_open(p, TF_TRACE_PACKET);
    uint8_t *q = tf_uint(tf_uint(pk, TF_P_TIMESTAMP, 1000), TF_P_CLOCK_ID, TF_CLOCK_MONOTONIC);
    q = tf_uint(tf_uint(q, TF_P_SEQ, seq), TF_P_SEQ_FLAGS, TF_SEQ_CLEARED);
    uint8_t *cs = tf_open(q, TF_P_CLOCK_SNAPSHOT);
    uint8_t *ck = tf_open(cs, TF_CS_CLOCK);
    q = tf_close(ck, tf_uint(tf_uint(tf_uint(ck, TF_CK_ID, TF_CLOCK_INCR), TF_CK_TS, 1000), TF_CK_INCR, 1));
    return tf_close(pk, tf_close(cs, q));
}

static void test_errors(void)
{
    usched_t *s;
    /* A directory that does not exist: start fails, naming the path. */
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:2 pu:1"));
    ASSERT_OK(usched_set(s, "trace", "/nonexistent-dir/x/trace.json"));
    ASSERT_EQ(usched_start(s), -ENOENT);
    ASSERT_STR_CONTAINS(usched_last_error(), "/nonexistent-dir/x/trace.json");
    /* A directory itself. */
    ASSERT_OK(usched_set(s, "trace", dir));
    ASSERT_EQ(usched_start(s), -EISDIR);
    ASSERT_STR_CONTAINS(usched_last_error(), dir);
    /* Trace off again: the same scheduler starts. */
    ASSERT_OK(usched_set(s, "trace", ""));
    ASSERT_EQ(usched_set(s, "schedtrace", "-5"), -EINVAL);
    ASSERT_EQ(usched_set(s, "schedtrace", "10ms"), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "10ms");
    ASSERT_EQ(usched_set(s, "schedtrace", NULL), -EINVAL);
    ASSERT_OK(usched_set(s, "schedtrace", "0"));
    ASSERT_EQ(usched_wakelat(s, -1, &(struct usched_wakelat){0}), -ESRCH);
    ASSERT_OK(usched_start(s));
    ASSERT_EQ(usched_set(s, "schedtrace", "10"), -EBUSY);
    struct usched_wakelat l;
    ASSERT_EQ(usched_wakelat(s, 2, &l), -EINVAL);
    ASSERT_EQ(usched_wakelat(s, -2, &l), -EINVAL);
    ASSERT_EQ(usched_wakelat(s, 0, NULL), -EINVAL);
    ASSERT_OK(usched_wakelat(s, 1, &l));
    ASSERT_OK(usched_destroy(s));

    /* usched_set_name: outside a fiber, and bad names. */
    ASSERT_EQ(usched_set_name("main"), -EPERM);
    ASSERT_EQ(usched_set_name(NULL), -EINVAL);
    ASSERT_EQ(usched_set_name(""), -EINVAL);
    ASSERT_EQ(usched_set_name("a\"b"), -EINVAL);
    char longname[USCHED_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    ASSERT_EQ(usched_set_name(longname), -EINVAL);

    /* The environment: a bad USCHED_SCHEDTRACE fails usched_create. */
    setenv("USCHED_SCHEDTRACE", "often", 1);
    ASSERT_EQ(usched_create(&s), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "USCHED_SCHEDTRACE");
    unsetenv("USCHED_SCHEDTRACE");

    /* The trace_* settings. */
    ASSERT_OK(usched_create(&s));
    const char *bad[][2] = {{"trace_mb", "0"},    {"trace_mb", "12x"},  {"trace_mb", "70000"},
                            {"trace_mb", NULL},   {"trace_mode", "log"}, {"trace_mode", NULL},
                            {"trace_signal", "2"}, {"trace_stall_dump", "yes"}, {"trace_clock", "tsc"},
                            {"trace_clock", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_EQ(usched_set(s, bad[i][0], bad[i][1]), -EINVAL);
        ASSERT_STR_CONTAINS(usched_last_error(), bad[i][0]);
    }
    ASSERT_OK(usched_set(s, "trace_mb", "4"));
    ASSERT_OK(usched_set(s, "trace_mode", "ring"));
    ASSERT_OK(usched_set(s, "trace_clock", "auto"));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:2 pu:1"));
    /* usched_trace_dump: not started, then not tracing. */
    ASSERT_EQ(usched_trace_dump(s, "/tmp/x"), -ESRCH);
    ASSERT_EQ(usched_trace_dump(NULL, "/tmp/x"), -EINVAL);
    ASSERT_OK(usched_start(s));
    ASSERT_EQ(usched_set(s, "trace_mb", "8"), -EBUSY);
    ASSERT_EQ(usched_set(s, "trace_clock", "monotonic"), -EBUSY);
    ASSERT_EQ(usched_trace_dump(s, ""), -EINVAL);
    ASSERT_EQ(usched_trace_dump(s, "/tmp/x"), -ENODATA);
    ASSERT_OK(usched_destroy(s));
    char path[256];
    snprintf(path, sizeof path, "%s/t.pftrace", dir);
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:2 pu:1"));
    ASSERT_OK(usched_set(s, "trace", path));
    ASSERT_OK(usched_start(s));
    ASSERT_EQ(usched_trace_dump(s, "/nonexistent-dir/d.pftrace"), -ENOENT);
    ASSERT_STR_CONTAINS(usched_last_error(), "/nonexistent-dir/d.pftrace");
    ASSERT_OK(usched_destroy(s));
    setenv("USCHED_TRACE_MODE", "sometimes", 1);
    ASSERT_EQ(usched_create(&s), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "USCHED_TRACE_MODE");
    unsetenv("USCHED_TRACE_MODE");

    /* usched trace on bad input: each names the file and what is wrong. */
    snprintf(path, sizeof path, "%s/missing.pftrace", dir);
    expect_cli_error(path, "cannot open");
    snprintf(path, sizeof path, "%s/text.pftrace", dir);
    write_file(path, "this is not a trace\n");
    expect_cli_error(path, "not a Perfetto protobuf trace");
    /* A protobuf trace, not usched's: a packet without the header. */
    uint8_t buf[512], *p = buf, *te;
    uint8_t *pk = tf_open(p, TF_TRACE_PACKET);
    p = tf_close(pk, tf_uint(pk, TF_P_SEQ, 1));
    write_bytes(path, buf, (size_t)(p - buf));
    expect_cli_error(path, "not a usched trace");
    /* Truncated: a packet longer than what follows. */
    write_bytes(path, (const uint8_t[]){0x0a, 0x10, 0x50, 0x01}, 4);
    expect_cli_error(path, "truncated");
    /* A header for one CPU, then a chunk of sequence 9. */
    p = header(buf, 1, "0,0,0,0,0;");
    pk = tf_open(p, TF_TRACE_PACKET);
    p = tf_close(pk, tf_uint(tf_uint(pk, TF_P_SEQ, 9), TF_P_SEQ_FLAGS, TF_SEQ_CLEARED));
    write_bytes(path, buf, (size_t)(p - buf));
    expect_cli_error(path, "sequence 9");
    /* A header whose CPU list is shorter than ncpus. */
    p = header(buf, 2, "0,0,0,0,0;");
    write_bytes(path, buf, (size_t)(p - buf));
    expect_cli_error(path, "ncpus 2");
    /* A fiber's name with a quote (usched_set_name refuses one; the JSON
     * conversion writes names as they are). */
    p = chunk_start(header(buf, 1, "0,0,0,0,0;"), 1);
    pk = tf_open(p, TF_TRACE_PACKET);
    te = tf_open(tf_uint(tf_uint(pk, TF_P_TIMESTAMP, 10), TF_P_SEQ, 1), TF_P_TRACK_EVENT);
    p = tf_close(pk, tf_close(te, tf_uint(tf_uint(te, TF_E_TYPE, TF_T_BEGIN), TF_E_NAME_IID, TF_FIBER_IID + 3)));
    pk = tf_open(p, TF_TRACE_PACKET);
    te = tf_open(tf_uint(tf_uint(pk, TF_P_TIMESTAMP, 10), TF_P_SEQ, 1), TF_P_TRACK_EVENT);
    uint8_t *nq = tf_uint(tf_uint(te, TF_E_TYPE, TF_T_INSTANT), TF_E_NAME_IID, TF_N_name + 1);
    uint8_t *na = tf_open(nq, TF_E_ANNOT);
    nq = tf_close(na, tf_bytes(tf_uint(na, TF_A_NAME_IID, TF_A_name + 1), TF_A_STRING, "a\"b", 3));
    p = tf_close(pk, tf_close(te, nq));
    write_bytes(path, buf, (size_t)(p - buf));
    expect_cli_error(path, "fiber 3's name has a control character, quote or backslash");
    /* A wake-up without its fiber. */
    p = chunk_start(header(buf, 1, "0,0,0,0,0;"), 1);
    pk = tf_open(p, TF_TRACE_PACKET);
    te = tf_open(tf_uint(tf_uint(pk, TF_P_TIMESTAMP, 10), TF_P_SEQ, 1), TF_P_TRACK_EVENT);
    p = tf_close(pk, tf_close(te, tf_uint(tf_uint(te, TF_E_TYPE, TF_T_INSTANT), TF_E_NAME_IID, TF_N_wake + 1)));
    write_bytes(path, buf, (size_t)(p - buf));
    expect_cli_error(path, "a wake event without a fiber");
    /* A wake-up naming CPU 7 of a 1-CPU trace. */
    p = header(buf, 1, "0,0,0,0,0;");
    p = chunk_start(p, 1);
    pk = tf_open(p, TF_TRACE_PACKET);
    uint8_t *q = tf_uint(tf_uint(pk, TF_P_TIMESTAMP, 10), TF_P_SEQ, 1);
    te = tf_open(q, TF_P_TRACK_EVENT);
    q = tf_uint(tf_uint(te, TF_E_TYPE, TF_T_INSTANT), TF_E_NAME_IID, TF_N_wake + 1);
    uint8_t *an = tf_open(q, TF_E_ANNOT);
    q = tf_close(an, tf_uint(tf_uint(an, TF_A_NAME_IID, TF_A_fiber + 1), TF_A_UINT, 5));
    an = tf_open(q, TF_E_ANNOT);
    q = tf_close(an, tf_uint(tf_uint(an, TF_A_NAME_IID, TF_A_cpu + 1), TF_A_UINT, 7));
    p = tf_close(pk, tf_close(te, q));
    write_bytes(path, buf, (size_t)(p - buf));
    expect_cli_error(path, "CPU 7");
    /* The same file with CPU 0 reads; --to before --from is a usage error. */
    buf[p - buf - 1] = 0;
    write_bytes(path, buf, (size_t)(p - buf));
    const char *okv[] = {cli, "trace", path, NULL};
    struct test_run r = test_run_argv(okv, NULL);
    expect_ok(r, "a one-event trace");
    ASSERT_STR_CONTAINS(r.out, "wake 1 ");
    test_run_free(r);
    const char *win[] = {cli, "trace", path, "--from", "5", "--to", "1", NULL};
    r = test_run_argv(win, NULL);
    ASSERT_EQ(r.status, 1);
    ASSERT_STR_CONTAINS(r.err, "--to");
    test_run_free(r);
    const char *badms[] = {cli, "trace", path, "--from", "soon", NULL};
    r = test_run_argv(badms, NULL);
    ASSERT_EQ(r.status, 2);
    ASSERT_STR_CONTAINS(r.err, "soon");
    test_run_free(r);
    unlink(path);
    const char *usage[] = {cli, "trace", NULL};
    r = test_run_argv(usage, NULL);
    ASSERT_EQ(r.status, 2);
    test_run_free(r);
}

/* ---- bounded traces ---------------------------------------------------------------------- */

struct pp {
    usched_chan_t *a, *b;
    long n;               /* messages each way; 0: until stop */
    long pace_ns;         /* the pinger's own work between round trips (0: none) */
    _Atomic long done;    /* round trips so far */
    _Atomic int stop;
    const char *name;
};

static void pp_echo(void *arg)
{
    struct pp *p = arg;
    void *m;
    while (usched_chan_recv(p->a, &m) == 0 && m) ASSERT_OK(usched_chan_send(p->b, m));
}

/* Ping-pongs with pp_echo, n round trips or until stop; then ends it. */
static void pp_ping(void *arg)
{
    struct pp *p = arg;
    if (p->name) ASSERT_OK(usched_set_name(p->name));
    void *m;
    for (long i = 0; p->n ? i < p->n : !atomic_load(&p->stop); i++) {
        ASSERT_OK(usched_chan_send(p->a, (void *)1));
        ASSERT_OK(usched_chan_recv(p->b, &m));
        atomic_store(&p->done, i + 1);
        if (p->pace_ns) {
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            do
                clock_gettime(CLOCK_MONOTONIC, &b);
            while ((b.tv_sec - a.tv_sec) * 1000000000l + (b.tv_nsec - a.tv_nsec) < p->pace_ns);
        }
    }
    ASSERT_OK(usched_chan_send(p->a, NULL));
}

static void pp_start(usched_t *s, struct pp *p)
{
    ASSERT_OK(usched_chan_create(&p->a, 0));
    ASSERT_OK(usched_chan_create(&p->b, 0));
    ASSERT_OK(usched_spawn(s, NULL, pp_echo, p));
    ASSERT_OK(usched_spawn(s, NULL, pp_ping, p));
}

static void pp_end(struct pp *p)
{
    ASSERT_OK(usched_chan_destroy(p->a));
    ASSERT_OK(usched_chan_destroy(p->b));
}

static void named_nap(void *arg)
{
    ASSERT_OK(usched_set_name(arg));
    usched_sleep_ns(200 * 1000);
}

/* Holds its CPU (no scheduling point) until the monitor counted a stall;
 * fails after 60 s. */
static void hold_cpu(void *arg)
{
    usched_t *s = arg;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t stalls = 0;
    do {
        ASSERT_OK(usched_stat(s, "stalls", &stalls));
        clock_gettime(CLOCK_MONOTONIC, &now);
        ASSERT(now.tv_sec - t0.tv_sec < 60);
    } while (stalls == 0);
}

static struct test_run summarise(const char *path, const char *what)
{
    const char *argv[] = {cli, "trace", path, "--top", "1000", NULL};
    struct test_run r = test_run_argv(argv, NULL);
    if (r.status != 0) TEST_FAIL_("usched trace %s (%s): exit %d\n%s", path, what, r.status, r.err);
    return r;
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) TEST_FAIL_("%s: not written", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* A scheduler on two CPUs tracing to path with these settings. */
static usched_t *traced(const char *path, const char *const *kv)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:2 pu:1"));
    ASSERT_OK(usched_set(s, "trace", path));
    for (; kv && *kv; kv += 2) ASSERT_OK(usched_set(s, kv[0], kv[1]));
    ASSERT_OK(usched_start(s));
    return s;
}

/* The number after `key` in text (which must hold it). */
static unsigned long long after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    if (!p) TEST_FAIL_("'%s' not in:\n%s", key, text);
    return strtoull(p + strlen(key), NULL, 10);
}

/* One CPU: a spinner and a fiber that waits, yielding, until the spinner
 * has started, then stops it: it can run only once the spinner is
 * preempted. */
struct spin {
    _Atomic int started, stop;
};

static void spinner(void *arg)
{
    struct spin *sp = arg;
    atomic_store(&sp->started, 1);
    while (!atomic_load_explicit(&sp->stop, memory_order_relaxed)) __asm__ volatile("");
}

static void spin_stopper(void *arg)
{
    struct spin *sp = arg;
    while (!atomic_load(&sp->started)) usched_yield();
    atomic_store(&sp->stop, 1);
}

#define LIMIT (1l << 20) /* trace_mb=1 */
#define SLACK (8l << 10)  /* the header */

static void test_bounded(void)
{
    char path[256], mid[256], one[256];
    snprintf(path, sizeof path, "%s/b.pftrace", dir);
    snprintf(mid, sizeof mid, "%s/mid.pftrace", dir);
    snprintf(one, sizeof one, "%s/b.pftrace.1", dir);

    /* A file trace past trace_mb: events dropped, counted, said. 100,000
     * round trips make about 300,000 events, 7 MB. */
    usched_t *s = traced(path, (const char *const[]){"trace_mb", "1", NULL});
    struct pp p = {.n = 100000};
    pp_start(s, &p);
    ASSERT_OK(usched_wait(s));
    ASSERT_OK(usched_destroy(s));
    pp_end(&p);
    ASSERT_LE(file_size(path), LIMIT + SLACK);
    struct test_run r = summarise(path, "file past trace_mb");
    ASSERT_STR_CONTAINS(r.out, "events were dropped");
    test_run_free(r);

    /* A flight recorder: the last trace_mb, nothing counted as dropped; the
     * fiber named at the start is gone, the one named at the end is there.
     * On one CPU: each CPU keeps its own last events, and a CPU left idle
     * after the start would keep the name. A dump while it runs reads too. */
    s = traced(path, (const char *const[]){"trace_mb", "1", "trace_mode", "ring", "topology", "pack:1 core:1 pu:1",
                                           NULL});
    p = (struct pp){.n = 100000, .name = "first-phase"};
    pp_start(s, &p);
    while (atomic_load(&p.done) < 20000) sched_yield();
    ASSERT_OK(usched_trace_dump(s, mid));
    ASSERT_OK(usched_wait(s));
    ASSERT_OK(usched_spawn(s, NULL, named_nap, "last-phase"));
    ASSERT_OK(usched_wait(s));
    ASSERT_OK(usched_destroy(s));
    pp_end(&p);
    ASSERT_LE(file_size(path), LIMIT + SLACK);
    ASSERT_LE(file_size(mid), LIMIT + SLACK);
    r = summarise(path, "flight recorder");
    ASSERT(!strstr(r.out, "dropped"));
    ASSERT_STR_CONTAINS(r.out, "(last-phase)");
    ASSERT(!strstr(r.out, "(first-phase)"));
    test_run_free(r);
    r = summarise(mid, "dump while running");
    ASSERT_STR_CONTAINS(r.out, "wake-up latency");
    test_run_free(r);

    /* SIGUSR2, allowed: FILE.1 (the request is served before the scheduler
     * stops). */
    s = traced(path, (const char *const[]){"trace_signal", "1", NULL});
    p = (struct pp){.n = 1000};
    pp_start(s, &p);
    ASSERT_OK(usched_wait(s));
    ASSERT_OK(raise(SIGUSR2));
    ASSERT_OK(usched_destroy(s));
    pp_end(&p);
    r = summarise(one, "SIGUSR2 dump");
    ASSERT_STR_CONTAINS(r.out, "wake-up latency");
    test_run_free(r);
    ASSERT_OK(unlink(one));

    /* A stall, with trace_stall_dump: a fiber holds its CPU until the
     * monitor has counted a stall; FILE.1 holds the stall event (or more:
     * the monitor may look again before the dump is written, as under
     * ThreadSanitizer, where FILE.1 once held two). */
    s = traced(path, (const char *const[]){"trace_stall_dump", "1", "knobs", "stall_us=2000", NULL});
    ASSERT_OK(usched_spawn(s, NULL, hold_cpu, s));
    ASSERT_OK(usched_wait(s));
    ASSERT_OK(usched_destroy(s));
    r = summarise(one, "stall dump");
    ASSERT_GE(after(r.out, " stall "), 1);
    test_run_free(r);
    unlink(one);
    unlink(mid);
    unlink(path);

    /* A preemption: the preempted slice's end says so, and the summary
     * counts it. One CPU, so the fiber that asked for it cannot be taken
     * elsewhere meanwhile: every preemption the scheduler counted
     * switched to it. */
    s = traced(path, (const char *const[]){"topology", "pack:1 core:1 pu:1", "knobs", "preempt_us=1000", NULL});
    struct spin sp = {0};
    ASSERT_OK(usched_spawn(s, NULL, spinner, &sp));
    ASSERT_OK(usched_spawn(s, NULL, spin_stopper, &sp));
    ASSERT_OK(usched_wait(s));
    uint64_t preempts = 0;
    ASSERT_OK(usched_stat(s, "preempts", &preempts));
    ASSERT_OK(usched_destroy(s));
    ASSERT_GE(preempts, 1);
    r = summarise(path, "preemption");
    ASSERT_EQ_U(after(r.out, "\npreempted "), preempts);
    test_run_free(r);
    unlink(path);
}

/* ---- a trace of real size ------------------------------------------------------------------ */

#define PAIRS 4

static void spawner(void *arg)
{
    struct pp *p = arg;
    while (!atomic_load(&p->stop)) {
        usched_task_t *t;
        ASSERT_OK(usched_spawn(usched_self(), &t, named_nap, "child"));
        ASSERT_OK(usched_join(t));
    }
}

static void test_large(void)
{
    char path[256], svg[256], json[256];
    snprintf(path, sizeof path, "%s/large.pftrace", dir);
    snprintf(svg, sizeof svg, "%s/large.svg", dir);
    snprintf(json, sizeof json, "%s/large.json", dir);
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "trace", path));
    ASSERT_OK(usched_set(s, "trace_mb", "2048"));
    ASSERT_OK(usched_start(s));
    /* Each pinger computes 250 ns a round trip: unpaced, a release build
     * on a fast host filled the 2 GiB in the 1.2 s (over 110 million
     * events a second) and dropped the rest, and a trace that drops events
     * cannot be checked against the counters. Paced, two CPUs make at most
     * 8 million round trips a second, 48 million events (0.9 GiB in the
     * 1.2 s); on the development VM the file is 0.5 GB, still more than
     * twice the reader's memory limit. */
    struct pp p[PAIRS] = {{0}};
    for (int i = 0; i < PAIRS; i++) {
        p[i].pace_ns = 250;
        pp_start(s, &p[i]);
    }
    ASSERT_OK(usched_spawn(s, NULL, spawner, &p[0]));
    /* At least a second of tracing: stop the workload after 1.2 s. */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        struct timespec d = {0, 20 * 1000 * 1000};
        nanosleep(&d, NULL); /* the workload's length, not a synchronisation */
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - t0.tv_sec) * 1000000000l + (now.tv_nsec - t0.tv_nsec) < 1200000000l);
    for (int i = 0; i < PAIRS; i++) atomic_store(&p[i].stop, 1);
    ASSERT_OK(usched_wait(s));
    static const char *const keys[] = {"spawns", "spawns_outside", "switches", "stalls", "migrate_smt",
                                       "migrate_l2", "migrate_llc", "migrate_package", "migrate_numa",
                                       "migrate_machine"};
    uint64_t v[10];
    for (int i = 0; i < 10; i++) ASSERT_OK(usched_stat(s, keys[i], &v[i]));
    char nc[16];
    snprintf(nc, sizeof nc, "%d", usched_ncpus(s));
    ASSERT_OK(usched_destroy(s));
    for (int i = 0; i < PAIRS; i++) pp_end(&p[i]);
    long size = file_size(path);
    printf("large: %ld bytes, %llu switches\n", size, (unsigned long long)v[2]);

    /* Read back under a memory limit: 200 MiB of address space. */
    char cmd[1024];
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    const char *limit = ""; /* the sanitizers' shadow memory needs terabytes of address space */
#else
    const char *limit = "ulimit -v 204800 && ";
#endif
    /* A cross build runs the CLI under its emulator (tests/run.h), whose own
     * address-space reservations exceed any such limit: the bound is
     * checked by the native builds. */
    const char *emu = getenv("USCHED_TEST_EMULATOR");
    if (emu && *emu)
        limit = "";
    else
        emu = "";
    snprintf(cmd, sizeof cmd, "%sexec %s '%s' trace '%s' --svg '%s'", limit, emu, cli, path, svg);
    const char *sum[] = {"/bin/sh", "-c", cmd, NULL};
    struct test_run r = test_run_host_argv(sum, NULL);
    expect_ok(r, "usched trace of a large trace under ulimit -v");
    ASSERT(!strstr(r.out, "dropped"));
    ASSERT_EQ_U(after(r.out, " spawn "), v[0] + v[1]);
    ASSERT_EQ_U(after(r.out, " run "), v[2]);
    ASSERT_EQ_U(after(r.out, " stall "), v[3]);
    const char *mig = strstr(r.out, "\nmigrations");
    ASSERT(mig);
    char *end = (char *)mig + strlen("\nmigrations");
    for (int l = 0; l < 6; l++) ASSERT_EQ_U(strtoull(end, &end, 10), v[4 + l]);
    test_run_free(r);
    const char *xml[] = {python, checker, "svg", svg, "--ncpus", nc, NULL};
    r = test_run_host_argv(xml, NULL);
    expect_ok(r, "check_trace.py svg");
    test_run_free(r);

    /* A 100 ms window: SVG and JSON; the JSON holds the window's runs. */
    snprintf(cmd, sizeof cmd, "%sexec %s '%s' trace '%s' --from 500 --to 600 --svg '%s' --json '%s'", limit, emu,
             cli, path, svg, json);
    r = test_run_host_argv(sum, NULL);
    expect_ok(r, "usched trace --from --to --json");
    char runs[32];
    snprintf(runs, sizeof runs, "%llu", after(r.out, " run "));
    test_run_free(r);
    const char *count[] = {python, checker, "count", json, "--runs", runs, NULL};
    r = test_run_host_argv(count, NULL);
    expect_ok(r, "check_trace.py count");
    test_run_free(r);
    unlink(path);
    unlink(svg);
    unlink(json);
}

/* ---- the periodic summary ----------------------------------------------------------- */

/* Lines of the periodic summary in file f; *idle_at: the number of the
 * first line where every CPU is parked (0: none). */
static int schedtrace_lines(const char *f, int *idle_at)
{
    FILE *fp = fopen(f, "r");
    ASSERT(fp != NULL);
    char line[512];
    int n = 0;
    *idle_at = 0;
    while (fgets(line, sizeof line, fp)) {
        if (!strstr(line, "usched: schedtrace ")) continue;
        n++;
        if (!*idle_at && strstr(line, "cpu0 parked") && strstr(line, "cpu1 parked")) *idle_at = n;
    }
    fclose(fp);
    return n;
}

/* The monitor prints the summary while every worker is parked: it must
 * keep waking for the lines instead of sleeping until work comes. A child
 * process (its stderr in a file) starts a scheduler of two CPUs with no
 * fiber and waits, however long the machine takes, for a line showing both
 * CPUs parked and then for two more lines. */
static void test_schedtrace_idle(void)
{
    char path[sizeof dir + 32];
    snprintf(path, sizeof path, "%s/schedtrace-idle", dir);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 2) < 0) _exit(3);
        usched_t *s = NULL;
        if (usched_create(&s) < 0 || usched_set(s, "topology", "pack:1 l3:1 core:2 pu:1") < 0 ||
            usched_set(s, "schedtrace", "10") < 0 || usched_start(s) < 0)
            _exit(4);
        int idle_at = 0, n = 0;
        for (int i = 0; i < 30000 && !(idle_at && n >= idle_at + 2); i++) {
            usleep(1000);
            n = schedtrace_lines(path, &idle_at);
        }
        _exit(usched_destroy(s) == 0 && idle_at && n >= idle_at + 2 ? 0 : 5);
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    int idle_at = 0, n = schedtrace_lines(path, &idle_at);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL_("an idle scheduler's periodic summary: child status 0x%x, %d lines, "
                   "the first with both CPUs parked: %d", st, n, idle_at);
    printf("schedtrace idle: %d lines, both CPUs parked from line %d\n", n, idle_at);
    unlink(path);
}

static void test_schedtrace(void)
{
    /* select runs for its duration (0.3 s): several 20 ms periods. */
    const char *argv[] = {cli, "bench", "select", "-p", "usched", "-r", "1", "-d", "0.3", NULL};
    char *env[] = {"USCHED_SCHEDTRACE=20", NULL};
    struct test_run r = test_run_argv(argv, env);
    if (r.status != 0) TEST_FAIL_("bench with USCHED_SCHEDTRACE: exit %d\n%s", r.status, r.err);
    expect_all(r.err, (const char *const[]){"usched: schedtrace ", " | cpu0 ", " sw=", " q=", NULL});
    ASSERT_STR_CONTAINS(r.out, "wake p50");
    test_run_free(r);
    test_schedtrace_idle();
}

/* ---- --trace on the CLI ------------------------------------------------------------- */

static void expect_trace_file(const char *path)
{
    const char *argv[] = {cli, "trace", path, NULL};
    struct test_run r = test_run_argv(argv, NULL);
    expect_ok(r, path);
    ASSERT_STR_CONTAINS(r.out, "wake-up latency");
    test_run_free(r);
    ASSERT_OK(unlink(path));
}

static void test_cli(void)
{
    char path[256], p11[256], p12[256];
    snprintf(path, sizeof path, "%s/b.json", dir);
    snprintf(p11, sizeof p11, "%s/b-1-1.json", dir);
    snprintf(p12, sizeof p12, "%s/b-1-2.json", dir);
    const char *one[] = {cli, "bench", "pingpong", "-p", "usched", "-r", "1", "-n", "500", "--trace", path, NULL};
    struct test_run r = test_run_argv(one, NULL);
    expect_ok(r, "bench --trace, one run");
    test_run_free(r);
    expect_trace_file(path);
    const char *two[] = {cli, "bench", "pingpong", "-p", "usched", "-r", "2", "-n", "500", "--trace", path, NULL};
    r = test_run_argv(two, NULL);
    expect_ok(r, "bench --trace, two runs");
    test_run_free(r);
    ASSERT(access(path, F_OK) != 0);
    expect_trace_file(p11);
    expect_trace_file(p12);

    /* Wake-up latency in --json, per run. */
    const char *json[] = {cli, "bench", "pingpong", "-p", "usched", "-r", "1", "-n", "500", "--json", NULL};
    r = test_run_argv(json, NULL);
    expect_ok(r, "bench --json");
    expect_all(r.out, (const char *const[]){"\"wake_latency\":{\"count\":", "\"p50_ns\":", "\"p99_ns\":",
                                            "\"max_ns\":", NULL});
    test_run_free(r);

    const char *serve[] = {cli, "serve", "echo", "--port", "0", "--duration", "0.2", "--quiet", "--trace", path, NULL};
    r = test_run_argv(serve, NULL);
    expect_ok(r, "serve --trace");
    test_run_free(r);
    expect_trace_file(path);

    const char *bad = "/nonexistent-dir/t.json";
    const char *bbench[] = {cli, "bench", "pingpong", "-p", "usched", "-r", "1", "-n", "500", "--trace", bad, NULL};
    const char *bserve[] = {cli, "serve", "echo", "--port", "0", "--duration", "0.2", "--trace", bad, NULL};
    const char *const *bads[] = {bbench, bserve};
    for (int i = 0; i < 2; i++) {
        r = test_run_argv(bads[i], NULL);
        if (r.status != 1) TEST_FAIL_("%s with a bad --trace: exit %d\n%s", bads[i][1], r.status, r.err);
        ASSERT_STR_CONTAINS(r.err, bad);
        test_run_free(r);
    }
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s CLI PYTHON3 CHECKER machine|virtual|errors|bounded|large|schedtrace|cli\n", argv[0]);
        return 2;
    }
    cli = argv[1];
    python = argv[2];
    checker = argv[3];
    const char *part = argv[4];
    if ((!strcmp(part, "machine") || !strcmp(part, "virtual") || !strcmp(part, "large")) &&
        access(python, X_OK) != 0) {
        printf("SKIP: python3 not found (%s); sh scripts/deps.sh test installs it\n", python);
        return 77;
    }
    ASSERT(mkdtemp(dir));
    if (!strcmp(part, "machine")) test_traced(NULL, NULL);
    else if (!strcmp(part, "virtual")) test_traced(VIRTUAL, "2,2,12");
    else if (!strcmp(part, "errors")) test_errors();
    else if (!strcmp(part, "bounded")) test_bounded();
    else if (!strcmp(part, "large")) test_large();
    else if (!strcmp(part, "schedtrace")) test_schedtrace();
    else if (!strcmp(part, "cli")) test_cli();
    else {
        fprintf(stderr, "unknown part '%s'\n", part);
        return 2;
    }
    rmdir(dir);
    printf("trace %s: ok\n", part);
    return 0;
}
