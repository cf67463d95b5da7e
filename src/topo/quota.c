/*
 * CPU quota: how many busy workers a cgroup CPU bandwidth limit pays for, and
 * which CPUs they run on (docs/quota.md).
 *
 * A container limited to 2 CPUs' worth of time on a 64-CPU machine sees all
 * 64 CPUs in its affinity mask; 64 busy workers there would share 2 CPUs of
 * time, each one descheduled most of the period, and work queued behind a
 * descheduled worker waits for its next slice. So the scheduler starts
 * ceil(quota / period) workers instead, as Go 1.25 sets GOMAXPROCS and the
 * JDK sizes availableProcessors().
 *
 * Finding the limit (the same walk as Go's internal/runtime/cgroup and the
 * JDK's CgroupSubsystemFactory):
 *   1. /proc/self/cgroup names the process's cgroup: "0::/a/b" (v2) or
 *      "4:cpu,cpuacct:/a/b" (v1, the hierarchy holding the cpu controller).
 *      A v1 cpu line wins over the v2 line: then the v2 hierarchy has no cpu
 *      controller.
 *   2. /proc/self/mountinfo gives the mount of that hierarchy (fstype cgroup2,
 *      or cgroup with "cpu" among its super options): its mount point, and the
 *      cgroup directory mounted there (its root field, "/" unless the mount
 *      is a bind of an inner cgroup, as in a container without a cgroup
 *      namespace).
 *   3. The cgroup's directory is mount point + (cgroup path minus mount
 *      root). Its limit file, and that of every ancestor up to the mount
 *      point, is read: v2 cpu.max "QUOTA PERIOD" or "max PERIOD"; v1
 *      cpu.cfs_quota_us (-1 = none) and cpu.cfs_period_us. A missing file is
 *      no limit at that level (the v2 root has no cpu.max); the tightest
 *      ratio wins, because the kernel throttles at every level.
 * A malformed file, a cgroup outside its mount, or no mount at all makes the
 * limit ignored: the scheduler then runs as without a cgroup, and the reason
 * is kept for `usched topo`. Never an error at start: a scheduler that cannot
 * read its cgroup is still a working scheduler.
 *
 * Choosing CPUs: the workers a quota pays for get one core each first (an
 * SMT sibling shares the core's execution units, so it buys less than a
 * core), inside the LLC with the most cores first (workers that share fibers
 * share a cache), then cores by increasing distance from that LLC, then SMT
 * siblings in the same order.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fault.h"
#include "usched.h"
#include "base/error.h"
#include "base/export.h"
#include "topo/topo_impl.h"

/* Largest quota or period accepted, microseconds: about 35 years, far above
 * what the kernel accepts (cfs: 1 s period, quota up to ~ 2^44 us), and small
 * enough that products of two fit in 128 bits with room. */
#define QUOTA_MAX_US (INT64_C(1) << 50)

/* snprintf that may truncate (paths in messages): through a va_list, so the
 * compiler's truncation warning stays for the calls that must not. */
__attribute__((format(printf, 3, 4))) static void fmt(char *buf, size_t len, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, len, f, ap);
    va_end(ap);
}

/* Records why the limit is ignored or absent; returns rc. */
__attribute__((format(printf, 3, 4))) static int qerr(struct usched__quota *q, int rc,
                                                      const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(q->reason, sizeof q->reason, f, ap);
    va_end(ap);
    return rc;
}

/* ---- reading files ------------------------------------------------------------ */

static FILE *open_under(const char *root, const char *path, char *full, size_t len)
{
    fmt(full, len, "%s%s", root, path);
    return fopen(full, "re");
}

/* Reads a small file (a limit file: one line) into buf, trailing newline
 * dropped. 0, -ENOENT (missing) or -EINVAL (unreadable, too long, binary). */
static int read_small(const char *file, char *buf, size_t len)
{
    FILE *f = fopen(file, "re");
    if (!f) return errno == ENOENT || errno == ENOTDIR ? -ENOENT : -EINVAL;
    size_t n = fread(buf, 1, len - 1, f);
    int bad = ferror(f) || !feof(f);
    fclose(f);
    if (bad || memchr(buf, '\0', n)) return -EINVAL;
    buf[n] = '\0';
    if (n && buf[n - 1] == '\n') buf[--n] = '\0';
    return strchr(buf, '\n') ? -EINVAL : 0;
}

/* A decimal in [0, QUOTA_MAX_US] that is the whole of s; -1 otherwise. */
static int64_t parse_us(const char *s)
{
    if (*s < '0' || *s > '9') return -1;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = v * 10 + (*s - '0');
        if (v > QUOTA_MAX_US) return -1;
    }
    return v;
}

/* ---- /proc/self/cgroup and mountinfo ---------------------------------------------- */

struct cg_hier {
    int version;      /* 1 or 2; 0 not found */
    char path[4096];  /* the cgroup path within the hierarchy */
};

static int has_token(const char *list, const char *tok)
{
    size_t n = strlen(tok);
    for (const char *p = list; p;) {
        if (!strncmp(p, tok, n) && (p[n] == ',' || p[n] == '\0')) return 1;
        p = strchr(p, ',');
        if (p) p++;
    }
    return 0;
}

static int read_proc_cgroup(const char *root, struct cg_hier *h, struct usched__quota *q)
{
    char full[4096], *line = NULL;
    size_t cap = 0;
    FILE *f = open_under(root, "/proc/self/cgroup", full, sizeof full);
    if (!f) return qerr(q, -ENOENT, "%s: cannot open (%s)", full, strerror(errno));
    struct cg_hier v2 = {0}, v1 = {0};
    int rc = 0, lineno = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (line[n - 1] == '\n') line[--n] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/' || strlen(c2 + 1) >= sizeof v1.path || (size_t)n != strlen(line)) {
            rc = qerr(q, -EINVAL, "%s line %d: not 'id:controllers:/path'", full, lineno);
            break;
        }
        *c1 = *c2 = '\0';
        if (!strcmp(line, "0") && c1[1] == '\0') {
            v2.version = 2;
            strcpy(v2.path, c2 + 1);
        } else if (has_token(c1 + 1, "cpu")) {
            v1.version = 1;
            strcpy(v1.path, c2 + 1);
        }
    }
    free(line);
    fclose(f);
    if (rc < 0) return rc;
    *h = v1.version ? v1 : v2;
    if (!h->version)
        return qerr(q, -ENOENT, "%s: no cgroup v2 line and no v1 cpu controller", full);
    return 0;
}

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
            p[3] >= '0' && p[3] <= '7') {
            *o++ = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
            p += 3;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

/* The directory of the cgroup, under root: mount point + (path - mount root). */
static int find_dir(const char *root, const struct cg_hier *h, char *dir, size_t dirlen,
                    size_t *mnt_len, struct usched__quota *q)
{
    char full[4096], *line = NULL;
    size_t cap = 0;
    FILE *f = open_under(root, "/proc/self/mountinfo", full, sizeof full);
    if (!f) return qerr(q, -ENOENT, "%s: cannot open (%s)", full, strerror(errno));
    int rc = -ENOENT, lineno = 0;
    ssize_t n;
    while (rc == -ENOENT && (n = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (line[n - 1] == '\n') line[--n] = '\0';
        /* id parent maj:min root mountpoint options [optional...] - fstype source super */
        char *field[64];
        int nf = 0;
        char *save = NULL;
        for (char *tok = strtok_r(line, " ", &save); tok && nf < 64; tok = strtok_r(NULL, " ", &save))
            field[nf++] = tok;
        int dash = 6;
        while (dash < nf && strcmp(field[dash], "-")) dash++;
        if (dash + 3 >= nf) {
            rc = qerr(q, -EINVAL, "%s line %d: not a mountinfo line", full, lineno);
            break;
        }
        const char *fstype = field[dash + 1], *super = field[dash + 3];
        if (h->version == 2 ? strcmp(fstype, "cgroup2") != 0
                            : strcmp(fstype, "cgroup") != 0 || !has_token(super, "cpu"))
            continue;
        char *mroot = field[3], *mpoint = field[4];
        unescape(mroot);
        unescape(mpoint);
        const char *rel;
        size_t rl = strlen(mroot);
        if (!strcmp(mroot, "/")) rel = h->path;
        else if (!strncmp(h->path, mroot, rl) && (h->path[rl] == '/' || h->path[rl] == '\0'))
            rel = h->path + rl;
        else {
            rc = qerr(q, -EINVAL,
                      "%s line %d: cgroup '%s' is outside the cgroup mounted at %s (root %s)",
                      full, lineno, h->path, mpoint, mroot);
            break;
        }
        if (!strcmp(rel, "/")) rel = "";
        int w = snprintf(dir, dirlen, "%s%s%s", root, !strcmp(mpoint, "/") ? "" : mpoint, rel);
        if (w < 0 || (size_t)w >= dirlen) {
            rc = qerr(q, -EINVAL, "%s line %d: cgroup path too long", full, lineno);
            break;
        }
        *mnt_len = strlen(root) + (!strcmp(mpoint, "/") ? 0 : strlen(mpoint));
        rc = 0;
    }
    free(line);
    fclose(f);
    if (rc == -ENOENT)
        qerr(q, rc, "%s: no %s mount", full,
             h->version == 2 ? "cgroup2" : "cgroup v1 mount with the cpu controller");
    return rc;
}

/* ---- limit files ------------------------------------------------------------------ */

/* The limit of one cgroup directory: 1 limited (*quota, *period), 0 none,
 * negative for a malformed file (reason in q). */
static int read_limit(int version, const char *dir, int64_t *quota, int64_t *period,
                      struct usched__quota *q, char *file, size_t flen)
{
    char buf[128];
    fmt(file, flen, "%s/%s", dir, version == 2 ? "cpu.max" : "cpu.cfs_quota_us");
    int r = read_small(file, buf, sizeof buf);
    if (r == -ENOENT) return 0;
    if (r < 0) return qerr(q, r, "%s: unreadable or not one line", file);
    if (version == 2) {
        char *sp = strchr(buf, ' ');
        if (!sp) return qerr(q, -EINVAL, "%s: '%s' is not 'QUOTA PERIOD' or 'max PERIOD'", file, buf);
        *sp = '\0';
        *period = parse_us(sp + 1);
        if (*period <= 0)
            return qerr(q, -EINVAL, "%s: period '%s' is not a positive number of microseconds", file,
                        sp + 1);
        if (!strcmp(buf, "max")) return 0;
        *quota = parse_us(buf);
        if (*quota <= 0)
            return qerr(q, -EINVAL, "%s: quota '%s' is not 'max' or a positive number", file, buf);
        return 1;
    }
    if (!strcmp(buf, "-1")) return 0;
    *quota = parse_us(buf);
    if (*quota <= 0)
        return qerr(q, -EINVAL, "%s: '%s' is not -1 or a positive number of microseconds", file, buf);
    char pfile[4200];
    fmt(pfile, sizeof pfile, "%s/cpu.cfs_period_us", dir);
    r = read_small(pfile, buf, sizeof buf);
    if (r < 0) return qerr(q, r, "%s: missing or unreadable beside a quota", pfile);
    *period = parse_us(buf);
    if (*period <= 0)
        return qerr(q, -EINVAL, "%s: '%s' is not a positive number of microseconds", pfile, buf);
    return 1;
}

int usched__quota_read(const char *root, struct usched__quota *q)
{
    memset(q, 0, sizeof *q);
    if (!root) root = "";
    /* "/" and "" both mean the live files; a trailing slash is dropped so
     * paths join cleanly. */
    char r0[4096];
    fmt(r0, sizeof r0, "%s", root);
    size_t rl = strlen(r0);
    while (rl && r0[rl - 1] == '/') r0[--rl] = '\0';

    struct cg_hier h;
    char dir[8192], file[8400];
    size_t mnt_len = 0;
    int r = read_proc_cgroup(r0, &h, q);
    if (r < 0) return r;
    if ((r = find_dir(r0, &h, dir, sizeof dir, &mnt_len, q)) < 0) return r;
    /* The cgroup and its ancestors up to the mount point; the tightest wins. */
    for (;;) {
        int64_t quota = 0, period = 0;
        r = read_limit(h.version, dir, &quota, &period, q, file, sizeof file);
        if (r < 0) {
            /* Ignored as a whole, even if a descendant's limit was read:
             * never a half-filled limit (limited, no workers). */
            q->limited = 0;
            q->quota_us = q->period_us = 0;
            q->file[0] = '\0';
            return r;
        }
        if (r && (!q->limited || (unsigned __int128)quota * (uint64_t)q->period_us <
                                     (unsigned __int128)q->quota_us * (uint64_t)period)) {
            q->limited = 1;
            q->quota_us = quota;
            q->period_us = period;
            fmt(q->file, sizeof q->file, "%s", file);
        }
        size_t len = strlen(dir);
        if (len <= mnt_len) break;
        while (len > mnt_len && dir[len - 1] != '/') len--;
        if (len > mnt_len) len--; /* the slash */
        dir[len] = '\0';
    }
    q->version = q->limited ? h.version : 0;
    if (!q->limited) {
        qerr(q, 0, "no CPU limit on cgroup v%d '%s' or its ancestors",
                 h.version, h.path);
        return 0;
    }
    q->workers = (int)((q->quota_us + q->period_us - 1) / q->period_us);
    return 0;
}

/* ---- choosing CPUs ------------------------------------------------------------------ */

static int has_cpu(const uint64_t *mask, int c) { return mask[c / 64] >> (c % 64) & 1; }

static int any_common(const uint64_t *a, const uint64_t *b, int words)
{
    for (int w = 0; w < words; w++)
        if (a[w] & b[w]) return 1;
    return 0;
}

void usched__quota_pick(const usched__topo_t *t, int n, uint64_t *mask)
{
    int words = t->words;
    memset(mask, 0, (size_t)words * sizeof *mask);
    /* The LLC with the most cores: count each core at its first CPU. */
    int best = 0, best_cores = -1;
    for (int g = 0; g < t->ngroups[TOPO_LLC]; g++) {
        int cores = 0;
        for (int c = 0; c < t->ncpus; c++)
            if (t->group[TOPO_LLC][c] == g) {
                const uint64_t *core = usched__topo_group_mask(t, TOPO_SMT, t->group[TOPO_SMT][c]);
                int first = 0;
                while (!has_cpu(core, first)) first++;
                cores += first == c;
            }
        if (cores > best_cores) best = g, best_cores = cores;
    }
    const uint64_t *llc = usched__topo_group_mask(t, TOPO_LLC, best);
    int start = 0;
    while (!has_cpu(llc, start)) start++;
    const int *ord = usched__topo_order(t, start);
    int taken = 0;
    /* Pass 1: one CPU per core; pass 2: the siblings. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < t->ncpus && taken < n; i++) {
            int c = ord[i];
            if (has_cpu(mask, c)) continue;
            if (pass == 0 &&
                any_common(mask, usched__topo_group_mask(t, TOPO_SMT, t->group[TOPO_SMT][c]), words))
                continue;
            mask[c / 64] |= UINT64_C(1) << (c % 64);
            taken++;
        }
}

/* ---- applying it ------------------------------------------------------------------- */

const char *usched__quota_root(const usched__topo_t *t, const char *input)
{
    const char *env = getenv("USCHED_CGROUP_ROOT");
    if (env && *env) return env;
    if (t->source == TOPO_SRC_LIVE) return "";
    if (t->source == TOPO_SRC_FSROOT) {
        char path[4200];
        struct stat st;
        /* hwloc's captures hold proc/self/cgroup (for the cpuset) but no
         * mountinfo: without it there is no cgroup to read. */
        fmt(path, sizeof path, "%s/proc/self/mountinfo", input);
        if (stat(path, &st) == 0) return input;
    }
    return NULL;
}

/* Reads the quota that applies to t; negative when ignored (reason in q). */
static int quota_for(const usched__topo_t *t, const char *input, struct usched__quota *q)
{
    const char *root = usched__quota_root(t, input);
    if (root) return usched__quota_read(root, q);
    memset(q, 0, sizeof *q);
    snprintf(q->reason, sizeof q->reason,
             "a virtual topology has no cgroup (synthetic, XML, or a captured root without "
             "proc/self/mountinfo; USCHED_CGROUP_ROOT names one to apply)");
    return 0;
}

int usched__topo_apply_quota(usched__topo_t *t, const char *input, struct usched__quota *q,
                             char *err, size_t errlen)
{
    struct usched__quota local;
    if (!q) q = &local;
    if (quota_for(t, input, q) < 0 || !q->limited || q->workers >= t->ncpus) return 0;
    uint64_t *mask = usched__calloc((size_t)t->words, sizeof *mask);
    if (!mask) {
        snprintf(err, errlen, "quota: out of memory");
        return -ENOMEM;
    }
    usched__quota_pick(t, q->workers, mask);
    int r = usched__topo_restrict(t, mask, err, errlen);
    free(mask);
    return r;
}

USCHED_EXPORT int usched_quota_print(FILE *f, const char *input, const char *cpus)
{
    if (!f) return usched__error(EINVAL, "quota: no output stream");
    char err[512];
    usched__topo_t *t;
    int r = usched__topo_load(&t, input, cpus, err, sizeof err);
    if (r < 0) return usched__error(-r, "%s", err);
    struct usched__quota q;
    uint64_t *mask = usched__calloc((size_t)t->words, sizeof *mask);
    if (!mask) {
        usched__topo_free(t);
        return usched__error(ENOMEM, "quota: out of memory");
    }
    r = quota_for(t, input, &q);
    if (r < 0) {
        fprintf(f, "quota: ignored: %s\n", q.reason);
    } else if (!q.limited) {
        fprintf(f, "quota: none: %s\n", q.reason);
    } else {
        fprintf(f, "quota: %.2f CPUs (cgroup v%d %s: %" PRId64 " us per %" PRId64 " us): ",
                (double)q.quota_us / (double)q.period_us, q.version, q.file, q.quota_us,
                q.period_us);
        if (q.workers >= t->ncpus) {
            fprintf(f, "no fewer workers than the %d CPUs\n", t->ncpus);
        } else {
            usched__quota_pick(t, q.workers, mask);
            fprintf(f, "%d worker%s on CPUs ", q.workers, q.workers == 1 ? "" : "s");
            usched__topo_put_list(f, t, mask);
            fputc('\n', f);
        }
    }
    free(mask);
    usched__topo_free(t);
    return 0;
}
