/*
 * usched bench tbench|pgbench|redis|http (bench_net.h): the sweep, the real
 * clients, and usched's servers in this process (the servers they are
 * compared on: bench_servers.c).
 *
 * One run: start the server (usched's in this process on the variant's
 * scheduler; or a peer's process), run the client for --duration seconds,
 * take the client's own figure (tbench MB/sec, pgbench tps, redis-benchmark
 * and wrk requests per second), stop the server. Layouts: "unpinned" lets
 * client and server float over every CPU; "split" puts the server on the
 * first half of the CPUs (usched: --cpus; a peer process: its affinity) and
 * the client on the rest, the seeds' "one server core" view.
 */
#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench_net.h"
#include "bench_proc.h"
#include "servers.h"

const char *const bench_net_names[BENCH_NET_COUNT] = {
#define X(name, summary, unit) #name,
    BENCH_NET_WORKLOADS(X)
#undef X
};

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

static void net_json(FILE *f);

const struct bench_systems bench_net_systems[BENCH_NET_COUNT] = {
#define X(name, summary, unit) \
    [BENCH_NET_##name] = {name##_systems, 2, bench_net_run_system, net_json},
    BENCH_NET_WORKLOADS(X)
#undef X
};

/* ---- the sweep and its current point ------------------------------------------------------ */

static const long tbench_sweep[] = {1, 2, 4, 8}; /* the seeds' tbench client counts */
static const long pgbench_sweep[] = {2, 8};      /* -c 2 -j 2 as seed 002, and more */
static const long redis_sweep[] = {50};          /* redis-benchmark's default -c */
static const long redis_pipelines[] = {1, 16};
static const long http_sweep[] = {10, 50};

struct bench_net_point bench_net_cur;
#define cur bench_net_cur /* the current point of the sweep */

/* The sweep: its layouts, client counts and pipeline depths. */
static struct {
    bool unpinned, split;
    const long *clients, *pipelines;
    int nclients, npipelines;
    cpu_set_t server_cpus, client_cpus;
    int nserver_cpus, ncpus;
} sweep;

static void net_json(FILE *f)
{
    fprintf(f, ",\"clients\":%ld,\"layout\":\"%s\"", cur.clients, cur.split ? "split" : "unpinned");
    if (cur.wl == BENCH_NET_redis) fprintf(f, ",\"pipeline\":%ld", cur.pipeline);
    if (cur.wl == BENCH_NET_pgbench) fprintf(f, ",\"script\":\"%s\"", cur.tpcb ? "tpcb-like" : "select-only");
}

int bench_net_find(const char *name)
{
    for (int k = 0; k < BENCH_NET_COUNT; k++)
        if (!strcmp(name, bench_net_names[k])) return k;
    return -1;
}

int bench_net_sweep(const struct bench_config *c, int *npoints, struct bench_error *e)
{
    static const long *const defaults[BENCH_NET_COUNT] = {tbench_sweep, pgbench_sweep, redis_sweep, http_sweep};
    static const int ndefaults[BENCH_NET_COUNT] = {4, 2, 1, 2};
    const struct bench_sweep *sw = &c->sweep;
    memset(&sweep, 0, sizeof sweep);
    sweep.unpinned = sw->unpinned;
    sweep.split = sw->split;
    sweep.clients = sw->nclients ? sw->clients : defaults[c->net];
    sweep.nclients = sw->nclients ? sw->nclients : ndefaults[c->net];
    static const long one[] = {1};
    sweep.pipelines = sw->npipelines ? sw->pipelines : c->net == BENCH_NET_redis ? redis_pipelines : one;
    sweep.npipelines = sw->npipelines ? sw->npipelines : c->net == BENCH_NET_redis ? 2 : 1;
    /* the halves of the CPUs this process may use */
    cpu_set_t all;
    CPU_ZERO(&all);
    if (sched_getaffinity(0, sizeof all, &all) < 0) CPU_SET(0, &all);
    sweep.ncpus = CPU_COUNT(&all);
    if (sweep.split && sweep.ncpus < 2) {
        if (!sweep.unpinned) {
            snprintf(e->msg, sizeof e->msg, "--layout split needs at least 2 CPUs, this process has %d",
                     sweep.ncpus);
            e->help = "bench tbench";
            return 2;
        }
        sweep.split = false;
    }
    for (int cpu = 0, k = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &all)) continue;
        CPU_SET(cpu, k < sweep.ncpus / 2 ? &sweep.server_cpus : &sweep.client_cpus);
        k++;
    }
    sweep.nserver_cpus = sweep.ncpus / 2;
    *npoints = ((int)sweep.unpinned + (int)sweep.split) * sweep.nclients * sweep.npipelines;
    return 0;
}

static void cpus_text(const cpu_set_t *set, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, set)) snprintf(buf + strlen(buf), len - strlen(buf), "%s%d", buf[0] ? "," : "", c);
}

const char *bench_net_point(const struct bench_config *c, int i)
{
    int per_layout = sweep.nclients * sweep.npipelines;
    memset(&cur, 0, sizeof cur);
    cur.wl = c->net;
    cur.split = !sweep.unpinned || i >= per_layout; /* unpinned first */
    i %= per_layout;
    cur.clients = sweep.clients[i / sweep.npipelines];
    cur.pipeline = sweep.pipelines[i % sweep.npipelines];
    cur.tpcb = c->sweep.tpcb;
    cur.scale = c->sweep.scale;
    cur.server_cpus = sweep.server_cpus;
    cur.client_cpus = sweep.client_cpus;
    cur.nserver_cpus = sweep.nserver_cpus;
    cur.ncpus = sweep.ncpus;
    snprintf(cur.server_dense, sizeof cur.server_dense, cur.nserver_cpus > 1 ? "0-%d" : "0", cur.nserver_cpus - 1);
    if (!c->json) {
        char sc[256] = "", cc[256] = "";
        cpus_text(&cur.server_cpus, sc, sizeof sc);
        cpus_text(&cur.client_cpus, cc, sizeof cc);
        printf("\n== %s: %ld client%s", bench_net_names[cur.wl], cur.clients, cur.clients == 1 ? "" : "s");
        if (cur.wl == BENCH_NET_redis) printf(", pipeline %ld", cur.pipeline);
        if (cur.wl == BENCH_NET_pgbench) printf(", %s", cur.tpcb ? "tpcb-like" : "select-only");
        if (cur.split)
            printf(", layout split (server on CPU %s, client on CPU %s) ==\n", sc, cc);
        else
            printf(", layout unpinned ==\n");
        fflush(stdout);
    }
    return cur.split ? cur.server_dense : NULL;
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

const char *bench_net_client_path(void)
{
    return clients[cur.wl].path;
}

const char *bench_net_client_package(void)
{
    return clients[cur.wl].package;
}

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

double bench_net_client(int port, double duration, const char *db, const char *user, char *err, size_t len)
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
    struct bench_proc p;
    const struct bench_proc_opts o = {.cpus = cur.split ? &cur.client_cpus : NULL, .capture = true, .fd3 = -1};
    if (bench_proc_start(&p, argv, &o, err, len) < 0) return NAN;
    static char out[65536];
    int st = 0;
    if (!bench_proc_collect(&p, out, sizeof out, bench_now() + duration + 60, &st)) {
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

/* One run of the current point against usched's server on s. */
static int net_usched(usched_t *s, const struct bench_params *p, struct bench_out *out)
{
    if (access(clients[cur.wl].path, X_OK) != 0) {
        snprintf(out->err, sizeof out->err, "%s is not installed (Debian package %s; scripts/deps-peers.sh)",
                 clients[cur.wl].path, clients[cur.wl].package);
        return -1;
    }
    struct srv_opts o = {.port = cur.wl == BENCH_NET_tbench ? BENCH_NET_TBENCH_PORT : 0, .scale = cur.scale};
    struct srv *v;
    char err[256];
    if (srv_start(s, srv_proto_find(bench_net_names[cur.wl]), &o, &v, err, sizeof err) < 0) {
        snprintf(out->err, sizeof out->err, "usched serve %s: %.200s", bench_net_names[cur.wl], err);
        return -1;
    }
    out->value = bench_net_client(srv_port(v), p->duration, "bench", "usched", out->err, sizeof out->err);
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

