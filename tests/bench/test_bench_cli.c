/*
 * `usched bench`, run as a program: argv[1] is the built CLI, argv[2] the
 * part to test:
 *   workloads  every workload at a tiny size: exit 0, `tps = ` lines, the summary
 *   compare    --compare runs interleaved, the diff column, counters, --json fields
 *   peers      --peers against fake peer programs: results, a skip, a peer that
 *              fails one run of two, one answering in another unit, a missing
 *              one; the exact rows of the peers table; --peers-dir and
 *              USCHED_PEERS_DIR
 *   peerdir    the peers CMake built are found where the CLI looks by default
 *   progress   the report on stdout once; progress on stderr only with
 *              --progress (stderr is not a terminal here), as one line
 *   args       bad arguments: exit 2, one line on stderr, nothing on stdout
 *   noise      --noise N: the report and --json say N and the CPUs the
 *              busy processes had, and no busy process outlives the run
 *   stop       a SIGTERM of usched bench while a peer runs: the peer (in a
 *              process group of its own) dies with it
 *   children   fib's --cutoff (in --json and on the peers' command line);
 *              --no-inline: no join runs a child inline (joins_inline 0) while
 *              every child is spawned and the result checks; one worker
 *              without it joins every child inline; --fresh and fresh=0/1
 *              run usched in a new process with its counters sent back
 * Numbers are never asserted, only their presence and shape.
 */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"
#include "test.h"
#include "usched.h"

static const char *cli;

/* Runs the CLI with the NULL-terminated arguments after "bench" and env
 * (NULL: inherit) and collects its output. */
static struct test_run run_env(char **env, const char *a0, ...)
{
    const char *argv[32] = {cli, "bench"};
    va_list ap;
    va_start(ap, a0);
    int n = 2;
    for (const char *a = a0; a && n < 31; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    return test_run_argv(argv, env);
}

#define run(...) run_env(NULL, __VA_ARGS__)

#define done test_run_free

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static int lines(const char *s)
{
    return count(s, "\n");
}

static void expect_ok(struct test_run r, const char *what)
{
    if (r.status != 0) TEST_FAIL_("%s: exit %d\nstdout:\n%s\nstderr:\n%s", what, r.status, r.out, r.err);
}

/* ---- workloads ----------------------------------------------------------------- */

static void test_workloads(void)
{
    static const struct {
        const char *name, *n;
    } ws[] = {
        {"pairs", NULL}, {"select", NULL}, {"build", "200"},   {"fib", "20"},
        {"skynet", "1000"}, {"pingpong", "2000"}, {"yield", "2000"}, {"spawn", "3000"},
    };
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        struct test_run r = ws[i].n ? run(ws[i].name, "--policy", "usched", "--runs", "1", "--n", ws[i].n, NULL)
                               : run(ws[i].name, "--policy", "usched", "--runs", "1", "--duration", "0.2", NULL);
        expect_ok(r, ws[i].name);
        ASSERT_EQ(count(r.out, "tps = "), 1);
        ASSERT_STR_CONTAINS(r.out, "(reference)");
        ASSERT_STR_CONTAINS(r.out, "decision counters");
        /* stderr is not a terminal and there is no --progress: nothing there */
        ASSERT_STR_EQ(r.err, "");
        done(r);
    }
    /* --clients and a CPU list reach the run */
    struct test_run r = run("select", "--policy", "usched", "--runs", "1", "--duration", "0.2", "--clients", "3",
                       "--cpus", "0", NULL);
    expect_ok(r, "select --clients 3 --cpus 0");
    ASSERT_STR_CONTAINS(r.out, "1 CPU,");
    done(r);
}

/* ---- compare and json ------------------------------------------------------------- */

/* The probe runs only with two CPUs to pass its line between. */
static bool two_cpus(void)
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) >= 2;
}

static void test_compare(void)
{
    struct test_run r = run("fib", "--n", "18", "--runs", "2", "--compare", "smt=1;smt=0", NULL);
    expect_ok(r, "--compare 'smt=1;smt=0'");
    /* interleaved: A B A B */
    const char *a1 = strstr(r.out, "fib smt=1 run 1: tps = ");
    const char *b1 = strstr(r.out, "fib smt=0 run 1: tps = ");
    const char *a2 = strstr(r.out, "fib smt=1 run 2: tps = ");
    const char *b2 = strstr(r.out, "fib smt=0 run 2: tps = ");
    if (!a1 || !b1 || !a2 || !b2 || !(a1 < b1 && b1 < a2 && a2 < b2))
        TEST_FAIL_("runs not interleaved A B A B:\n%s", r.out);
    ASSERT_STR_CONTAINS(r.out, "mean");
    ASSERT_STR_CONTAINS(r.out, "stddev");
    ASSERT_STR_CONTAINS(r.out, "(reference)");
    ASSERT_STR_CONTAINS(r.out, "%");
    ASSERT_STR_CONTAINS(r.out, "counter ");
    /* two variants: the seed table, each run's tps side by side, the means, the diff */
    ASSERT_STR_CONTAINS(r.out, "seed table (fib, ");
    ASSERT_STR_CONTAINS(r.out, "\n1        tps = ");
    ASSERT_STR_CONTAINS(r.out, "\n2        tps = ");
    ASSERT_STR_CONTAINS(r.out, "\nmean     tps = ");
    ASSERT_STR_CONTAINS(r.out, "% (smt=1 over smt=0)\n");
    ASSERT(!strstr(r.out, "SMT emulated"));
    done(r);

    /* the same on an emulated SMT topology: select with 2 clients */
    r = run("select", "--topology", "pack:1 core:2 pu:2", "--emulate", "--clients", "2", "--duration",
            "0.2", "--runs", "1", "--compare", "smt=1;smt=0", "--policy", "bsd4", NULL);
    expect_ok(r, "--emulate");
    ASSERT_STR_CONTAINS(r.out, "select smt=1 run 1: tps = ");
    ASSERT_STR_CONTAINS(r.out, "seed table (select, 4 CPUs, SMT emulated)");
    ASSERT_STR_CONTAINS(r.out, "% (smt=1 over smt=0)\n");
    /* the counters table, not a given counter: in 0.2 s (and under TSan) no
     * placement may land beside a busy sibling, and all-zero rows are left out */
    ASSERT_STR_CONTAINS(r.out, "decision counters, summed over each variant's runs");
    done(r);

    /* one key with several values: every policy of the library */
    char spec[256] = "policy=";
    int np = usched_policy_count();
    ASSERT_GT(np, 0);
    for (int i = 0; i < np; i++) {
        strcat(spec, usched_policy_name(i));
        if (i + 1 < np) strcat(spec, ",");
    }
    r = run("spawn", "--n", "2000", "--runs", "1", "--compare", spec, NULL);
    expect_ok(r, spec);
    ASSERT_EQ(count(r.out, "tps = "), np);
    for (int i = 0; i < np; i++) {
        char line[96];
        snprintf(line, sizeof line, "spawn policy=%s run 1: tps = ", usched_policy_name(i));
        ASSERT_STR_CONTAINS(r.out, line);
    }
    done(r);

    /* no --policy: every policy, usched first */
    r = run("yield", "--n", "1000", "--runs", "1", NULL);
    expect_ok(r, "yield over all policies");
    ASSERT_EQ(count(r.out, "tps = "), np);
    ASSERT(strstr(r.out, "yield policy=usched run 1") == r.out);
    done(r);

    /* --json: one object per run, with the documented fields */
    r = run("fib", "--n", "18", "--runs", "2", "--compare", "smt=1;smt=0", "--json", NULL);
    expect_ok(r, "--json");
    ASSERT_EQ(lines(r.out), 4);
    static const char *const fields[] = {"{\"workload\":\"fib\"", "\"system\":\"usched\"", "\"policy\":",
                                         "\"knobs\":\"smt=1\"", "\"knobs\":\"smt=0\"", "\"value\":",
                                         "\"unit\":\"ms\"", "\"higher_is_better\":false",
                                         "\"counters\":{\"switches\":"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) ASSERT_STR_CONTAINS(r.out, fields[i]);
    ASSERT_EQ(count(r.out, "\"counters\":{"), 4);
    ASSERT(!strstr(r.out, "tps = "));
    /* the cross-CPU probe before each run, when two CPUs are allowed */
    ASSERT_EQ(count(r.out, "\"xfer_ns\":"), two_cpus() ? 4 : 0);
    done(r);

    r = run("fib", "--n", "15", "--runs", "2", "--policy", "usched", NULL);
    expect_ok(r, "fib with the probe");
    ASSERT_EQ(count(r.out, "  cross-CPU round trip before the run: "), two_cpus() ? 2 : 0);
    if (two_cpus()) {
        /* the summary agrees with the runs' lines: a probe may not finish (it
         * gives up after a second, as on a loaded host under ThreadSanitizer) */
        bool any = count(r.out, "  cross-CPU round trip before the run: not measured") < 2;
        ASSERT_STR_CONTAINS(r.out, any ? "\ncross-CPU round trip before each run (CPUs " : "\ncross-CPU round trip (CPUs ");
        if (!any) ASSERT_STR_CONTAINS(r.out, "): no probe finished\n");
    }
    done(r);
    r = run("fib", "--n", "15", "--runs", "1", "--policy", "usched", "--no-probe", "--json", NULL);
    expect_ok(r, "--no-probe");
    ASSERT(!strstr(r.out, "xfer_ns"));
    done(r);
    r = run("fib", "--n", "15", "--runs", "1", "--policy", "usched", "--no-probe", NULL);
    expect_ok(r, "--no-probe report");
    ASSERT(!strstr(r.out, "cross-CPU"));
    done(r);
    /* the warm-up before each run: the runs are made and reported as without */
    r = run("fib", "--n", "15", "--runs", "2", "--policy", "usched", "--warmup", "20", "--json", NULL);
    expect_ok(r, "--warmup");
    ASSERT_EQ(count(r.out, "\"workload\":\"fib\""), 2);
    done(r);
}

/* ---- peers -------------------------------------------------------------------------- */

static void write_peer(const char *dir, const char *name, const char *body)
{
    char path[512];
    snprintf(path, sizeof path, "%s/peer-%s", dir, name);
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fprintf(f, "#!/bin/sh\n%s\n", body);
    fclose(f);
    ASSERT_EQ(chmod(path, 0755), 0);
}

/* The line of the peers table (after "peers: ") that starts with name and a
 * space, copied to buf with each run of spaces made one (the columns' width
 * follows the longest label); fails the test if there is none. */
static const char *peer_row(const char *out, const char *name, char *buf, size_t len)
{
    const char *p = strstr(out, "\npeers: ");
    if (!p) TEST_FAIL_("no peers table in:\n%s", out);
    size_t k = strlen(name);
    for (p = strchr(p + 1, '\n'); p; p = strchr(p + 1, '\n')) {
        if (strncmp(p + 1, name, k) || p[1 + k] != ' ') continue;
        size_t n = strcspn(p + 1, "\n"), o = 0;
        for (size_t i = 0; i < n && o + 1 < len; i++)
            if (p[1 + i] != ' ' || (o && buf[o - 1] != ' ')) buf[o++] = p[1 + i];
        buf[o] = '\0';
        return buf;
    }
    TEST_FAIL_("no row for %s in the peers table:\n%s", name, out);
}

/* The row's fields, split on runs of spaces: at most max, returns how many. */
static int row_fields(char *row, char **f, int max)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(row, " ", &save); t && n < max; t = strtok_r(NULL, " ", &save))
        f[n++] = t;
    return n;
}

static void test_peers(void)
{
    char dir[] = "/tmp/usched-bench-peers-XXXXXX";
    ASSERT(mkdtemp(dir));
    /* pthreads: a second per op (usched cannot lose to it); go: unsupported;
     * tbb: its first run fails its own check, later ones succeed; omp: checks
     * it got the same size and seed, 0.01 ns per op (usched cannot beat it);
     * boostfiber: answers in ms (another unit); tokio: missing */
    write_peer(dir, "pthreads",
               "echo 'spawn: chatter on stderr' >&2\n"
               "echo 'RESULT workload=spawn system=pthreads value=1000000000 unit=ns/op higher_is_better=0 "
               "check=ok threads='$3");
    write_peer(dir, "go", "echo 'unsupported workload spawn'; exit 3");
    write_peer(dir, "tbb",
               "d=$(dirname \"$0\"); n=$(cat \"$d/tbb.runs\" 2>/dev/null || echo 0); echo $((n + 1)) >\"$d/tbb.runs\"\n"
               "if [ \"$n\" = 0 ]; then echo 'RESULT workload=spawn system=tbb value=5.00 unit=ns/op "
               "higher_is_better=0 check=FAIL threads='$3; exit 1; fi\n"
               "echo 'RESULT workload=spawn system=tbb value=1000000000 unit=ns/op higher_is_better=0 check=ok "
               "threads='$3");
    write_peer(dir, "omp",
               "case \"$*\" in *'spawn --threads '*' --n 2000 '*'--seed 1'*) ;; *) echo \"args $*\" >&2; exit 9;; esac\n"
               "echo 'RESULT workload=spawn system=omp value=0.01 unit=ns/op higher_is_better=0 check=ok threads='$3");
    write_peer(dir, "boostfiber",
               "echo 'RESULT workload=spawn system=boostfiber value=7.50 unit=ms higher_is_better=0 check=ok "
               "threads='$3");
    struct test_run r = run("spawn", "--policy", "usched", "--n", "2000", "--runs", "2", "--peers",
                            "--peers-dir", dir, NULL);
    expect_ok(r, "--peers");
    ASSERT_STR_EQ(r.err, "");
    ASSERT_STR_CONTAINS(r.out, "spawn pthreads run 1: tps = ");
    ASSERT_STR_CONTAINS(r.out, "spawn pthreads run 2: tps = ");
    ASSERT_STR_CONTAINS(r.out, "spawn omp run 2: tps = ");
    /* every failed run has its line in the report, with the reason */
    ASSERT_STR_CONTAINS(r.out, "spawn tbb run 1: failed: its own check failed (check=FAIL)\n");
    ASSERT_STR_CONTAINS(r.out, "spawn tbb run 2: tps = ");
    ASSERT_STR_CONTAINS(r.out, "spawn boostfiber run 1: failed: RESULT says unit=ms, expected ns/op\n");
    ASSERT_STR_CONTAINS(r.out, "spawn boostfiber run 2: failed: RESULT says unit=ms, expected ns/op\n");
    ASSERT_STR_CONTAINS(r.out, "peers: median of each system's successful runs (of 2)");

    /* the rows, field by field: system, result, unit, ratio, paired, runs[, notes] */
    char row[512], *f[16];
    int n = row_fields((char *)peer_row(r.out, "usched", row, sizeof row), f, 16);
    ASSERT_EQ(n, 6);
    ASSERT_STR_EQ(f[2], "ns/op");
    ASSERT_STR_EQ(f[3], "1.00x");
    ASSERT_STR_EQ(f[4], "1.00x");
    ASSERT_STR_EQ(f[5], "2/2");
    n = row_fields((char *)peer_row(r.out, "pthreads", row, sizeof row), f, 16);
    ASSERT_EQ(n, 6); /* no "(usched loses)" */
    ASSERT_STR_EQ(f[1], "1000000000");
    ASSERT_STR_EQ(f[2], "ns/op");
    ASSERT_STR_EQ(f[5], "2/2");
    /* a second per op against usched's nanoseconds, run by run: usched is
     * faster by far, by how much depends on the build and the machine (a
     * ThreadSanitizer build on a loaded host fell under 1000x) */
    ASSERT(f[4][strlen(f[4]) - 1] == 'x' && strtod(f[4], NULL) > 1);
    n = row_fields((char *)peer_row(r.out, "omp", row, sizeof row), f, 16);
    ASSERT_EQ(n, 8);
    ASSERT_STR_EQ(f[1], "0.01");
    ASSERT_STR_EQ(f[4], "0.00x");
    ASSERT_STR_EQ(f[5], "2/2");
    ASSERT_STR_EQ(f[6], "(usched");
    ASSERT_STR_EQ(f[7], "loses)");
    /* tbb: the median of its one good run, and why the other failed */
    ASSERT_STR_EQ(peer_row(r.out, "tbb", row, sizeof row) + strlen(row) -
                      strlen("(1 of 2 runs; 1 failed, last: its own check failed (check=FAIL))"),
                  "(1 of 2 runs; 1 failed, last: its own check failed (check=FAIL))");
    n = row_fields(row, f, 16);
    ASSERT_STR_EQ(f[1], "1000000000");
    /* paired from run 2 alone (run 1 failed): usched's run 2 against tbb's
     * second per op, whatever this build's speed (not a threshold: a
     * ThreadSanitizer build on a loaded host spawns in microseconds) */
    const char *u2 = strstr(r.out, "spawn policy=usched run 2: tps = ");
    ASSERT(u2 && (u2 = strchr(u2, '(')));
    double usched_ns = strtod(u2 + 1, NULL), paired = 1e9 / usched_ns;
    ASSERT(usched_ns > 0 && f[4][strlen(f[4]) - 1] == 'x');
    if (fabs(strtod(f[4], NULL) - paired) > 0.01 + paired * 1e-5)
        TEST_FAIL_("tbb's paired ratio %s, expected %.2fx (usched's run 2: %g ns/op)", f[4], paired, usched_ns);
    ASSERT_STR_EQ(f[5], "1/2");
    ASSERT_STR_EQ(peer_row(r.out, "boostfiber", row, sizeof row),
                  "boostfiber failed: 2 of 2 runs; last: RESULT says unit=ms, expected ns/op");
    ASSERT_STR_EQ(peer_row(r.out, "go", row, sizeof row), "go skipped: unsupported workload spawn");
    ASSERT_STR_CONTAINS(peer_row(r.out, "tokio", row, sizeof row), "skipped: not built: no ");
    ASSERT_STR_CONTAINS(row, "peer-tokio");
    done(r);

    /* the same through the environment, as JSON */
    char envdir[600];
    snprintf(envdir, sizeof envdir, "USCHED_PEERS_DIR=%s", dir);
    char *env[] = {envdir, NULL};
    r = run_env(env, "spawn", "--policy", "usched", "--n", "2000", "--runs", "1", "--peers",
                "--json", NULL);
    expect_ok(r, "--peers --json with USCHED_PEERS_DIR");
    ASSERT_STR_CONTAINS(r.out, "\"system\":\"pthreads\"");
    ASSERT_STR_CONTAINS(r.out, "\"value\":1e+09");
    ASSERT_STR_CONTAINS(r.out, "\"system\":\"go\"");
    ASSERT_STR_CONTAINS(r.out, "\"skipped\":\"unsupported workload spawn\"");
    ASSERT_STR_CONTAINS(r.out, "\"failed\":\"RESULT says unit=ms, expected ns/op\"");
    ASSERT_EQ(lines(r.out), 7); /* usched + 6 peers, one run each */
    done(r);

    /* a peer that answers for another workload, thread count or direction */
    static const struct {
        const char *line, *why;
    } wrong[] = {
        {"workload=fib system=pthreads value=5 unit=ns/op higher_is_better=0 check=ok threads=$3",
         "RESULT says workload=fib, expected spawn"},
        {"workload=spawn system=pthreads value=5 unit=ns/op higher_is_better=0 check=ok threads=9999",
         "RESULT says threads=9999, expected "},
        {"workload=spawn system=pthreads value=5 unit=ns/op higher_is_better=1 check=ok threads=$3",
         "RESULT says higher_is_better=1, expected 0"},
        {"workload=spawn system=go value=5 unit=ns/op higher_is_better=0 check=ok threads=$3",
         "RESULT says system=go, expected pthreads"},
        {"workload=spawn system=pthreads value=5 unit=ns/op check=ok threads=$3",
         "RESULT line without higher_is_better="},
        {"workload=spawn system=pthreads value=-5 unit=ns/op higher_is_better=0 check=ok threads=$3",
         "RESULT value '-5' is not a number > 0"},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        char body[300];
        snprintf(body, sizeof body, "echo \"RESULT %s\"", wrong[i].line);
        write_peer(dir, "pthreads", body);
        r = run("spawn", "--policy", "usched", "--n", "2000", "--runs", "1", "--peers",
                "--peers-dir", dir, NULL);
        expect_ok(r, wrong[i].line);
        char want[300];
        snprintf(want, sizeof want, "spawn pthreads run 1: failed: %s", wrong[i].why);
        ASSERT_STR_CONTAINS(r.out, want);
        snprintf(want, sizeof want, "pthreads failed: 1 of 1 run; last: %s", wrong[i].why);
        ASSERT(strstr(peer_row(r.out, "pthreads", row, sizeof row), want) == row);
        done(r);
    }

    static const char *const names[] = {"pthreads", "go", "tbb", "omp", "boostfiber"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/peer-%s", dir, names[i]);
        unlink(path);
    }
    char runs[600];
    snprintf(runs, sizeof runs, "%s/tbb.runs", dir);
    unlink(runs);
    rmdir(dir);
}

/* The peers CMake built (beside the CLI, in peers/) are found with no
 * --peers-dir and no USCHED_PEERS_DIR. */
static void test_peerdir(void)
{
    char *env[] = {"PATH=/usr/bin:/bin", NULL};
    struct test_run r = run_env(env, "spawn", "--policy", "usched", "--n", "200", "--runs", "1", "--peers", NULL);
    expect_ok(r, "--peers with the default folder");
    ASSERT_STR_CONTAINS(r.out, "spawn pthreads run 1: tps = ");
    done(r);
}

/* ---- progress ------------------------------------------------------------------------ */

static void test_progress(void)
{
    struct test_run r = run("fib", "--n", "15", "--runs", "2", "--compare", "smt=1;smt=0", "--progress", NULL);
    expect_ok(r, "--progress");
    /* the report once, on stdout */
    ASSERT_EQ(count(r.out, ": tps = "), 4);
    ASSERT_EQ(count(r.err, "tps = "), 0);
    /* one line rewritten in place: no newline, a carriage return per update,
     * the run count and the elapsed time */
    ASSERT_EQ(lines(r.err), 0);
    ASSERT_GE(count(r.err, "\r"), 4);
    ASSERT_STR_CONTAINS(r.err, "[1/4 runs, ");
    ASSERT_STR_CONTAINS(r.err, "[4/4 runs, ");
    ASSERT_STR_CONTAINS(r.err, " s] fib smt=0 run 2/2 ...");
    ASSERT(!strstr(r.err, "\033"));  /* not a terminal: no escape codes */
    done(r);
}

/* ---- noise ------------------------------------------------------------------------------- */

/* Processes (not zombies) other than this test whose environment holds
 * this test's tag: the CLI runs it started or their busy children. A
 * command-line match would also count the concurrent bench_cli_args run of
 * the same CLI with a bad --noise. */
static char noise_tag[64];

static int noise_processes(void)
{
    int n = 0;
    DIR *d = opendir("/proc");
    ASSERT(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9' || atoi(e->d_name) == getpid()) continue;
        char path[300];
        static char buf[1 << 16];
        snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue; /* gone meanwhile */
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0) continue; /* a zombie has no environment */
        buf[len] = '\0';
        for (char *a = buf; a < buf + len; a += strlen(a) + 1)
            if (!strcmp(a, noise_tag)) {
                n++;
                break;
            }
    }
    closedir(d);
    return n;
}

static void test_noise(void)
{
    snprintf(noise_tag, sizeof noise_tag, "USCHED_TEST_NOISE_TAG=%d", (int)getpid());
    ASSERT_OK(putenv(noise_tag));
    struct test_run r = run("fib", "--n", "15", "--runs", "2", "--policy", "usched", "--noise", "2", NULL);
    expect_ok(r, "--noise 2");
    ASSERT_STR_CONTAINS(r.out, "fib: 2 runs per variant, ");
    ASSERT_STR_CONTAINS(r.out, ", 2 busy processes beside (lower is better)");
    /* the CPUs the neighbour had: after each run, and per variant */
    ASSERT_EQ(count(r.out, "  busy processes beside the run: "), 2);
    ASSERT_STR_CONTAINS(r.out, "\nCPUs the 2 busy processes had beside each variant");
    done(r);
    ASSERT_EQ(noise_processes(), 0);
    r = run("fib", "--n", "15", "--runs", "1", "--policy", "usched", "--noise", "1", "--compare", "pin=1;pin=0",
            "--json", NULL);
    expect_ok(r, "--noise 1 --json");
    ASSERT_EQ(count(r.out, "\"noise\":1,"), 2);
    ASSERT_EQ(count(r.out, "\"variant\":\"pin=0\""), 1);
    /* a CPU time read from the kernel, never negative */
    ASSERT_EQ(count(r.out, "\"noise_cpus\":"), 2);
    for (const char *p = r.out; (p = strstr(p, "\"noise_cpus\":")); p++) {
        double x = strtod(p + strlen("\"noise_cpus\":"), NULL);
        ASSERT(x >= 0);
    }
    done(r);
    r = run("fib", "--n", "15", "--runs", "1", "--policy", "usched", "--json", NULL);
    expect_ok(r, "--json without --noise");
    ASSERT_EQ(count(r.out, "\"noise\":0,"), 1);
    ASSERT_EQ(count(r.out, "\"noise_cpus\":"), 0);
    done(r);
    ASSERT_EQ(noise_processes(), 0);
}

/* ---- children: --cutoff, --no-inline, --fresh ------------------------------------------- */

/* The value of counter name in the i-th (from 0) --json line of out; -1 if absent. */
static long long json_counter(const char *out, int i, const char *name)
{
    const char *line = out;
    for (int k = 0; k < i && line; k++) line = (line = strchr(line, '\n')) ? line + 1 : NULL;
    if (!line) return -1;
    const char *end = strchr(line, '\n');
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *p = strstr(line, key);
    if (!p || (end && p > end)) return -1;
    return atoll(p + strlen(key));
}

static void test_children(void)
{
    /* one worker: every child is still waiting on the joiner's CPU at its
     * join. The stall monitor is off: under a sanitizer on a loaded host a
     * fiber can run past stall_us, and the monitor then moves the queue it
     * stalls (4 children of 1,596 ran from the global queue under TSan). */
    setenv("USCHED_KNOBS", "stall_us=0", 1);
    struct test_run r = run("fib", "--n", "18", "--cutoff", "4", "--runs", "1", "--policy", "usched", "--cpus",
                            "0", "--json", "--no-probe", NULL);
    unsetenv("USCHED_KNOBS");
    expect_ok(r, "fib --cutoff 4 on one worker");
    ASSERT_STR_CONTAINS(r.out, "\"cutoff\":4,");
    ASSERT_STR_CONTAINS(r.out, "\"process\":\"bench\"");
    ASSERT_GT(json_counter(r.out, 0, "spawns"), 0);
    ASSERT_EQ(json_counter(r.out, 0, "joins_inline"), json_counter(r.out, 0, "spawns"));
    done(r);

    /* --no-inline, on one worker and on all: none run inline, the answers check */
    const char *const wl[][2] = {{"fib", "18"}, {"skynet", "1000"}, {"spawn", "3000"}};
    for (size_t i = 0; i < sizeof wl / sizeof wl[0]; i++) {
        for (int one = 0; one < 2; one++) {
            r = run(wl[i][0], "--n", wl[i][1], "--no-inline", "--runs", "1", "--policy", "usched", "--json",
                    "--no-probe", one ? "--cpus" : NULL, "0", NULL);
            expect_ok(r, wl[i][0]);
            ASSERT_STR_CONTAINS(r.out, "\"no_inline\":true");
            ASSERT_GT(json_counter(r.out, 0, "spawns"), 0);
            ASSERT_EQ(json_counter(r.out, 0, "joins_inline"), 0);
            /* every child was switched to (it started on its own stack) */
            ASSERT(json_counter(r.out, 0, "switches") >= json_counter(r.out, 0, "spawns"));
            done(r);
        }
    }

    /* --call on one worker: of each batch of 1,000 the first 64 are fibers
     * (joined inline), the rest run as calls; the bench checks that every
     * child ran */
    setenv("USCHED_KNOBS", "stall_us=0", 1);
    r = run("spawn", "--n", "3000", "--call", "--runs", "1", "--policy", "usched", "--json", "--no-probe", "--cpus",
            "0", NULL);
    unsetenv("USCHED_KNOBS");
    expect_ok(r, "spawn --call");
    ASSERT_STR_CONTAINS(r.out, "\"call\":true");
    ASSERT_EQ(json_counter(r.out, 0, "spawns_called"), 3 * (1000 - 64));
    ASSERT_EQ(json_counter(r.out, 0, "joins_inline"), 3 * 64);
    done(r);

    /* --cutoff reaches the peers' command line */
    char dir[] = "/tmp/usched-bench-cutoff-XXXXXX";
    ASSERT(mkdtemp(dir));
    write_peer(dir, "omp",
               "case \"$*\" in *'--cutoff 5'*) ;; *) echo \"args $*\" >&2; exit 9;; esac\n"
               "echo 'RESULT workload=fib system=omp value=1.5 unit=ms higher_is_better=0 check=ok threads='$3");
    r = run("fib", "--n", "16", "--cutoff", "5", "--runs", "1", "--policy", "usched", "--peers", "--peers-dir", dir,
            "--json", NULL);
    expect_ok(r, "fib --cutoff 5 --peers");
    ASSERT_STR_CONTAINS(r.out, "\"system\":\"omp\"");
    ASSERT(!strstr(r.out, "\"failed\""));
    ASSERT_EQ(count(r.out, "\"cutoff\":5,"), count(r.out, "\n"));
    done(r);
    char path[128];
    snprintf(path, sizeof path, "%s/peer-omp", dir);
    unlink(path);

    /* --trace reaches the Go peer alone (Go's own tracer), named for its
     * variant and run; the usched run keeps FILE itself */
    char trace[128], want[320];
    snprintf(trace, sizeof trace, "%s/t.ut", dir);
    snprintf(want, sizeof want,
             "case \"$*\" in *'--trace %s/t-'[0-9]'-1.gotrace'*) ;; *) echo \"args $*\" >&2; exit 9;; esac\n"
             "echo 'RESULT workload=fib system=go value=2.5 unit=ms higher_is_better=0 check=ok threads='$3",
             dir);
    write_peer(dir, "go", want);
    write_peer(dir, "omp",
               "case \"$*\" in *--trace*) echo \"args $*\" >&2; exit 9;; esac\n"
               "echo 'RESULT workload=fib system=omp value=1.5 unit=ms higher_is_better=0 check=ok threads='$3");
    r = run("fib", "--n", "16", "--runs", "1", "--policy", "usched", "--peers", "--peers-dir", dir, "--trace", trace,
            "--json", "--no-probe", NULL);
    expect_ok(r, "fib --peers --trace");
    ASSERT_STR_CONTAINS(r.out, "\"system\":\"go\"");
    ASSERT_STR_CONTAINS(r.out, "\"system\":\"omp\"");
    ASSERT(!strstr(r.out, "\"failed\""));
    ASSERT_EQ(access(trace, R_OK), 0);
    done(r);
    unlink(trace);
    unlink(path);
    snprintf(path, sizeof path, "%s/peer-go", dir);
    unlink(path);
    rmdir(dir);

    /* --fresh: the run in a new process, its counters sent back. Under
     * qemu-user the CLI cannot re-execute itself (an aarch64 program is
     * started through the emulator, and the CLI execs its own file): the
     * run must then fail with the reason, not hang or report nothing. */
    r = run("fib", "--n", "16", "--runs", "2", "--policy", "usched", "--fresh", "--json", "--no-probe", NULL);
    if (getenv("USCHED_TEST_EMULATOR")) {
        ASSERT_EQ(r.status, 1);
        ASSERT_STR_CONTAINS(r.err, "--fresh: cannot run /proc/self/exe: "); /* the reason follows */
        done(r);
        printf("children: --fresh not run under an emulator (the CLI cannot re-execute itself there)\n");
        return;
    }
    expect_ok(r, "fib --fresh");
    ASSERT_EQ(count(r.out, "\"process\":\"fresh\""), 2);
    ASSERT_GT(json_counter(r.out, 1, "spawns"), 0);
    done(r);
    r = run("skynet", "--n", "1000", "--runs", "1", "--compare", "fresh=0;fresh=1", NULL);
    expect_ok(r, "skynet fresh=0;fresh=1");
    ASSERT_STR_CONTAINS(r.out, "skynet fresh=0 run 1: tps = ");
    ASSERT_STR_CONTAINS(r.out, "skynet fresh=1 run 1: tps = ");
    done(r);
}

/* ---- bad arguments ---------------------------------------------------------------------- */

static void bad(const char *needle, const char *a0, ...)
{
    const char *argv[16] = {a0};
    va_list ap;
    va_start(ap, a0);
    int n = 1;
    for (const char *a = va_arg(ap, const char *); a && n < 15; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    struct test_run r = run(argv[0], argv[1], argv[2], argv[3], argv[4], argv[5], argv[6], argv[7], NULL);
    if (r.status != 2) TEST_FAIL_("bench %s %s ...: exit %d, expected 2\n%s%s", argv[0], argv[1] ? argv[1] : "",
                                  r.status, r.out, r.err);
    ASSERT_STR_EQ(r.out, "");
    ASSERT_EQ(lines(r.err), 1);
    ASSERT_STR_CONTAINS(r.err, "usched bench: ");
    ASSERT_STR_CONTAINS(r.err, needle);
    done(r);
}

static void test_args(void)
{
    bad("workload 'nosuch': unknown", "nosuch", NULL);
    bad("unexpected argument 'fib'", "spawn", "fib", NULL);
    bad("unknown option '--bogus'", "fib", "--bogus", NULL);
    bad("option '--runs' needs a value", "fib", "--runs", NULL);
    bad("--runs '0'", "fib", "--runs", "0", NULL);
    bad("--runs 'x'", "fib", "--runs", "x", NULL);
    bad("--duration '-1'", "select", "--duration", "-1", NULL);
    bad("--duration 'abc'", "select", "--duration", "abc", NULL);
    bad("--n: select has no size", "select", "--n", "5", NULL);
    bad("skynet leaves must be a power of 10", "skynet", "--n", "15", NULL);
    bad("fib(N) needs N <= 90", "fib", "--n", "91", NULL);
    bad("--n '0'", "fib", "--n", "0", NULL);
    bad("--clients: only select", "fib", "--clients", "3", NULL);
    bad("--clients '0'", "select", "--clients", "0", NULL);
    bad("policy 'nosuch'", "fib", "--policy", "nosuch", NULL);
    bad("knobs", "fib", "--knobs", "nosuch=1", NULL);
    bad("smt=7", "fib", "--compare", "smt=7;smt=0", NULL);
    bad("is not key=value", "fib", "--compare", "bogus", NULL);
    bad("policy 'nosuch'", "fib", "--compare", "policy=usched,nosuch", NULL);
    bad("cpus", "fib", "--cpus", "0-999", NULL);
    bad("--peers-dir needs --peers", "fib", "--peers-dir", "/tmp", NULL);
    bad("--emulate needs a virtual topology", "fib", "--emulate", NULL);
    bad("pin '2': must be 0 or 1", "fib", "--compare", "pin=0;pin=2", NULL);
    bad("--noise '1025'", "fib", "--noise", "1025", NULL);
    bad("--noise '-1'", "fib", "--noise", "-1", NULL);
    bad("--warmup '60001': must be in [0, 60000]", "fib", "--warmup", "60001", NULL);
    bad("--warmup '1s': not an integer", "fib", "--warmup", "1s", NULL);
    bad("--cutoff: only fib", "spawn", "--cutoff", "4", NULL);
    bad("--cutoff '1'", "fib", "--cutoff", "1", NULL);
    bad("--no-inline: only fib, skynet and spawn", "select", "--no-inline", NULL);
    bad("--call: only fib, skynet and spawn", "select", "--call", NULL);
    bad("--call and --no-inline", "spawn", "--call", "--no-inline", NULL);
    bad("fresh '2': must be 0 or 1", "fib", "--compare", "fresh=0;fresh=2", NULL);
}

/* ---- stop ---------------------------------------------------------------------------- */

/* Whether pid has ended: gone, or a zombie (dead, not yet reaped). */
static bool ended(pid_t pid)
{
    char path[64], stat[256] = "";
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    bool zombie = fgets(stat, sizeof stat, f) && strstr(stat, ") Z ");
    fclose(f);
    return zombie;
}

static void test_stop(void)
{
    char dir[] = "/tmp/usched-bench-stop-XXXXXX", pidfile[600];
    ASSERT(mkdtemp(dir));
    snprintf(pidfile, sizeof pidfile, "%s/peer.pid", dir);
    /* a peer that tells its pid, then runs until it is killed */
    write_peer(dir, "pthreads", "echo $$ >\"$(dirname \"$0\")/peer.pid.tmp\"\n"
                                "mv \"$(dirname \"$0\")/peer.pid.tmp\" \"$(dirname \"$0\")/peer.pid\"\n"
                                "exec sleep 600");
    const char *argv[] = {cli, "bench", "spawn", "--policy", "usched", "--n", "200", "--runs", "1",
                          "--no-probe", "--peers", "--peers-dir", dir, NULL};
    struct test_proc b = test_start_argv(argv);
    /* the state to wait for: the peer has written its pid (bounded, as a hang) */
    FILE *f = NULL;
    for (int i = 0; i < 120000 && !(f = fopen(pidfile, "r")); i++) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (!f) TEST_FAIL_("the peer never started (no %s)", pidfile);
    int peer = 0;
    ASSERT_EQ(fscanf(f, "%d", &peer), 1);
    fclose(f);
    ASSERT_EQ(kill(b.pid, SIGTERM), 0);
    int st;
    ASSERT_EQ(waitpid(b.pid, &st, 0), b.pid);
    fclose(b.out);
    bool dead = false;
    for (int i = 0; i < 60000 && !(dead = ended(peer)); i++) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (!dead) {
        kill(peer, SIGKILL);
        TEST_FAIL_("the peer (pid %d) outlived usched bench (its %s %d)", peer,
                   WIFSIGNALED(st) ? "signal" : "exit status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
    ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    char path[600];
    snprintf(path, sizeof path, "%s/peer-pthreads", dir);
    unlink(path);
    unlink(pidfile);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s <usched binary> workloads|compare|peers|args|peerdir|progress|noise|children|stop\n", argv[0]);
        return 2;
    }
    cli = argv[1];
    if (!strcmp(argv[2], "workloads"))
        test_workloads();
    else if (!strcmp(argv[2], "compare"))
        test_compare();
    else if (!strcmp(argv[2], "peers"))
        test_peers();
    else if (!strcmp(argv[2], "args"))
        test_args();
    else if (!strcmp(argv[2], "peerdir"))
        test_peerdir();
    else if (!strcmp(argv[2], "progress"))
        test_progress();
    else if (!strcmp(argv[2], "noise"))
        test_noise();
    else if (!strcmp(argv[2], "children"))
        test_children();
    else if (!strcmp(argv[2], "stop"))
        test_stop();
    else
        TEST_FAIL_("unknown part '%s'", argv[2]);
    printf("bench cli %s: ok\n", argv[2]);
    return 0;
}
