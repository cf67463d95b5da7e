/*
 * usched bench --peers: finds a peer program, runs it (bench_proc.h), reads
 * its output (stdout and stderr merged, so a failure can quote the peer's own
 * last words) and parses the RESULT line.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_peer.h"
#include "bench_proc.h"

const char *const bench_peer_names[] = {
#define X(name, what) #name,
    BENCH_PEERS(X)
#undef X
};
const int bench_npeers = (int)(sizeof bench_peer_names / sizeof bench_peer_names[0]);

int bench_peer_dir(const char *opt, char *buf, size_t len)
{
    const char *env = getenv("USCHED_PEERS_DIR");
    if (opt && *opt) {
        snprintf(buf, len, "%s", opt);
        return 0;
    }
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(buf, len, "cannot read /proc/self/exe to find the peers (use --peers-dir): %s",
                 strerror(errno));
        return -1;
    }
    exe[n] = '\0';
    snprintf(buf, len, "%s/peers", dirname(exe));
    return 0;
}

/* Strips the trailing newline in place. */
static void chomp(char *line)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
}

/* Keeps the last non-empty line in last. */
static void keep_line(char *line, char *last, size_t len)
{
    chomp(line);
    if (line[0]) snprintf(last, len, "%s", line);
}

/* Value of key=... in a RESULT line, copied to buf; NULL if absent. */
static const char *field(const char *line, const char *key, char *buf, size_t len)
{
    size_t k = strlen(key);
    for (const char *p = line; (p = strstr(p, key)); p += k) {
        if ((p != line && p[-1] != ' ') || p[k] != '=') continue;
        p += k + 1;
        size_t n = strcspn(p, " \n");
        if (n >= len) n = len - 1;
        memcpy(buf, p, n);
        buf[n] = '\0';
        return buf;
    }
    return NULL;
}

static void parse_result(const char *line, const char *system, const struct bench_peer_expect *want,
                         struct bench_peer_out *out)
{
    char v[64], check[16], got[64], hib[4], thr[16];
    char *end;
    out->status = BENCH_PEER_FAILED;
    if (!field(line, "value", v, sizeof v) || !field(line, "check", check, sizeof check)) {
        snprintf(out->msg, sizeof out->msg, "malformed RESULT line: %.200s", line);
        return;
    }
    if (strcmp(check, "ok")) {
        snprintf(out->msg, sizeof out->msg, "its own check failed (check=%s)", check);
        return;
    }
    /* the fields that must say what was asked */
    snprintf(hib, sizeof hib, "%d", want->higher_is_better);
    snprintf(thr, sizeof thr, "%d", !strcmp(want->workload, "yield") ? 1 : want->threads);
    const struct {
        const char *key, *expected;
    } must[] = {
        {"workload", want->workload}, {"system", system}, {"unit", want->unit},
        {"higher_is_better", hib},    {"threads", thr},
    };
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
        if (!field(line, must[i].key, got, sizeof got)) {
            snprintf(out->msg, sizeof out->msg, "RESULT line without %s=: %.180s", must[i].key, line);
            return;
        }
        if (strcmp(got, must[i].expected)) {
            snprintf(out->msg, sizeof out->msg, "RESULT says %s=%s, expected %s", must[i].key, got,
                     must[i].expected);
            return;
        }
    }
    out->value = strtod(v, &end);
    if (end == v || *end || !(out->value > 0) || isinf(out->value)) {
        snprintf(out->msg, sizeof out->msg, "RESULT value '%s' is not a number > 0", v);
        return;
    }
    out->status = BENCH_PEER_OK;
}

void bench_peer_run(const char *dir, const char *system, char **argv,
                    const struct bench_peer_expect *want, struct bench_peer_out *out)
{
    char path[PATH_MAX];
    memset(out, 0, sizeof *out);
    snprintf(path, sizeof path, "%s/peer-%s", dir, system);
    if (access(path, X_OK) != 0) {
        out->status = BENCH_PEER_SKIPPED;
        snprintf(out->msg, sizeof out->msg, "not built: no %.180s (run bench/peers/build.sh)", path);
        return;
    }
    argv[0] = path;
    struct bench_proc proc;
    const struct bench_proc_opts o = {.capture = true, .fd3 = -1};
    if (bench_proc_start(&proc, argv, &o, out->msg, sizeof out->msg) < 0) {
        out->status = BENCH_PEER_FAILED;
        return;
    }
    /* the whole output (a peer prints a few lines), for the RESULT line and
     * the last other line: a failure quotes the peer's own last words */
    static char buf[65536];
    int st;
    bench_proc_collect(&proc, buf, sizeof buf, INFINITY, &st);
    char result[1024] = "", last[256] = "";
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "RESULT ", 7))
            snprintf(result, sizeof result, "%s", line);
        else
            keep_line(line, last, sizeof last);
    }
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (code == 3) {
        out->status = BENCH_PEER_SKIPPED;
        snprintf(out->msg, sizeof out->msg, "%s", last[0] ? last : "unsupported workload");
    } else if (WIFSIGNALED(st)) {
        out->status = BENCH_PEER_FAILED;
        snprintf(out->msg, sizeof out->msg, "killed by signal %d%s%s", WTERMSIG(st),
                 last[0] ? ": " : "", last);
    } else if (!result[0]) {
        out->status = BENCH_PEER_FAILED;
        snprintf(out->msg, sizeof out->msg, "exit %d without a RESULT line%s%s", code,
                 last[0] ? ": " : "", last);
    } else {
        chomp(result);
        parse_result(result, system, want, out);
        if (out->status == BENCH_PEER_OK && code != 0) {
            out->status = BENCH_PEER_FAILED;
            snprintf(out->msg, sizeof out->msg, "exit %d%s%s", code, last[0] ? ": " : "", last);
        }
    }
}
