/*
 * cgroup files (src/topo/quota.c): the input is three files separated by NUL
 * bytes, written as proc/self/cgroup, proc/self/mountinfo and the limit file
 * of a temporary root (sys/fs/cgroup/a/cpu.max, its v1 twin
 * sys/fs/cgroup/cpu/a/cpu.cfs_quota_us, and the same at each mount point), then
 * read as the quota. The answer is a limit with sane numbers, no limit with a
 * reason, or an ignored file with a reason: never anything else.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "topo/topo.h"

static char root[64];

static void put(const char *rel, const uint8_t *p, size_t n)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) abort();
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) < 0 ? -1 : 0;
}

/* The temporary root, its files first (depth-first). */
static void remove_root(void) { nftw(root, remove_one, 8, FTW_DEPTH | FTW_PHYS); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(root, sizeof root, "/tmp/usched-fuzz-cg-XXXXXX");
    if (!mkdtemp(root)) abort();
    static const char *const dirs[] = {"proc", "proc/self", "sys", "sys/fs", "sys/fs/cgroup",
                                       "sys/fs/cgroup/a", "sys/fs/cgroup/cpu", "sys/fs/cgroup/cpu/a"};
    char path[256];
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
        if (mkdir(path, 0700) < 0 && errno != EEXIST) abort();
    }
    atexit(remove_root);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192) return 0;
    const uint8_t *part[3] = {data, data + size, data + size};
    size_t len[3] = {size, 0, 0};
    for (int i = 0; i < 2; i++) {
        const uint8_t *z = memchr(part[i], '\0', len[i]);
        if (!z) break;
        part[i + 1] = z + 1;
        len[i + 1] = (size_t)(part[i] + len[i] - (z + 1));
        len[i] = (size_t)(z - part[i]);
    }
    put("proc/self/cgroup", part[0], len[0]);
    put("proc/self/mountinfo", part[1], len[1]);
    static const char *const limits[] = {"sys/fs/cgroup/a/cpu.max", "sys/fs/cgroup/cpu.max",
                                         "sys/fs/cgroup/cpu/a/cpu.cfs_quota_us",
                                         "sys/fs/cgroup/cpu/cpu.cfs_quota_us",
                                         "sys/fs/cgroup/cpu/a/cpu.cfs_period_us"};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) put(limits[i], part[2], len[2]);
    struct usched__quota q;
    int r = usched__quota_read(root, &q);
    if (r != 0 && r != -ENOENT && r != -EINVAL) abort();
    if (q.limited) {
        if (r != 0 || q.quota_us <= 0 || q.period_us <= 0 || q.workers < 1 || !q.file[0]) abort();
        if ((int64_t)q.workers * q.period_us < q.quota_us) abort(); /* rounded up */
    } else if (!q.reason[0]) {
        abort();
    }
    return 0;
}
