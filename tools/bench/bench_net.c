/*
 * usched bench tbench|pgbench|redis|http (bench_net.h): the sweep, the real
 * clients and the servers they are compared on.
 *
 * One run: start the server (usched's in this process on the variant's
 * scheduler; or a peer's process), run the client for --duration seconds,
 * take the client's own figure (tbench MB/sec, pgbench tps, redis-benchmark
 * and wrk requests per second), stop the server. Layouts: "unpinned" lets
 * client and server float over every CPU; "split" puts the server on the
 * first half of the CPUs (usched: --cpus; a peer process: its affinity) and
 * the client on the rest, the seeds' "one server core" view.
 *
 * Every process started here gets its own process group, which is killed
 * when the run ends (tbench_srv forks a process per connection, nginx its
 * workers); temporary directories (PostgreSQL's data, nginx's config) are
 * removed at exit.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_net.h"
#include "cli_opts.h"
#include "servers.h"

int cmd_bench(int argc, char **argv);

const struct peer_workload_info bench_net_infos[BENCH_NET_COUNT] = {
#define X(name, summary, unit) {#name, unit, 1, 0},
    BENCH_NET_WORKLOADS(X)
#undef X
};

/* The systems each workload is compared with (--peers): the Go peer and
 * the server the client was written for. */
static const char *const tbench_systems[] = {"go", "tbench_srv"};
static const char *const pgbench_systems[] = {"go", "postgres"};
static const char *const redis_systems[] = {"go", "redis-server"};
static const char *const http_systems[] = {"go", "nginx"};

static void net_run_system(const char *peers_dir, const char *system, const struct bench_params *p,
                           struct bench_peer_out *out);
static void net_json(FILE *f);

const struct bench_systems bench_net_systems[BENCH_NET_COUNT] = {
#define X(name, summary, unit) \
    [BENCH_NET_##name] = {name##_systems, 2, net_run_system, net_json},
    BENCH_NET_WORKLOADS(X)
#undef X
};

/* ---- the current point of the sweep --------------------------------------------------- */

#define NET_MAX_POINTS 32
#define NET_TBENCH_PORT 7003

static const long tbench_sweep[] = {1, 2, 4, 8};  /* the seeds' tbench client counts */
static const long pgbench_sweep[] = {2, 8};       /* -c 2 -j 2 as seed 002, and more */
static const long redis_sweep[] = {50};           /* redis-benchmark's default -c */
static const long redis_pipelines[] = {1, 16};
static const long http_sweep[] = {10, 50};

static struct {
    int wl;               /* BENCH_NET_* of the sweep */
    long clients;         /* this point's client count */
    long pipeline;        /* redis -P */
    bool split;           /* layout: server on the first half of the CPUs */
    bool tpcb;            /* pgbench's tpcb-like script instead of select-only */
    int scale;            /* pgbench tables */
    cpu_set_t server_cpus, client_cpus; /* split layout, in OS numbers */
    int nserver_cpus, ncpus;
    char server_dense[64]; /* usched --cpus of the server half */
} cur;

static void net_json(FILE *f)
{
    fprintf(f, ",\"clients\":%ld,\"layout\":\"%s\"", cur.clients, cur.split ? "split" : "unpinned");
    if (cur.wl == BENCH_NET_redis) fprintf(f, ",\"pipeline\":%ld", cur.pipeline);
    if (cur.wl == BENCH_NET_pgbench) fprintf(f, ",\"script\":\"%s\"", cur.tpcb ? "tpcb-like" : "select-only");
}

/* ---- processes ---------------------------------------------------------------------------- */

struct proc {
    pid_t pid; /* also its process group */
    int out;   /* read end of its stdout+stderr, or -1 */
};

/* The process groups started and not yet reaped: a SIGINT or SIGTERM of
 * usched bench kills them on its way out (they have process groups of their
 * own, so the terminal's Ctrl-C does not reach them). */
static volatile sig_atomic_t live[8];

static void live_set(pid_t old, pid_t pid)
{
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
        if (live[i] == old) {
            live[i] = pid;
            return;
        }
}

static void remove_tmpdirs_now(void);

static void on_fatal_signal(int sig)
{
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
        if (live[i] > 0) kill(-(pid_t)live[i], SIGKILL); /* async-signal-safe */
    remove_tmpdirs_now();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void live_guard(void)
{
    static bool installed;
    if (installed) return;
    installed = true;
    struct sigaction sa = {.sa_handler = on_fatal_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* PostgreSQL's user, when this process is root (postgres refuses root). */
static struct {
    bool set;
    uid_t uid;
    gid_t gid;
} pg_user;

/* Starts argv[0] in a new process group, on cpus if not NULL, with stdout
 * and stderr into a pipe (kept in p->out) or /dev/null, as pg_user when
 * as_pg. Only async-signal-safe calls run between fork and exec: this
 * process has threads. */
static int proc_start_as(struct proc *p, char *const *argv, const cpu_set_t *cpus, bool capture, bool as_pg,
                         char *err, size_t len)
{
    int fd[2] = {-1, -1};
    p->out = -1;
    if (capture && pipe2(fd, O_CLOEXEC) < 0) {
        snprintf(err, len, "pipe: %s", strerror(errno));
        return -1;
    }
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, len, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        if (cpus) sched_setaffinity(0, sizeof *cpus, cpus);
        int o = capture ? fd[1] : devnull;
        dup2(devnull, 0);
        dup2(o, 1);
        dup2(o, 2);
        if (as_pg && pg_user.set && (setgid(pg_user.gid) < 0 || setuid(pg_user.uid) < 0)) _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid); /* both sides, whichever runs first */
    close(devnull);
    if (capture) {
        close(fd[1]);
        p->out = fd[0];
    }
    p->pid = pid;
    live_set(0, pid);
    return 0;
}

static int proc_start(struct proc *p, char *const *argv, const cpu_set_t *cpus, bool capture, char *err,
                      size_t len)
{
    return proc_start_as(p, argv, cpus, capture, false, err, len);
}

/* Reads p's output until it closes or deadline (monotonic seconds);
 * appends to buf (NUL-terminated, at most len - 1 bytes kept). Returns
 * false on timeout. */
static bool proc_read(struct proc *p, char *buf, size_t len, double deadline)
{
    size_t n = strlen(buf);
    for (;;) {
        double left = deadline - bench_now();
        if (left <= 0) return false;
        struct pollfd pf = {p->out, POLLIN, 0};
        int r = poll(&pf, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        char chunk[4096];
        ssize_t k = read(p->out, chunk, sizeof chunk);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return true;
        /* keep the tail: the figures are at the end */
        if (n + (size_t)k >= len) {
            size_t drop = n + (size_t)k - (len - 1);
            if (drop > n) drop = n;
            memmove(buf, buf + drop, n - drop);
            n -= drop;
        }
        size_t take = (size_t)k < len - 1 - n ? (size_t)k : len - 1 - n;
        memcpy(buf + n, chunk + (size_t)k - take, take);
        n += take;
        buf[n] = '\0';
    }
}

/* Kills p's process group (SIGTERM, then SIGKILL after a second) and reaps
 * p. Returns p's wait status. */
static int proc_stop(struct proc *p)
{
    int st = 0;
    if (p->pid <= 0) return 0;
    kill(-p->pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid) break;
        if (i == 99 || r < 0) {
            kill(-p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(-p->pid, SIGKILL); /* children left in the group (tbench_srv's, nginx's workers) */
    if (p->out >= 0) close(p->out);
    live_set(p->pid, 0);
    p->pid = 0;
    p->out = -1;
    return st;
}

/* Waits for p to exit by itself until deadline; false (p killed) on timeout. */
static bool proc_wait(struct proc *p, double deadline, int *status)
{
    while (bench_now() < deadline) {
        pid_t r = waitpid(p->pid, status, WNOHANG);
        if (r == p->pid) {
            kill(-p->pid, SIGKILL);
            if (p->out >= 0) close(p->out);
            live_set(p->pid, 0);
            p->pid = 0;
            p->out = -1;
            return true;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    proc_stop(p);
    return false;
}

/* Whether something accepts on 127.0.0.1:port. */
static bool port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0) close(fd);
    return ok;
}

/* Waits until port accepts (a peer starting up); false after 20 s or when
 * p died first. */
static bool wait_port(struct proc *p, int port)
{
    double deadline = bench_now() + 20;
    while (bench_now() < deadline) {
        if (port_open(port)) return true;
        int st;
        if (p && waitpid(p->pid, &st, WNOHANG) == p->pid) {
            kill(-p->pid, SIGKILL);
            live_set(p->pid, 0);
            p->pid = 0;
            return false;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* A port nobody listens on now (for servers that cannot take port 0). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &l) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static const char *find_program(const char *const *paths)
{
    for (int i = 0; paths[i]; i++)
        if (access(paths[i], X_OK) == 0) return paths[i];
    return NULL;
}

/* ---- clients -------------------------------------------------------------------------------- */

struct client_spec {
    const char *path;    /* the client binary */
    const char *package; /* its Debian package */
    const char *marker;  /* the line that carries the figure */
};

static const struct client_spec clients[BENCH_NET_COUNT] = {
    [BENCH_NET_tbench] = {"/usr/bin/tbench", "dbench", "Throughput "},
    [BENCH_NET_pgbench] = {"/usr/bin/pgbench", "postgresql-client-15", "tps = "},
    [BENCH_NET_redis] = {"/usr/bin/redis-benchmark", "redis-tools", "\"SET\""},
    [BENCH_NET_http] = {"/usr/bin/wrk", "wrk", "Requests/sec:"},
};

/* Parses the client's figure from its output; NAN if absent. */
static double client_figure(int wl, const char *out)
{
    const char *m = strstr(out, clients[wl].marker);
    if (!m) return NAN;
    switch (wl) {
    case BENCH_NET_tbench: return strtod(m + strlen("Throughput "), NULL);
    case BENCH_NET_pgbench: return strtod(m + strlen("tps = "), NULL);
    case BENCH_NET_http: return strtod(m + strlen("Requests/sec:"), NULL);
    case BENCH_NET_redis: {
        /* --csv rows "TEST","rps",...: requests over the time of all tests
         * (the harmonic mean of the rates, each test having -n requests) */
        double inv = 0;
        int n = 0;
        for (const char *line = strstr(out, "\"SET\""); line; line = strchr(line, '\n')) {
            while (*line == '\n') line++;
            if (*line != '"' || !strncmp(line, "\"test\"", 6)) continue;
            const char *comma = strstr(line, "\",\"");
            if (!comma) break;
            double rps = strtod(comma + 3, NULL);
            if (!(rps > 0)) return NAN;
            inv += 1 / rps;
            n++;
        }
        return n ? n / inv : NAN;
    }
    }
    return NAN;
}

/* Runs the client of the current point against port, for duration seconds;
 * the figure, or NAN with err saying why. */
static double run_client(int port, double duration, const char *db, const char *user, char *err, size_t len)
{
    const struct client_spec *cs = &clients[cur.wl];
    char portbuf[16], c[24], j[24], t[24], n[32], pl[24], url[64];
    char *argv[32];
    int k = 0;
    snprintf(portbuf, sizeof portbuf, "%d", port);
    snprintf(c, sizeof c, "%ld", cur.clients);
    long secs = (long)ceil(duration);
    snprintf(t, sizeof t, "%ld", secs < 1 ? 1 : secs);
    argv[k++] = (char *)cs->path;
    switch (cur.wl) {
    case BENCH_NET_tbench:
        argv[k++] = "-t";
        argv[k++] = t;
        argv[k++] = c;
        argv[k++] = "127.0.0.1";
        break;
    case BENCH_NET_pgbench:
        snprintf(j, sizeof j, "%ld", cur.clients < 2 ? cur.clients : 2);
        argv[k++] = "-n";
        if (!cur.tpcb) argv[k++] = "-S";
        argv[k++] = "-c";
        argv[k++] = c;
        argv[k++] = "-j";
        argv[k++] = j;
        argv[k++] = "-T";
        argv[k++] = t;
        argv[k++] = "-h";
        argv[k++] = "127.0.0.1";
        argv[k++] = "-p";
        argv[k++] = portbuf;
        argv[k++] = "-U";
        argv[k++] = (char *)user;
        argv[k++] = (char *)db;
        break;
    case BENCH_NET_redis: {
        /* about duration seconds over both tests at a guessed 20,000 round
         * trips per second and client-pipeline (redis-benchmark has no -T) */
        long per = (long)(duration * 10000.0 * (double)(cur.pipeline < 8 ? cur.pipeline : 8));
        per = per / (cur.clients * cur.pipeline) * (cur.clients * cur.pipeline); /* whole pipelines */
        if (per < cur.clients * cur.pipeline) per = cur.clients * cur.pipeline;
        snprintf(n, sizeof n, "%ld", per);
        snprintf(pl, sizeof pl, "%ld", cur.pipeline);
        const char *a[] = {"-h", "127.0.0.1", "-p", portbuf, "-c", c, "-n", n, "-P", pl, "-t", "set,get", "-q", "--csv"};
        for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) argv[k++] = (char *)a[i];
        break;
    }
    case BENCH_NET_http:
        snprintf(j, sizeof j, "%ld", cur.clients < 2 ? cur.clients : 2);
        snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
        snprintf(t, sizeof t, "%gs", duration);
        argv[k++] = "-t";
        argv[k++] = j;
        argv[k++] = "-c";
        argv[k++] = c;
        argv[k++] = "-d";
        argv[k++] = t;
        argv[k++] = url;
        break;
    }
    argv[k] = NULL;
    struct proc p;
    if (proc_start(&p, argv, cur.split ? &cur.client_cpus : NULL, true, err, len) < 0) return NAN;
    static char out[65536];
    out[0] = '\0';
    double deadline = bench_now() + duration + 60;
    bool done = proc_read(&p, out, sizeof out, deadline);
    int st = 0;
    if (!done || !proc_wait(&p, deadline, &st)) {
        proc_stop(&p);
        snprintf(err, len, "%s did not finish within %g s", cs->path, duration + 60);
        return NAN;
    }
    double v = client_figure(cur.wl, out);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || isnan(v)) {
        /* the client's last line says why */
        size_t l = strlen(out);
        while (l && (out[l - 1] == '\n' || out[l - 1] == '\r')) out[--l] = '\0';
        const char *last = strrchr(out, '\n');
        snprintf(err, len, "%s exited with %d: %.200s", cs->path, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                 last ? last + 1 : out);
        return NAN;
    }
    return v;
}

/* ---- usched's servers ----------------------------------------------------------------------- */

static const char *const proto_of[BENCH_NET_COUNT] = {"tbench", "pgbench", "redis", "http"};

/* One run of the current point against usched's server on s. */
static int net_usched(usched_t *s, const struct bench_params *p, struct bench_out *out)
{
    if (access(clients[cur.wl].path, X_OK) != 0) {
        snprintf(out->err, sizeof out->err, "%s is not installed (Debian package %s; scripts/deps-peers.sh)",
                 clients[cur.wl].path, clients[cur.wl].package);
        return -1;
    }
    struct srv_opts o = {.port = cur.wl == BENCH_NET_tbench ? NET_TBENCH_PORT : 0, .scale = cur.scale};
    struct srv *v;
    char err[256];
    if (srv_start(s, srv_proto_find(proto_of[cur.wl]), &o, &v, err, sizeof err) < 0) {
        snprintf(out->err, sizeof out->err, "usched serve %s: %.200s", proto_of[cur.wl], err);
        return -1;
    }
    out->value = run_client(srv_port(v), p->duration, "bench", "usched", out->err, sizeof out->err);
    srv_stop(v);
    char msg[200];
    int r = srv_check(v, msg, sizeof msg);
    srv_free(v);
    if (r < 0) {
        snprintf(out->err, sizeof out->err, "%s", msg);
        return -1;
    }
    return isnan(out->value) ? -1 : 0;
}

#define X(name, summary, unit) \
    int bench_net_##name(usched_t *s, const struct bench_params *p, struct bench_out *out) \
    {                                                                                      \
        return net_usched(s, p, out);                                                      \
    }
BENCH_NET_WORKLOADS(X)
#undef X

/* ---- the peers' servers --------------------------------------------------------------------- */

/* Temporary directories, one per kind (redis, nginx, postgres), made on
 * first use and removed at exit. */
static struct {
    const char *what;
    char *path;
} tmpdirs[8];
static int ntmpdirs;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_tmpdirs(void)
{
    for (int i = 0; i < ntmpdirs; i++) {
        nftw(tmpdirs[i].path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        free(tmpdirs[i].path);
    }
    ntmpdirs = 0;
}

/* From the signal handler: rm -rf each directory (fork, execv and waitpid
 * are async-signal-safe; nftw and free are not). */
static void remove_tmpdirs_now(void)
{
    for (int i = 0; i < ntmpdirs; i++) {
        char *argv[] = {"/bin/rm", "-rf", tmpdirs[i].path, NULL};
        pid_t pid = fork();
        if (pid == 0) {
            execv(argv[0], argv);
            _exit(127);
        }
        if (pid > 0) waitpid(pid, NULL, 0);
    }
}

static char *make_tmpdir(const char *what)
{
    for (int i = 0; i < ntmpdirs; i++)
        if (!strcmp(tmpdirs[i].what, what)) return tmpdirs[i].path;
    char tmpl[128];
    const char *base = getenv("TMPDIR");
    snprintf(tmpl, sizeof tmpl, "%s/usched-%s-XXXXXX", base && *base ? base : "/tmp", what);
    if (ntmpdirs == (int)(sizeof tmpdirs / sizeof tmpdirs[0]) || !mkdtemp(tmpl)) return NULL;
    if (ntmpdirs == 0) atexit(remove_tmpdirs);
    tmpdirs[ntmpdirs].what = what;
    return tmpdirs[ntmpdirs++].path = strdup(tmpl);
}

/* Marks out skipped or failed, with why. */
static void verdict(struct bench_peer_out *out, enum bench_peer_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void verdict(struct bench_peer_out *out, enum bench_peer_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->msg, sizeof out->msg, fmt, ap);
    va_end(ap);
    out->status = st;
}

/* Runs the client against a started server process on port and stops it. */
static void client_against(struct proc *srv, int port, const struct bench_params *p, const char *db,
                           const char *user, struct bench_peer_out *out)
{
    char err[256] = "";
    if (!wait_port(srv, port)) {
        char tail[512] = "";
        if (srv->out >= 0) proc_read(srv, tail, sizeof tail, bench_now() + 0.5);
        proc_stop(srv);
        verdict(out, BENCH_PEER_FAILED, "the server did not accept on port %d%s%.200s", port, tail[0] ? ": " : "", tail);
        return;
    }
    double v = run_client(port, p->duration, db, user, err, sizeof err);
    proc_stop(srv);
    if (isnan(v)) {
        verdict(out, BENCH_PEER_FAILED, "%s", err);
        return;
    }
    out->value = v;
    out->status = BENCH_PEER_OK;
}

static const cpu_set_t *server_cpus(void)
{
    return cur.split ? &cur.server_cpus : NULL;
}

static int server_threads(void)
{
    return cur.split ? cur.nserver_cpus : cur.ncpus;
}

/* Starts the server argv (output kept when capture, to quote on failure)
 * and measures the client against it on port. */
static void serve_and_measure(char *const *argv, bool capture, int port, const struct bench_params *p,
                              struct bench_peer_out *out)
{
    struct proc srv;
    char err[256];
    if (proc_start(&srv, argv, server_cpus(), capture, err, sizeof err) < 0) {
        verdict(out, BENCH_PEER_FAILED, "%s", err);
        return;
    }
    client_against(&srv, port, p, "bench", "usched", out);
}

/* The first of paths that is installed; NULL with out skipped otherwise. */
static const char *need_program(const char *const *paths, const char *package, struct bench_peer_out *out)
{
    const char *exe = find_program(paths);
    if (!exe) verdict(out, BENCH_PEER_SKIPPED, "%s is not installed (Debian package %s; scripts/deps-peers.sh)", paths[0], package);
    return exe;
}

static void run_go(const char *peers_dir, const struct bench_params *p, struct bench_peer_out *out)
{
    char path[4096], port[16], threads[16], scale[16];
    snprintf(path, sizeof path, "%s/peer-goserve", peers_dir);
    if (access(path, X_OK) != 0) {
        verdict(out, BENCH_PEER_SKIPPED, "not built: no %.200s (run bench/peers/build.sh)", path);
        return;
    }
    if (cur.tpcb) {
        verdict(out, BENCH_PEER_SKIPPED, "the Go peer runs select-only");
        return;
    }
    int portno = cur.wl == BENCH_NET_tbench ? NET_TBENCH_PORT : free_port();
    snprintf(port, sizeof port, "%d", portno);
    snprintf(threads, sizeof threads, "%d", server_threads());
    snprintf(scale, sizeof scale, "%d", cur.scale ? cur.scale : 1);
    char *argv[] = {path, (char *)proto_of[cur.wl], "--port", port, "--threads", threads, "--scale", scale, NULL};
    serve_and_measure(argv, true, portno, p, out);
}

static void run_tbench_srv(const struct bench_params *p, struct bench_peer_out *out)
{
    static const char *const paths[] = {"/usr/bin/tbench_srv", NULL};
    const char *exe = need_program(paths, "dbench", out);
    if (!exe) return;
    char *argv[] = {(char *)exe, NULL};
    serve_and_measure(argv, false, NET_TBENCH_PORT, p, out); /* it prints a mark per connection */
}

static void run_redis_server(const struct bench_params *p, struct bench_peer_out *out)
{
    static const char *const paths[] = {"/usr/bin/redis-server", NULL};
    const char *exe = need_program(paths, "redis-server", out);
    if (!exe) return;
    char *dir = make_tmpdir("redis");
    int portno = free_port(); /* redis-server takes port 0 as "no TCP" */
    char port[16];
    snprintf(port, sizeof port, "%d", portno);
    char *argv[] = {(char *)exe, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                    "--protected-mode", "no", "--daemonize", "no", "--dir", dir ? dir : "/tmp", "--logfile", "",
                    NULL};
    serve_and_measure(argv, true, portno, p, out);
}

static void run_nginx(const struct bench_params *p, struct bench_peer_out *out)
{
    static const char *const paths[] = {"/usr/sbin/nginx", "/usr/bin/nginx", NULL};
    const char *exe = need_program(paths, "nginx-light", out);
    if (!exe) return;
    char *dir = make_tmpdir("nginx");
    int portno = free_port();
    char conf[4200];
    if (!dir) {
        verdict(out, BENCH_PEER_FAILED, "cannot create a temporary directory: %s", strerror(errno));
        return;
    }
    snprintf(conf, sizeof conf, "%s/nginx.conf", dir);
    FILE *f = fopen(conf, "w");
    if (!f) {
        verdict(out, BENCH_PEER_FAILED, "%s: %s", conf, strerror(errno));
        return;
    }
    /* the page of servers/http.c, nothing logged, every temp path in dir */
    fprintf(f,
            "daemon off;\nworker_processes %d;\npid %s/nginx.pid;\nerror_log %s/error.log;\n"
            "events { worker_connections 4096; }\n"
            "http {\n  access_log off;\n  client_body_temp_path %s/body;\n  proxy_temp_path %s/proxy;\n"
            "  fastcgi_temp_path %s/fastcgi;\n  uwsgi_temp_path %s/uwsgi;\n  scgi_temp_path %s/scgi;\n"
            "  server {\n    listen 127.0.0.1:%d;\n    location / {\n      default_type text/plain;\n"
            "      return 200 \"Hello, World!\\n\";\n    }\n  }\n}\n",
            server_threads(), dir, dir, dir, dir, dir, dir, dir, portno);
    fclose(f);
    char *argv[] = {(char *)exe, "-p", dir, "-c", conf, "-e", "stderr", NULL};
    serve_and_measure(argv, true, portno, p, out);
}

/* PostgreSQL 15 in a temporary data directory, made once per bench run
 * (initdb, then pgbench -i at the scale), started for each run. As root it
 * runs as the postgres user, which refuses to run as root. */
static struct {
    bool tried, ready;
    char why[256];
    char dir[256];
    char bin[128];
} pg;

/* Runs argv to completion as PostgreSQL's user; its exit status, or -1. */
static int run_as_pg(char *const *argv, char *log, size_t len)
{
    struct proc p;
    if (proc_start_as(&p, argv, NULL, true, true, log, len) < 0) return -1;
    log[0] = '\0';
    proc_read(&p, log, len, bench_now() + 300);
    int st;
    bool ok = proc_wait(&p, bench_now() + 300, &st);
    return ok && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool pg_prepare(void)
{
    if (pg.tried) return pg.ready;
    pg.tried = true;
    snprintf(pg.bin, sizeof pg.bin, "/usr/lib/postgresql/15/bin");
    char initdb[256], log[2048];
    snprintf(initdb, sizeof initdb, "%s/initdb", pg.bin);
    if (access(initdb, X_OK) != 0) {
        snprintf(pg.why, sizeof pg.why, "%.100s is not installed (Debian package postgresql-15; scripts/deps-peers.sh)",
                 initdb);
        return false;
    }
    if (getuid() == 0) {
        struct passwd *pw = getpwnam("postgres");
        if (!pw) {
            snprintf(pg.why, sizeof pg.why, "postgres refuses to run as root and there is no 'postgres' user");
            return false;
        }
        pg_user.uid = pw->pw_uid;
        pg_user.gid = pw->pw_gid;
        pg_user.set = true;
    }
    char *dir = make_tmpdir("postgres");
    if (!dir || (pg_user.set && chown(dir, pg_user.uid, pg_user.gid) < 0)) {
        snprintf(pg.why, sizeof pg.why, "cannot make a data directory: %s", strerror(errno));
        return false;
    }
    snprintf(pg.dir, sizeof pg.dir, "%s/data", dir);
    char *iargv[] = {initdb, "-D", pg.dir, "-A", "trust", "-U", "postgres", "--no-sync", NULL};
    if (run_as_pg(iargv, log, sizeof log) != 0) {
        snprintf(pg.why, sizeof pg.why, "initdb failed: %.200s", log);
        return false;
    }
    pg.ready = true;
    return true;
}

/* Starts postgres on a free port; 0 or -1 with out set. */
static int pg_start(struct proc *srv, int *port, struct bench_peer_out *out)
{
    char exe[256], portbuf[16], sock[300];
    snprintf(exe, sizeof exe, "%s/postgres", pg.bin);
    *port = free_port();
    snprintf(portbuf, sizeof portbuf, "%d", *port);
    snprintf(sock, sizeof sock, "%.250s/..", pg.dir);
    char *argv[] = {exe, "-D", pg.dir, "-p", portbuf, "-k", sock, "-c", "listen_addresses=127.0.0.1", "-c",
                    "fsync=off", "-c", "synchronous_commit=off", "-c", "max_connections=300", NULL};
    char err[256];
    if (proc_start_as(srv, argv, server_cpus(), true, true, err, sizeof err) < 0) {
        verdict(out, BENCH_PEER_FAILED, "%s", err);
        return -1;
    }
    if (!wait_port(srv, *port)) {
        char tail[512] = "";
        proc_read(srv, tail, sizeof tail, bench_now() + 0.5);
        proc_stop(srv);
        verdict(out, BENCH_PEER_FAILED, "postgres did not start: %.200s", tail);
        return -1;
    }
    return 0;
}

static void run_postgres(const struct bench_params *p, struct bench_peer_out *out)
{
    if (cur.tpcb) {
        verdict(out, BENCH_PEER_SKIPPED, "PostgreSQL is shown for select-only (-S) only");
        return;
    }
    if (!pg_prepare()) {
        verdict(out, BENCH_PEER_SKIPPED, "%s", pg.why);
        return;
    }
    struct proc srv;
    int port;
    if (pg_start(&srv, &port, out) < 0) return;
    static int initialized_scale;
    int scale = cur.scale ? cur.scale : 1;
    if (initialized_scale != scale) { /* pgbench -i once per scale */
        char portbuf[16], sc[16], log[2048];
        snprintf(portbuf, sizeof portbuf, "%d", port);
        snprintf(sc, sizeof sc, "%d", scale);
        char *argv[] = {"/usr/bin/pgbench", "-i", "-q", "-s", sc, "-h", "127.0.0.1", "-p", portbuf, "-U", "postgres",
                        "postgres", NULL};
        if (run_as_pg(argv, log, sizeof log) != 0) {
            proc_stop(&srv);
            verdict(out, BENCH_PEER_FAILED, "pgbench -i failed: %.200s", log);
            return;
        }
        initialized_scale = scale;
    }
    client_against(&srv, port, p, "postgres", "postgres", out);
}

static void net_run_system(const char *peers_dir, const char *system, const struct bench_params *p,
                           struct bench_peer_out *out)
{
    memset(out, 0, sizeof *out);
    if (access(clients[cur.wl].path, X_OK) != 0) {
        verdict(out, BENCH_PEER_SKIPPED, "%s is not installed (Debian package %s)", clients[cur.wl].path, clients[cur.wl].package);
        return;
    }
    if (cur.wl == BENCH_NET_tbench && port_open(NET_TBENCH_PORT)) {
        verdict(out, BENCH_PEER_FAILED, "port %d is busy: another tbench server runs", NET_TBENCH_PORT);
        return;
    }
    if (!strcmp(system, "go"))
        run_go(peers_dir, p, out);
    else if (!strcmp(system, "tbench_srv"))
        run_tbench_srv(p, out);
    else if (!strcmp(system, "postgres"))
        run_postgres(p, out);
    else if (!strcmp(system, "redis-server"))
        run_redis_server(p, out);
    else
        run_nginx(p, out);
}

/* ---- the sweep (cmd_bench's front) ------------------------------------------------------------ */

static const char net_usage[] =
    "usage: usched bench tbench|pgbench|redis|http [options]\n"
    "\n"
    "Runs the real client against usched's server (and with --peers against the Go\n"
    "peer and the client's own server), over a sweep of client counts and both\n"
    "layouts, reporting the client's figure. Options of usched bench (--policy,\n"
    "--compare, --knobs, --runs, --duration, --peers, --json, ...) apply to every\n"
    "point; with neither --policy nor --compare, the default policy runs alone.\n"
    "\n"
    "      --clients LIST   client counts ('1,2,4,8'; default per workload: tbench\n"
    "                       1,2,4,8; pgbench 2,8; redis 50; http 10,50)\n"
    "      --layout L       unpinned, split (server on the first half of the CPUs,\n"
    "                       client on the rest) or both (default)\n"
    "      --pipeline LIST  redis: -P depths (default 1,16)\n"
    "      --script S       pgbench: select-only (default) or tpcb-like (usched only;\n"
    "                       the balances are checked after every run)\n"
    "      --scale N        pgbench: scale of the tables (default 1)\n";

static int net_depth; /* > 0 while the sweep calls cmd_bench */

#define net_usage_error(...) cli_usage_error("bench", "bench tbench", __VA_ARGS__)

/* Whether the option a of cmd_bench takes a value in the next argument. */
static bool takes_value(const char *a)
{
    static const char *const longs[] = {"policy", "knobs", "topology", "cpus", "n",  "duration",
                                        "runs",   "compare", "peers-dir", "clients", "layout",
                                        "pipeline", "script", "scale", "noise", "trace", "cutoff"};
    if (a[0] != '-' || a[1] == '\0') return false; /* "-" alone is a positional argument */
    if (a[1] != '-') return a[2] == '\0' && strchr("pktcndr", a[1]);
    if (strchr(a, '=')) return false;
    for (size_t i = 0; i < sizeof longs / sizeof longs[0]; i++)
        if (!strcmp(a + 2, longs[i])) return true;
    return false;
}

/* Parses "1,2,4" into v (at most max values in [1, limit]); the count or -1. */
static int parse_list(const char *opt, const char *s, long *v, int max, long limit)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 1 || x > limit || (*end && *end != ',') || n == max) {
            net_usage_error("%s '%s': a list of at most %d integers in [1, %ld]", opt, s, max, limit);
            return -1;
        }
        v[n++] = x;
        p = *end ? end + 1 : end;
    }
    if (!n) net_usage_error("%s: empty list", opt);
    return n ? n : -1;
}

static void cpus_text(const cpu_set_t *set, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, set)) snprintf(buf + strlen(buf), len - strlen(buf), "%s%d", buf[0] ? "," : "", c);
}

int bench_net_front(int argc, char **argv)
{
    if (net_depth) return -1;
    int wl = -1;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            if (takes_value(argv[i])) i++;
            continue;
        }
        for (int k = 0; k < BENCH_NET_COUNT; k++)
            if (!strcmp(argv[i], proto_of[k])) wl = k;
        break; /* the first positional argument is the workload */
    }
    if (wl < 0) return -1;
    live_guard();

    long clist[NET_MAX_POINTS], plist[NET_MAX_POINTS] = {1};
    int nc = 0, np = 1;
    bool unpinned = true, split = true, have_policy = false, json = false, tpcb = false;
    long scale = 0;
    /* argv, "--policy P", "--cpus LIST" (split layout), NULL */
    char **av = calloc((size_t)argc + 5, sizeof *av);
    int ac = 0;
    if (!av) return 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL;
        size_t klen = eq ? (size_t)(eq - a) : strlen(a);
        const char *val = eq ? eq + 1 : i + 1 < argc ? argv[i + 1] : NULL;
#define IS(name) (klen == strlen(name) && !strncmp(a, name, klen))
        bool own = IS("--clients") || IS("--layout") || IS("--pipeline") || IS("--script") || IS("--scale");
        if (own && !val) {
            free(av);
            return net_usage_error("option '%s' needs a value", a);
        }
        int r = 0;
        if (IS("--clients")) {
            r = (nc = parse_list("--clients", val, clist, NET_MAX_POINTS, 10000)) < 0;
        } else if (IS("--pipeline")) {
            r = (np = parse_list("--pipeline", val, plist, NET_MAX_POINTS, 1000)) < 0;
            if (!r && wl != BENCH_NET_redis) r = net_usage_error("--pipeline: only redis pipelines") != 0;
        } else if (IS("--layout")) {
            unpinned = !strcmp(val, "unpinned") || !strcmp(val, "both");
            split = !strcmp(val, "split") || !strcmp(val, "both");
            if (!unpinned && !split) r = net_usage_error("--layout '%s': unpinned, split or both", val) != 0;
        } else if (IS("--script")) {
            tpcb = !strcmp(val, "tpcb-like");
            if (!tpcb && strcmp(val, "select-only"))
                r = net_usage_error("--script '%s': select-only or tpcb-like", val) != 0;
            if (!r && wl != BENCH_NET_pgbench) r = net_usage_error("--script: only pgbench has scripts") != 0;
        } else if (IS("--scale")) {
            long s[1];
            r = parse_list("--scale", val, s, 1, 100) < 0;
            scale = s[0];
            if (!r && wl != BENCH_NET_pgbench) r = net_usage_error("--scale: only pgbench has tables") != 0;
        } else if (IS("-h") || IS("--help")) {
            fputs(net_usage, stdout);
            free(av);
            return 0;
        }
        if (r) {
            free(av);
            return 2;
        }
        if (own) {
            i += !eq;
            continue;
        }
        if (IS("-p") || IS("--policy") || IS("--compare")) have_policy = true;
        if (IS("-c") || IS("--cpus")) {
            free(av);
            return net_usage_error("%s: the layouts place server and client (--layout)", a);
        }
        if (IS("--json")) json = true;
#undef IS
        av[ac++] = argv[i];
    }
    if (!nc) {
        const long *d = wl == BENCH_NET_tbench ? tbench_sweep : wl == BENCH_NET_pgbench ? pgbench_sweep
                        : wl == BENCH_NET_redis ? redis_sweep : http_sweep;
        nc = wl == BENCH_NET_tbench ? 4 : wl == BENCH_NET_redis ? 1 : 2;
        memcpy(clist, d, (size_t)nc * sizeof *d);
    }
    bool have_pipeline = false;
    for (int i = 0; i < argc; i++) have_pipeline |= !strncmp(argv[i], "--pipeline", 10);
    if (wl == BENCH_NET_redis && !have_pipeline) { /* the default depths */
        np = 2;
        memcpy(plist, redis_pipelines, sizeof redis_pipelines);
    }
    const char *env = getenv("USCHED_POLICY");
    char *policy = (char *)(env && *env ? env : "usched");
    if (!have_policy) {
        av[ac++] = "--policy";
        av[ac++] = policy;
    }

    /* the halves of the CPUs this process may use */
    cpu_set_t all;
    CPU_ZERO(&all);
    memset(&cur, 0, sizeof cur);
    if (sched_getaffinity(0, sizeof all, &all) < 0) CPU_SET(0, &all);
    cur.ncpus = CPU_COUNT(&all);
    if (split && cur.ncpus < 2) {
        if (!unpinned) {
            free(av);
            return net_usage_error("--layout split needs at least 2 CPUs, this process has %d", cur.ncpus);
        }
        split = false;
    }
    for (int c = 0, k = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &all)) continue;
        CPU_SET(c, k < cur.ncpus / 2 ? &cur.server_cpus : &cur.client_cpus);
        k++;
    }
    cur.nserver_cpus = cur.ncpus / 2;
    snprintf(cur.server_dense, sizeof cur.server_dense, cur.nserver_cpus > 1 ? "0-%d" : "0", cur.nserver_cpus - 1);

    int rc = 0;
    for (int layout = 0; layout < 2 && !rc; layout++) {
        if (!(layout ? split : unpinned)) continue;
        for (int i = 0; i < nc && !rc; i++)
            for (int j = 0; j < np && !rc; j++) {
                cur.wl = wl;
                cur.clients = clist[i];
                cur.pipeline = plist[j];
                cur.split = layout == 1;
                cur.tpcb = tpcb;
                cur.scale = (int)scale;
                int n = ac;
                if (cur.split) {
                    av[n++] = "--cpus";
                    av[n++] = cur.server_dense;
                }
                av[n] = NULL;
                if (!json) {
                    char sc[256] = "", cc[256] = "";
                    cpus_text(&cur.server_cpus, sc, sizeof sc);
                    cpus_text(&cur.client_cpus, cc, sizeof cc);
                    printf("\n== %s: %ld client%s", proto_of[wl], cur.clients, cur.clients == 1 ? "" : "s");
                    if (wl == BENCH_NET_redis) printf(", pipeline %ld", cur.pipeline);
                    if (wl == BENCH_NET_pgbench) printf(", %s", tpcb ? "tpcb-like" : "select-only");
                    if (cur.split)
                        printf(", layout split (server on CPU %s, client on CPU %s) ==\n", sc, cc);
                    else
                        printf(", layout unpinned ==\n");
                    fflush(stdout);
                }
                /* getopt permutes its argv: each call gets a fresh copy */
                char **copy = malloc(((size_t)n + 1) * sizeof *copy);
                if (!copy) break;
                memcpy(copy, av, ((size_t)n + 1) * sizeof *copy);
                net_depth++;
                rc = cmd_bench(n, copy);
                net_depth--;
                free(copy);
            }
    }
    free(av);
    return rc;
}
