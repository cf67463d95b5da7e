/*
 * usched serve PROTOCOL [--port N] [--host ADDR] [--scale N] [--policy P]
 *              [--knobs K] [--topology T] [--emulate] [--cpus LIST] [--duration SEC]
 *              [--max-output BYTES] [--idle-timeout SEC] [--max-conns N]
 *
 * Runs one of the servers of servers/ on usched (a fiber per connection)
 * until SIGINT or SIGTERM, or for --duration seconds. Once the socket
 * accepts, prints one line
 *   usched serve PROTOCOL: listening on HOST:PORT (policy P, N CPUs)
 * on stdout, so a script can read the port chosen for --port 0. On the way
 * out it stops accepting, ends the connections, checks the protocol's
 * state (pgbench: the balances agree), prints the requests served and the
 * decision counters, and exits.
 *
 * Exit status: 0 stopped cleanly; 1 the server could not start (port in
 * use, bad setting) or its state check failed; 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "servers.h"
#include "usched.h"
#include "cli_opts.h"

int cmd_serve(int argc, char **argv);

static const char serve_usage[] =
    "usage: usched serve PROTOCOL [options]\n"
    "\n"
    "Runs a server on usched, a fiber per connection, until SIGINT or SIGTERM.\n"
    "Point the protocol's own clients at it (docs/servers.md).\n"
    "\n"
    "  -P, --port N         port (default: the protocol's; 0: any free port, printed)\n"
    "  -H, --host ADDR      numeric address to bind (default 127.0.0.1)\n"
    "  -s, --scale N        pgbench: scale of the tables (default 1: 100,000 accounts)\n"
    "  -p, --policy P       placement policy (see usched policies)\n"
    "  -k, --knobs K        knobs, 'smt=0,affine=1' (see usched knobs)\n"
    "  -t, --topology T     topology: hwloc synthetic string, XML file or captured root\n"
    "  -e, --emulate        SMT emulation: each core of --topology on one real CPU\n"
    "                       (docs/emulation.md)\n"
    "  -c, --cpus LIST      run on these CPUs only ('0-3')\n"
    "  -d, --duration SEC   stop after SEC seconds\n"
    "      --max-output BYTES  unsent output at which a connection is no longer read\n"
    "                       until it has gone (default 262144)\n"
    "      --idle-timeout SEC  close a connection that completes no request, or does not\n"
    "                       read its replies, for SEC seconds (default 300; 0: never);\n"
    "                       an open pgbench transaction rolls back\n"
    "      --max-conns N    connections served at once (default 10000); more are refused\n"
    "                       with the protocol's error (redis -ERR, PostgreSQL 53300,\n"
    "                       HTTP 503)\n"
    "  -T, --trace FILE     write a trace to FILE when the server stops (docs/trace.md;\n"
    "                       read it with usched trace FILE)\n"
    "  -q, --quiet          no statistics at the end\n"
    "  -h, --help           print this help\n"
    "\n"
    "Protocols:\n";

#define serve_error(...) cli_usage_error("serve", "serve", __VA_ARGS__)
#define parse_int(...) cli_parse_long("serve", "serve", __VA_ARGS__)

enum { OPT_MAX_OUTPUT = 256, OPT_IDLE_TIMEOUT, OPT_MAX_CONNS };

int cmd_serve(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'P'},     {"host", required_argument, NULL, 'H'},
        {"scale", required_argument, NULL, 's'},    {"policy", required_argument, NULL, 'p'},
        {"knobs", required_argument, NULL, 'k'},    {"topology", required_argument, NULL, 't'},
        {"cpus", required_argument, NULL, 'c'},     {"duration", required_argument, NULL, 'd'},
        {"quiet", no_argument, NULL, 'q'},          {"help", no_argument, NULL, 'h'},
        {"emulate", no_argument, NULL, 'e'},        {"trace", required_argument, NULL, 'T'},
        {"max-output", required_argument, NULL, OPT_MAX_OUTPUT},
        {"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
        {"max-conns", required_argument, NULL, OPT_MAX_CONNS},
        {NULL, 0, NULL, 0},
    };
    struct srv_opts so = {.port = -1};
    const char *settings[6][2] = {{"policy", NULL}, {"knobs", NULL}, {"topology", NULL}, {"cpus", NULL},
                                  {"emulate", NULL}, {"trace", NULL}};
    double duration = 0;
    bool quiet = false;
    long n = 0;
    int o;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":P:H:s:p:k:t:c:d:qheT:", opts, NULL)) != -1) {
        switch (o) {
        case 'P':
            if (parse_int("--port", optarg, 0, 65535, &n)) return 2;
            so.port = (int)n;
            break;
        case 'H': so.host = optarg; break;
        case 's':
            if (parse_int("--scale", optarg, 1, 100, &n)) return 2;
            so.scale = (int)n;
            break;
        case 'p': settings[0][1] = optarg; break;
        case 'k': settings[1][1] = optarg; break;
        case 't': settings[2][1] = optarg; break;
        case 'c': settings[3][1] = optarg; break;
        case 'e': settings[4][1] = "1"; break;
        case 'T': settings[5][1] = optarg; break;
        case 'd': {
            char *end;
            errno = 0;
            duration = strtod(optarg, &end);
            if (!*optarg || *end || errno == ERANGE || !(duration > 0 && duration <= 1e7))
                return serve_error("--duration '%s': must be seconds in (0, 10000000]", optarg);
            break;
        }
        case OPT_MAX_OUTPUT:
            if (parse_int("--max-output", optarg, 1024, 1L << 30, &n)) return 2;
            so.max_output = (size_t)n;
            break;
        case OPT_IDLE_TIMEOUT: {
            char *end;
            errno = 0;
            double t = strtod(optarg, &end);
            if (!*optarg || *end || errno == ERANGE || !(t >= 0 && t <= 1e6))
                return serve_error("--idle-timeout '%s': must be seconds in [0, 1000000] (0: never)", optarg);
            so.idle_timeout_ms = t == 0 ? -1 : t * 1000 < 1 ? 1 : (long)(t * 1000);
            break;
        }
        case OPT_MAX_CONNS:
            if (parse_int("--max-conns", optarg, 1, 1000000, &n)) return 2;
            so.max_conns = (int)n;
            break;
        case 'q': quiet = true; break;
        case 'h':
            fputs(serve_usage, stdout);
            for (int i = 0; i < srv_nprotos; i++)
                printf("  %-9s %s (port %d)\n", srv_protos[i]->name, srv_protos[i]->summary,
                       srv_protos[i]->default_port);
            return 0;
        case ':': return serve_error("option '%s' needs a value", argv[optind - 1]);
        default: return serve_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc) return serve_error("no protocol given");
    const char *name = argv[optind++];
    if (optind < argc) return serve_error("unexpected argument '%s'", argv[optind]);
    const struct srv_proto *proto = srv_proto_find(name);
    if (!proto) {
        char names[128] = "";
        for (int i = 0; i < srv_nprotos; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     srv_protos[i]->name);
        return serve_error("protocol '%s': unknown (%s)", name, names);
    }
    if (so.scale && strcmp(name, "pgbench")) return serve_error("--scale: only pgbench has tables");

    usched_t *s;
    if (usched_create(&s) < 0) {
        fprintf(stderr, "usched serve: %s\n", usched_last_error());
        return 2;
    }
    for (int i = 0; i < 6; i++)
        if (settings[i][1] && usched_set(s, settings[i][0], settings[i][1]) < 0) {
            serve_error("%s", usched_last_error());
            usched_destroy(s);
            return 2;
        }
    /* The workers inherit this mask: SIGINT and SIGTERM reach only sigwait below. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    if (usched_start(s) < 0) {
        fprintf(stderr, "usched serve: start: %s\n", usched_last_error());
        usched_destroy(s);
        return 1;
    }
    struct srv *v;
    char err[256];
    int r = srv_start(s, proto, &so, &v, err, sizeof err);
    if (r < 0) {
        fprintf(stderr, "usched serve %s: %s\n", name, err);
        usched_destroy(s);
        return r == -EINVAL ? 2 : 1; /* a bad --host is bad usage; a busy port is not */
    }
    const char *host = so.host ? so.host : "127.0.0.1";
    bool v6 = strchr(host, ':') != NULL;
    printf("usched serve %s: listening on %s%s%s:%d (%d CPU%s)\n", name, v6 ? "[" : "", host, v6 ? "]" : "",
           srv_port(v), usched_ncpus(s), usched_ncpus(s) == 1 ? "" : "s");
    fflush(stdout);

    if (duration > 0) {
        struct timespec ts = {(time_t)duration, (long)((duration - (double)(time_t)duration) * 1e9)};
        while (sigtimedwait(&stop, NULL, &ts) < 0 && errno == EINTR) {
        }
    } else {
        int sig;
        sigwait(&stop, &sig);
    }

    int rc = 0;
    srv_stop(v);
    char msg[300];
    if (srv_check(v, msg, sizeof msg) < 0) {
        fprintf(stderr, "usched serve %s: check failed: %s\n", name, msg);
        rc = 1;
    } else if (msg[0]) {
        printf("usched serve %s: %s\n", name, msg);
    }
    if (!quiet) {
        printf("usched serve %s: %llu requests on %llu connections\n", name,
               (unsigned long long)srv_requests(v), (unsigned long long)srv_connections(v));
        struct srv_stats st;
        srv_stats(v, &st);
        printf("usched serve %s: %llu refused, %llu timed out, %llu out of memory; most unsent output "
               "%zu bytes, most buffer memory %zu bytes on one connection\n",
               name, (unsigned long long)st.refused, (unsigned long long)st.timed_out,
               (unsigned long long)st.failed, st.out_hwm, st.buf_hwm);
        usched_stats_print(s, stdout);
    }
    srv_free(v);
    if (usched_destroy(s) < 0) {
        fprintf(stderr, "usched serve: destroy: %s\n", usched_last_error());
        rc = 1;
    }
    return fflush(stdout) == 0 ? rc : 1;
}
