/*
 * usched bench tbench|pgbench|redis|http --peers: the servers usched's are
 * compared on (bench_net.h), each a process of its own started, waited for
 * and stopped by bench_proc.h, at the current point of the sweep: the Go
 * peer (bench/peers/goserve), tbench_srv, redis-server, nginx (its
 * configuration written to a temporary directory) and PostgreSQL 15
 * (initdb and pgbench -i in a temporary data directory, once per bench).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_net.h"
#include "bench_proc.h"

#define cur bench_net_cur /* the current point of the sweep */

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
static void client_against(struct bench_proc *srv, int port, const struct bench_params *p, const char *db,
                           const char *user, struct bench_peer_out *out)
{
    char err[256] = "";
    if (!bench_port_wait(srv, port)) {
        char tail[512] = "";
        if (srv->out >= 0) bench_proc_read(srv, tail, sizeof tail, bench_now() + 0.5);
        bench_proc_stop(srv);
        verdict(out, BENCH_PEER_FAILED, "the server did not accept on port %d%s%.200s", port, tail[0] ? ": " : "", tail);
        return;
    }
    double v = bench_net_client(port, p->duration, db, user, err, sizeof err);
    bench_proc_stop(srv);
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
    struct bench_proc srv;
    char err[256];
    const struct bench_proc_opts o = {.cpus = server_cpus(), .capture = capture, .fd3 = -1};
    if (bench_proc_start(&srv, argv, &o, err, sizeof err) < 0) {
        verdict(out, BENCH_PEER_FAILED, "%s", err);
        return;
    }
    client_against(&srv, port, p, "bench", "usched", out);
}

/* The first of paths that is installed; NULL with out skipped otherwise. */
static const char *need_program(const char *const *paths, const char *package, struct bench_peer_out *out)
{
    const char *exe = bench_program_find(paths);
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
    int portno = cur.wl == BENCH_NET_tbench ? BENCH_NET_TBENCH_PORT : bench_port_free();
    snprintf(port, sizeof port, "%d", portno);
    snprintf(threads, sizeof threads, "%d", server_threads());
    snprintf(scale, sizeof scale, "%d", cur.scale ? cur.scale : 1);
    char *argv[] = {path, (char *)bench_net_names[cur.wl], "--port", port, "--threads", threads, "--scale", scale, NULL};
    serve_and_measure(argv, true, portno, p, out);
}

static void run_tbench_srv(const struct bench_params *p, struct bench_peer_out *out)
{
    static const char *const paths[] = {"/usr/bin/tbench_srv", NULL};
    const char *exe = need_program(paths, "dbench", out);
    if (!exe) return;
    char *argv[] = {(char *)exe, NULL};
    serve_and_measure(argv, false, BENCH_NET_TBENCH_PORT, p, out); /* it prints a mark per connection */
}

static void run_redis_server(const struct bench_params *p, struct bench_peer_out *out)
{
    static const char *const paths[] = {"/usr/bin/redis-server", NULL};
    const char *exe = need_program(paths, "redis-server", out);
    if (!exe) return;
    char *dir = bench_proc_tmpdir("redis");
    int portno = bench_port_free(); /* redis-server takes port 0 as "no TCP" */
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
    char *dir = bench_proc_tmpdir("nginx");
    int portno = bench_port_free();
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
    uid_t uid;
    gid_t gid;
    if (bench_proc_pg_user(&uid, &gid, pg.why, sizeof pg.why) < 0) return false;
    char *dir = bench_proc_tmpdir("postgres");
    if (!dir || (uid != (uid_t)-1 && chown(dir, uid, gid) < 0)) {
        snprintf(pg.why, sizeof pg.why, "cannot make a data directory: %s", strerror(errno));
        return false;
    }
    snprintf(pg.dir, sizeof pg.dir, "%s/data", dir);
    char *iargv[] = {initdb, "-D", pg.dir, "-A", "trust", "-U", "postgres", "--no-sync", NULL};
    if (bench_proc_run(iargv, true, log, sizeof log) != 0) {
        snprintf(pg.why, sizeof pg.why, "initdb failed: %.200s", log);
        return false;
    }
    pg.ready = true;
    return true;
}

/* Starts postgres on a free port; 0 or -1 with out set. */
static int pg_start(struct bench_proc *srv, int *port, struct bench_peer_out *out)
{
    char exe[256], portbuf[16], sock[300];
    snprintf(exe, sizeof exe, "%s/postgres", pg.bin);
    *port = bench_port_free();
    snprintf(portbuf, sizeof portbuf, "%d", *port);
    snprintf(sock, sizeof sock, "%.250s/..", pg.dir);
    char *argv[] = {exe, "-D", pg.dir, "-p", portbuf, "-k", sock, "-c", "listen_addresses=127.0.0.1", "-c",
                    "fsync=off", "-c", "synchronous_commit=off", "-c", "max_connections=300", NULL};
    char err[256];
    const struct bench_proc_opts o = {.cpus = server_cpus(), .capture = true, .fd3 = -1, .as_pg = true};
    if (bench_proc_start(srv, argv, &o, err, sizeof err) < 0) {
        verdict(out, BENCH_PEER_FAILED, "%s", err);
        return -1;
    }
    if (!bench_port_wait(srv, *port)) {
        char tail[512] = "";
        bench_proc_read(srv, tail, sizeof tail, bench_now() + 0.5);
        bench_proc_stop(srv);
        verdict(out, BENCH_PEER_FAILED, "postgres did not start: %.200s", tail);
        return -1;
    }
    /* The postmaster listens before it accepts: while it starts up (after
     * a stop that ran out of time, it replays its log first) a connection
     * is refused with "the database system is starting up". pg_isready
     * answers 0 once it accepts, 1 while it rejects. */
    char ready[256], log[512];
    snprintf(ready, sizeof ready, "%s/pg_isready", pg.bin);
    char *rargv[] = {ready, "-q", "-h", "127.0.0.1", "-p", portbuf, "-U", "postgres", "-t", "5", NULL};
    int rc = -1;
    for (double deadline = bench_now() + 60; bench_now() < deadline;) {
        if ((rc = bench_proc_run(rargv, false, log, sizeof log)) != 1) break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (rc != 0) {
        char tail[512] = "";
        bench_proc_read(srv, tail, sizeof tail, bench_now() + 0.5);
        bench_proc_stop(srv);
        verdict(out, BENCH_PEER_FAILED, "postgres did not accept connections (pg_isready: %d): %.200s", rc, tail);
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
    struct bench_proc srv;
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
        if (bench_proc_run(argv, true, log, sizeof log) != 0) {
            bench_proc_stop(&srv);
            verdict(out, BENCH_PEER_FAILED, "pgbench -i failed: %.200s", log);
            return;
        }
        initialized_scale = scale;
    }
    client_against(&srv, port, p, "postgres", "postgres", out);
}

void bench_net_run_system(const char *peers_dir, const char *system, const struct bench_params *p,
                           struct bench_peer_out *out)
{
    memset(out, 0, sizeof *out);
    if (access(bench_net_client_path(), X_OK) != 0) {
        verdict(out, BENCH_PEER_SKIPPED, "%s is not installed (Debian package %s)", bench_net_client_path(),
                bench_net_client_package());
        return;
    }
    if (cur.wl == BENCH_NET_tbench && bench_port_open(BENCH_NET_TBENCH_PORT)) {
        verdict(out, BENCH_PEER_FAILED, "port %d is busy: another tbench server runs", BENCH_NET_TBENCH_PORT);
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

