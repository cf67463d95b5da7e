/*
 * usched bench's command line (bench.h): one option table, read by one
 * parser into one struct bench_config, for every workload. The network
 * workloads (tbench, pgbench, redis, http) have options of their own
 * (--layout, --pipeline, --script, --scale, and --clients as a list): the
 * workload is found first, by a pass of getopt over a copy of the command
 * line with the same table, so that each option is then read, in order,
 * knowing which workload it is for.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_net.h"
#include "bench_noise.h"
#include "harness.h"

static const char bench_usage[] =
    "usage: usched bench [WORKLOAD] [options]\n"
    "\n"
    "Runs WORKLOAD (default: select) on usched, comparing variants side by side.\n"
    "With no options it compares every policy on select, 3 runs of 3 s each.\n"
    "\n"
    "  -p, --policy P       policy to run (default: compare all policies)\n"
    "  -k, --knobs K        knobs for every variant, 'smt=0,affine=1'\n"
    "  -t, --topology T     topology: hwloc synthetic string, XML file or captured root\n"
    "  -c, --cpus LIST      restrict to these CPUs ('0-7,16')\n"
    "  -e, --emulate        SMT emulation: each core of --topology on one real CPU,\n"
    "                       its PUs sharing it (docs/emulation.md)\n"
    "      --compare SPEC   variants to compare: 'smt=1;smt=0' (';' separates variants,\n"
    "                       each a list of policy=, topology=, cpus=, knobs=, pin=,\n"
    "                       fresh= or knob settings) or 'policy=usched,linux' (one\n"
    "                       key, its values)\n"
    "      --peers          also run the peer programs (Go, oneTBB, ...) installed\n"
    "      --peers-dir DIR  where the peers are (default: $USCHED_PEERS_DIR, else the\n"
    "                       'peers' folder beside this executable)\n"
    "  -r, --runs N         runs per variant (default 3)\n"
    "  -d, --duration SEC   length of a timed run (pairs, select, pgsim; default 3), cap of\n"
    "                       pingpong and spawn\n"
    "  -n, --n N            workload size (fib: n; skynet: leaves, a power of 10;\n"
    "                       build: jobs; pingpong: round trips; spawn, yield: ops)\n"
    "      --cutoff N       fib: calls below N run serially (default 12; the peers\n"
    "                       get the same); a small N makes fib spawn-bound\n"
    "      --no-inline      fib, skynet, spawn: join each child only after it started,\n"
    "                       so that every child runs as a fiber on its own stack (by\n"
    "                       default a join of an unstarted child runs it inline)\n"
    "      --call           fib, skynet, spawn: spawn with usched_spawn_call, which runs\n"
    "                       a child at once as a call when 64 fibers wait on the CPU\n"
    "                       (as OpenMP runs a task undeferred)\n"
    "      --fresh          run each usched run in a new process (this executable\n"
    "                       re-executed), as the peers run; also a --compare key\n"
    "                       (fresh=0, fresh=1)\n"
    "      --clients N      select: client fibers (default 2 x CPUs); pgsim: client and\n"
    "                       backend pairs (default 2)\n"
    "      --json           one JSON object per run on stdout instead of the report\n"
    "      --progress       a progress line on stderr even when it is not a terminal\n"
    "      --trace FILE     write a trace of each usched run (docs/trace.md; read it\n"
    "                       with usched trace FILE): FILE itself for a single run,\n"
    "                       else FILE-<variant>-<run> before the extension; a Go\n"
    "                       peer writes Go's execution trace, FILE-<variant>-<run>.gotrace\n"
    "      --noise N        N busy processes beside every run (a noisy neighbour;\n"
    "                       they start before the first run, die after the last)\n"
    "      --warmup MS      before each run, spin every CPU this process may use for\n"
    "                       MS milliseconds (default 0; a virtual machine's CPU that\n"
    "                       idled runs slower for a few hundred ms once work returns)\n"
    "      --no-probe       skip the cross-CPU probe before each run (a cache line\n"
    "                       passed between the first two CPUs; its round trip shows\n"
    "                       where a virtual machine's host placed them)\n"
    "  -h, --help           print this help\n"
    "\n"
    "Workloads:\n";

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

#define DEFAULT_RUNS 3
#define DEFAULT_DURATION 3.0
#define MAX_RUNS 1000

/* The help named by the usage errors of the network workloads' options. */
#define NET_HELP "bench tbench"

enum {
    O_COMPARE = 256, O_PEERS, O_PEERS_DIR, O_JSON, O_CLIENTS, O_PROGRESS, O_NOISE, O_TRACE, O_NO_PROBE,
    O_CUTOFF, O_NO_INLINE, O_FRESH, O_FRESH_CHILD, O_WARMUP, O_CALL,
    /* the network workloads' own */
    O_LAYOUT, O_PIPELINE, O_SCRIPT, O_SCALE,
};

static const char short_opts[] = ":p:k:t:c:n:d:r:eh";
static const struct option long_opts[] = {
    {"policy", required_argument, NULL, 'p'},     {"knobs", required_argument, NULL, 'k'},
    {"topology", required_argument, NULL, 't'},   {"cpus", required_argument, NULL, 'c'},
    {"clients", required_argument, NULL, O_CLIENTS}, {"n", required_argument, NULL, 'n'},
    {"duration", required_argument, NULL, 'd'},   {"runs", required_argument, NULL, 'r'},
    {"compare", required_argument, NULL, O_COMPARE}, {"peers", no_argument, NULL, O_PEERS},
    {"peers-dir", required_argument, NULL, O_PEERS_DIR}, {"json", no_argument, NULL, O_JSON},
    {"progress", no_argument, NULL, O_PROGRESS}, {"emulate", no_argument, NULL, 'e'},
    {"trace", required_argument, NULL, O_TRACE},
    {"noise", required_argument, NULL, O_NOISE}, {"no-probe", no_argument, NULL, O_NO_PROBE},
    {"warmup", required_argument, NULL, O_WARMUP}, {"call", no_argument, NULL, O_CALL},
    {"cutoff", required_argument, NULL, O_CUTOFF}, {"no-inline", no_argument, NULL, O_NO_INLINE},
    {"fresh", no_argument, NULL, O_FRESH},       {"fresh-child", required_argument, NULL, O_FRESH_CHILD},
    {"layout", required_argument, NULL, O_LAYOUT}, {"pipeline", required_argument, NULL, O_PIPELINE},
    {"script", required_argument, NULL, O_SCRIPT}, {"scale", required_argument, NULL, O_SCALE},
    {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0},
};

static bool net_only(int o)
{
    return o == O_LAYOUT || o == O_PIPELINE || o == O_SCRIPT || o == O_SCALE;
}

int bench_usage_error(struct bench_error *e, const char *help, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->help = help;
    return 2;
}

/* The decimal integer s of option opt, in [min, max]: 0, or 2 with e set. */
static int parse_long(struct bench_error *e, const char *opt, const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno == ERANGE) return bench_usage_error(e, "bench", "%s '%s': not an integer", opt, s);
    if (v < min || v > max) return bench_usage_error(e, "bench", "%s '%s': must be in [%ld, %ld]", opt, s, min, max);
    *out = v;
    return 0;
}

/* Parses "1,2,4" into v (at most max values in [1, limit]): the count, or
 * -1 with e set. */
static int parse_list(struct bench_error *e, const char *opt, const char *s, long *v, int max, long limit)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 1 || x > limit || (*end && *end != ',') || n == max) {
            bench_usage_error(e, NET_HELP, "%s '%s': a list of at most %d integers in [1, %ld]", opt, s, max, limit);
            return -1;
        }
        v[n++] = x;
        p = *end ? end + 1 : end;
    }
    if (!n) bench_usage_error(e, NET_HELP, "%s: empty list", opt);
    return n ? n : -1;
}

void bench_settings_append(char *buf, size_t len, const char *sep, const char *s)
{
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, "%s%s", n && *s ? sep : "", s);
}

void bench_help(const struct bench_config *c, FILE *f)
{
    if (c->net >= 0) {
        fputs(net_usage, f);
        return;
    }
    fputs(bench_usage, f);
    for (int i = 0; i < bench_nworkloads; i++)
        fprintf(f, "  %-9s %s (%s)\n", bench_workloads[i].name, bench_workloads[i].summary,
                bench_workloads[i].info->unit);
}

/* The workload named on the command line: its first operand, found by
 * getopt over a copy of argv with the option table (so an option's value is
 * never taken for it). */
static const char *find_workload(int argc, char **argv)
{
    char **copy = malloc(((size_t)argc + 1) * sizeof *copy);
    const char *name = "select";
    if (!copy) return name;
    memcpy(copy, argv, (size_t)argc * sizeof *copy);
    copy[argc] = NULL;
    opterr = 0;
    optind = 0;
    while (getopt_long(argc, copy, short_opts, long_opts, NULL) != -1) {
    }
    if (optind < argc) name = copy[optind];
    free(copy);
    return name;
}

/* The option just read, as written: for an error naming it ("--cpus",
 * "-c", "--cpus=0"); its value, if separate, is the argument after it. */
static const char *option_token(char **argv)
{
    const char *last = argv[optind - 1];
    return optarg && optarg == last && optind >= 2 ? argv[optind - 2] : last;
}

/* Checks --n against the workload's rules (those of the peers' protocol). */
static int check_n(const struct bench_config *c, long n, bool have_n, struct bench_error *e)
{
    const char *w = c->wl->name;
    if (!c->wl->info->default_n) {
        if (have_n) return bench_usage_error(e, "bench", "--n: %s has no size, it runs for --duration", w);
        return 0;
    }
    if (!strcmp(w, "fib") && n > 90) return bench_usage_error(e, "bench", "--n '%ld': fib(N) needs N <= 90", n);
    if (!strcmp(w, "build") && n > 10000000)
        return bench_usage_error(e, "bench", "--n '%ld': build needs at most 10000000 jobs", n);
    if (!strcmp(w, "skynet")) {
        long x = n;
        while (x > 1 && x % 10 == 0) x /= 10;
        if (x != 1 || n < 10)
            return bench_usage_error(e, "bench", "--n '%ld': skynet leaves must be a power of 10, >= 10", n);
    }
    return 0;
}

/* One option of the network workloads (c->net >= 0). */
static int parse_net_option(struct bench_config *c, int o, const char *val, struct bench_error *e)
{
    struct bench_sweep *sw = &c->sweep;
    switch (o) {
    case O_CLIENTS:
        sw->nclients = parse_list(e, "--clients", val, sw->clients, BENCH_NET_MAX_POINTS, 10000);
        return sw->nclients < 0 ? 2 : 0;
    case O_PIPELINE:
        sw->npipelines = parse_list(e, "--pipeline", val, sw->pipelines, BENCH_NET_MAX_POINTS, 1000);
        if (sw->npipelines < 0) return 2;
        if (c->net != BENCH_NET_redis) return bench_usage_error(e, NET_HELP, "--pipeline: only redis pipelines");
        return 0;
    case O_LAYOUT:
        sw->unpinned = !strcmp(val, "unpinned") || !strcmp(val, "both");
        sw->split = !strcmp(val, "split") || !strcmp(val, "both");
        if (!sw->unpinned && !sw->split) return bench_usage_error(e, NET_HELP, "--layout '%s': unpinned, split or both", val);
        return 0;
    case O_SCRIPT:
        sw->tpcb = !strcmp(val, "tpcb-like");
        if (!sw->tpcb && strcmp(val, "select-only"))
            return bench_usage_error(e, NET_HELP, "--script '%s': select-only or tpcb-like", val);
        if (c->net != BENCH_NET_pgbench) return bench_usage_error(e, NET_HELP, "--script: only pgbench has scripts");
        return 0;
    default: { /* O_SCALE */
        long s[1];
        if (parse_list(e, "--scale", val, s, 1, 100) < 0) return 2;
        sw->scale = (int)s[0];
        if (c->net != BENCH_NET_pgbench) return bench_usage_error(e, NET_HELP, "--scale: only pgbench has tables");
        return 0;
    }
    }
}

/* The integer options, checked against the workload once all are read. */
struct ints {
    long n, runs, clients, cutoff, noise;
    bool have_n;
};

/* One option of the table: 0, or 2 with e set. */
static int parse_option(struct bench_config *c, int o, char **argv, struct ints *v, struct bench_error *e)
{
    struct bench_settings *b = &c->base;
    if (c->net >= 0 && (o == O_CLIENTS || net_only(o))) return parse_net_option(c, o, optarg, e);
    switch (o) {
    case 'p': snprintf(b->policy, sizeof b->policy, "%s", optarg); break;
    case 'k': bench_settings_append(b->knobs, sizeof b->knobs, ",", optarg); break;
    case 't':
        snprintf(b->topology, sizeof b->topology, "%s", optarg);
        b->has_topology = true;
        break;
    case 'c':
        if (c->net >= 0)
            return bench_usage_error(e, NET_HELP, "%s: the layouts place server and client (--layout)", option_token(argv));
        snprintf(b->cpus, sizeof b->cpus, "%s", optarg);
        b->has_cpus = true;
        break;
    case O_CLIENTS: return parse_long(e, "--clients", optarg, 1, 100000, &v->clients);
    case 'n':
        v->have_n = true;
        return parse_long(e, "--n", optarg, 1, LONG_MAX / 2, &v->n);
    case 'd': {
        char *end;
        errno = 0;
        c->p.duration = strtod(optarg, &end);
        if (!*optarg || *end || errno == ERANGE || !(c->p.duration > 0 && c->p.duration <= 86400))
            return bench_usage_error(e, "bench", "--duration '%s': must be seconds in (0, 86400]", optarg);
        c->p.have_duration = 1;
        break;
    }
    case 'r': return parse_long(e, "--runs", optarg, 1, MAX_RUNS, &v->runs);
    case O_COMPARE: c->compare = optarg; break;
    case O_PEERS: c->peers = true; break;
    case O_PEERS_DIR: c->peers_dir_opt = optarg; break;
    case O_JSON: c->json = true; break;
    case O_PROGRESS: c->progress = true; break;
    case O_TRACE: c->trace = optarg; break;
    case O_NO_PROBE: c->probe = false; break;
    case O_WARMUP: {
        long ms;
        int rc = parse_long(e, "--warmup", optarg, 0, 60000, &ms);
        if (rc) return rc;
        c->warmup_ms = (int)ms;
        break;
    }
    case O_CUTOFF: return parse_long(e, "--cutoff", optarg, 2, 60, &v->cutoff);
    case O_NO_INLINE: c->p.no_inline = 1; break;
    case O_CALL: c->p.call = 1; break;
    case O_FRESH: b->fresh = true; break;
    case O_FRESH_CHILD:
        if (sscanf(optarg, "%d,%d", &c->child_variant, &c->child_run) != 2 || c->child_variant < 0 ||
            c->child_run < 0)
            return bench_usage_error(e, "bench", "--fresh-child '%s': internal option, VARIANT,RUN", optarg);
        break;
    case O_NOISE: return parse_long(e, "--noise", optarg, 0, BENCH_NOISE_MAX, &v->noise);
    case 'e': b->emulate = true; break;
    default: /* the network workloads' options, for another workload */
        return bench_usage_error(e, "bench", "unknown option '%s'", option_token(argv));
    }
    return 0;
}

/* What the options mean together, once all are read. */
static int check_config(struct bench_config *c, const char *wname, const struct ints *v, struct bench_error *e)
{
    long clients = v->clients, cutoff = v->cutoff;
    bool have_n = v->have_n;
    if (c->net < 0 && clients && strcmp(c->wl->name, "select") && strcmp(c->wl->name, "pgsim"))
        return bench_usage_error(e, "bench", "--clients: only select and pgsim have clients, not %s", wname);
    if (cutoff && c->wl->run != bench_fib)
        return bench_usage_error(e, "bench", "--cutoff: only fib has a cutoff, not %s", wname);
    if (cutoff) c->p.cutoff = (int)cutoff;
    if (c->p.no_inline && c->wl->run != bench_fib && c->wl->run != bench_skynet && c->wl->run != bench_spawn)
        return bench_usage_error(e, "bench", "--no-inline: only fib, skynet and spawn join children, not %s", wname);
    if (c->p.call && c->wl->run != bench_fib && c->wl->run != bench_skynet && c->wl->run != bench_spawn)
        return bench_usage_error(e, "bench", "--call: only fib, skynet and spawn spawn children, not %s", wname);
    if (c->p.call && c->p.no_inline)
        return bench_usage_error(e, "bench", "--call and --no-inline: a child run as a call has no fiber to wait for");
    c->p.n = have_n ? v->n : c->wl->info->default_n;
    if (check_n(c, c->p.n, have_n, e)) return 2;
    if (c->peers_dir_opt && !c->peers) return bench_usage_error(e, "bench", "--peers-dir needs --peers");
    c->p.clients = c->net < 0 ? (int)clients : 0;
    c->runs = (int)v->runs;
    c->noise = (int)v->noise;
    if (c->net >= 0 && !c->base.policy[0] && !c->compare) {
        /* the default policy alone, not every policy: a sweep is long */
        const char *env = getenv("USCHED_POLICY");
        snprintf(c->base.policy, sizeof c->base.policy, "%s", env && *env ? env : "usched");
    }
    if (c->net >= 0 && !c->sweep.unpinned && !c->sweep.split) c->sweep.unpinned = c->sweep.split = true;
    return 0;
}

int bench_config_parse(struct bench_config *c, int argc, char **argv, struct bench_error *e)
{
    struct ints v = {.runs = DEFAULT_RUNS};
    memset(c, 0, sizeof *c);
    c->child_variant = c->child_run = -1;
    c->p.duration = DEFAULT_DURATION;
    c->p.seed = PEER_SEED;
    c->p.cutoff = PEER_FIB_CUTOFF;
    c->probe = true;
    /* the command line as given (getopt permutes argv), for --fresh */
    if (!(c->argv = malloc(((size_t)argc + 1) * sizeof *c->argv)))
        return bench_usage_error(e, "bench", "out of memory");
    memcpy(c->argv, argv, (size_t)argc * sizeof *argv);
    c->argv[argc] = NULL;
    c->argc = argc;
    const char *wname = find_workload(argc, argv);
    c->net = bench_net_find(wname);
    int o;
    opterr = 0;
    optind = 0;
    while ((o = getopt_long(argc, argv, short_opts, long_opts, NULL)) != -1) {
        if (o == 'h') {
            c->help = true;
            return 0;
        }
        if (o == ':') {
            bool net = c->net >= 0 && (optopt == O_CLIENTS || net_only(optopt));
            if (net_only(optopt) && c->net < 0)
                return bench_usage_error(e, "bench", "unknown option '%s'", argv[optind - 1]);
            if (optopt == 'c' && c->net >= 0)
                return bench_usage_error(e, NET_HELP, "%s: the layouts place server and client (--layout)",
                                         argv[optind - 1]);
            return bench_usage_error(e, net ? NET_HELP : "bench", "option '%s' needs a value", argv[optind - 1]);
        }
        if (o == '?') return bench_usage_error(e, "bench", "unknown option '%s'", argv[optind - 1]);
        if (parse_option(c, o, argv, &v, e)) return 2;
    }
    if (optind < argc) optind++; /* the workload */
    if (optind < argc) return bench_usage_error(e, "bench", "unexpected argument '%s'", argv[optind]);
    if (!(c->wl = bench_workload_find(wname))) {
        char names[256] = "";
        for (int i = 0; i < bench_nworkloads; i++)
            bench_settings_append(names, sizeof names, ", ", bench_workloads[i].name);
        return bench_usage_error(e, "bench", "workload '%s': unknown (%s)", wname, names);
    }
    return check_config(c, wname, &v, e);
}

void bench_config_free(struct bench_config *c)
{
    free(c->argv);
    c->argv = NULL;
}
