/*
 * CPU quota (src/topo/quota.c): captured cgroup files (tests/topo/cgroup/)
 * read as v2, v1, nested and unlimited limits; every malformed file ignored
 * with a reason naming it; the CPUs chosen on a virtual 2x6x2; a scheduler
 * started under a quota runs that many workers, and the quota knob turns it
 * off.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "test.h"
#include "topo/topo.h"
#include "usched.h"

#define SHAPE "pack:2 l3:1 l2:6 core:1 pu:2"

static char dir[4096];

static const char *cg(const char *name)
{
    snprintf(dir, sizeof dir, "%s/%s", QUOTA_CGROUP_DIR, name);
    return dir;
}

/* A case that reads a limit: quota/period, workers, and the file it is in. */
static void limited(const char *name, int version, int64_t quota, int64_t period, int workers,
                    const char *file)
{
    struct usched__quota q;
    ASSERT_EQ(usched__quota_read(cg(name), &q), 0);
    if (!q.limited) TEST_FAIL_("%s: no limit read: %s", name, q.reason);
    ASSERT_EQ(q.version, version);
    ASSERT_EQ(q.quota_us, quota);
    ASSERT_EQ(q.period_us, period);
    ASSERT_EQ(q.workers, workers);
    char want[4200];
    snprintf(want, sizeof want, "%s/%s", dir, file);
    ASSERT_STR_EQ(q.file, want);
}

/* A case without a limit, or with one ignored: rc and the reason's text. */
static void unlimited(const char *name, int rc, const char *reason)
{
    struct usched__quota q;
    ASSERT_EQ(usched__quota_read(cg(name), &q), rc);
    ASSERT_EQ(q.limited, 0);
    ASSERT_EQ(q.workers, 0);
    ASSERT_STR_CONTAINS(q.reason, reason);
    if (rc < 0) ASSERT_STR_CONTAINS(q.reason, dir); /* names the file */
}

static void pick(const char *cpus, int n, const char *want)
{
    char err[256];
    usched__topo_t *t;
    ASSERT_OK(usched__topo_load(&t, SHAPE, cpus, err, sizeof err));
    uint64_t mask[1] = {~UINT64_C(0)};
    usched__quota_pick(t, n, mask);
    char got[256] = "";
    for (int c = 0; c < usched__topo_ncpus(t); c++)
        if (mask[0] >> c & 1)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d", *got ? "," : "", c);
    ASSERT_STR_EQ(got, want);
    usched__topo_free(t);
}

static atomic_int ran;
static void count(void *arg)
{
    (void)arg;
    atomic_fetch_add(&ran, 1);
}

/* Starts a scheduler on the shape under the captured cgroup `name`; returns
 * its worker count after running a few fibers on it. */
static int workers_under(const char *name, const char *knobs)
{
    setenv("USCHED_CGROUP_ROOT", cg(name), 1);
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", SHAPE));
    if (knobs) ASSERT_OK(usched_set(s, "knobs", knobs));
    ASSERT_OK(usched_start(s));
    int n = usched_ncpus(s);
    atomic_store(&ran, 0);
    for (int i = 0; i < 100; i++) ASSERT_OK(usched_spawn(s, NULL, count, NULL));
    ASSERT_OK(usched_wait(s));
    ASSERT_EQ(atomic_load(&ran), 100);
    ASSERT_OK(usched_destroy(s));
    unsetenv("USCHED_CGROUP_ROOT");
    return n;
}

static char *quota_line(const char *name, const char *input, const char *cpus)
{
    if (name) setenv("USCHED_CGROUP_ROOT", cg(name), 1);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ASSERT(m);
    ASSERT_OK(usched_quota_print(m, input, cpus));
    fclose(m);
    unsetenv("USCHED_CGROUP_ROOT");
    return buf;
}

int main(void)
{
    unsetenv("USCHED_CGROUP_ROOT");
    unsetenv("USCHED_KNOBS");

    /* Limits. */
    limited("v2", 2, 150000, 100000, 2, "sys/fs/cgroup/user.slice/app.scope/cpu.max");
    limited("v2-nested", 2, 50000, 50000, 1, "sys/fs/cgroup/kubepods/pod1/cpu.max");
    limited("v2-ns", 2, 400000, 100000, 4, "sys/fs/cgroup/cpu.max");
    limited("v2-escaped", 2, 20000, 100000, 1, "cg root/a/cpu.max");
    limited("v1", 1, 250000, 100000, 3, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us");
    /* The same with a trailing slash on the root. */
    char slash[4200];
    snprintf(slash, sizeof slash, "%s/v2/", QUOTA_CGROUP_DIR);
    struct usched__quota q;
    ASSERT_EQ(usched__quota_read(slash, &q), 0);
    ASSERT_EQ(q.workers, 2);

    /* No limit. */
    unlimited("v2-max", 0, "no CPU limit on cgroup v2 '/system.slice/x.service'");
    unlimited("v1-unlimited", 0, "no CPU limit on cgroup v1 '/'");

    /* Ignored, with the file and the problem. */
    unlimited("bad-cpumax", -EINVAL, "cpu.max: quota 'abc' is not 'max' or a positive number");
    unlimited("bad-period", -EINVAL, "cpu.max: period '0' is not a positive number");
    unlimited("bad-oneword", -EINVAL, "cpu.max: '100000' is not 'QUOTA PERIOD'");
    unlimited("bad-huge", -EINVAL, "quota '99999999999999999999999'");
    unlimited("v1-noperiod", -ENOENT, "cpu.cfs_period_us: missing or unreadable beside a quota");
    /* a limit read in the cgroup, then an ancestor's malformed: the whole
     * limit is ignored, not half kept (the fuzzer's find: limited with 0
     * workers) */
    unlimited("v1-badparent", -ENOENT, "cpu/cpu.cfs_period_us: missing or unreadable beside a quota");
    unlimited("bad-cgroup", -EINVAL, "proc/self/cgroup line 1: not 'id:controllers:/path'");
    unlimited("bad-mountinfo", -EINVAL, "proc/self/mountinfo line 2: not a mountinfo line");
    unlimited("outside", -EINVAL, "cgroup '/elsewhere/x' is outside the cgroup mounted at "
                                  "/sys/fs/cgroup (root /mine)");
    unlimited("nomount", -ENOENT, "proc/self/mountinfo: no cgroup2 mount");
    unlimited("empty", -ENOENT, "no cgroup v2 line and no v1 cpu controller");
    unlimited("no-such-case", -ENOENT, "proc/self/cgroup: cannot open");

    /* This machine's own files: whatever they hold, a clean answer. */
    int rc = usched__quota_read("/", &q);
    ASSERT(rc == 0 || rc == -ENOENT || rc == -EINVAL);
    ASSERT(q.limited ? q.workers >= 1 : q.reason[0] != '\0');

    /* CPUs chosen on 2 packages x 6 cores x 2 PUs (core k = CPUs 2k, 2k+1;
     * package 0 = CPUs 0-11): one per core in package 0, then package 1,
     * then siblings nearest first. */
    pick(NULL, 1, "0");
    pick(NULL, 3, "0,2,4");
    pick(NULL, 7, "0,2,4,6,8,10,12");
    pick(NULL, 13, "0,1,2,4,6,8,10,12,14,16,18,20,22");
    pick(NULL, 24, "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23");
    /* The LLC with the most cores goes first: package 0 keeps 2 cores
     * (CPUs 0-3), package 1 all 6 (CPUs 4-15 after the restriction). */
    pick("0-3,12-23", 2, "4,6");
    pick("0-3,12-23", 8, "0,2,4,6,8,10,12,14");

    /* Applying it restricts the topology to the chosen CPUs. */
    char err[256];
    usched__topo_t *t;
    ASSERT_OK(usched__topo_load(&t, SHAPE, NULL, err, sizeof err));
    setenv("USCHED_CGROUP_ROOT", cg("v1"), 1);
    ASSERT_OK(usched__topo_apply_quota(t, SHAPE, &q, err, sizeof err));
    ASSERT_EQ(usched__topo_ncpus(t), 3);
    ASSERT_EQ(usched__topo_os_index(t, 0), 0);
    ASSERT_EQ(usched__topo_os_index(t, 1), 2);
    ASSERT_EQ(usched__topo_os_index(t, 2), 4);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_SMT), 3);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_PACKAGE), 1);
    unsetenv("USCHED_CGROUP_ROOT");
    usched__topo_free(t);
    /* A virtual topology without USCHED_CGROUP_ROOT has no cgroup. */
    ASSERT_OK(usched__topo_load(&t, SHAPE, NULL, err, sizeof err));
    ASSERT_OK(usched__topo_apply_quota(t, SHAPE, &q, err, sizeof err));
    ASSERT_EQ(usched__topo_ncpus(t), 24);
    ASSERT_STR_CONTAINS(q.reason, "a virtual topology has no cgroup");
    usched__topo_free(t);

    /* A scheduler under a quota: that many workers; quota=0 all of them;
     * a malformed cgroup changes nothing and start still succeeds. */
    ASSERT_EQ(workers_under("v2", NULL), 2);
    ASSERT_EQ(workers_under("v2-nested", NULL), 1);
    ASSERT_EQ(workers_under("v1", NULL), 3);
    ASSERT_EQ(workers_under("v2-ns", "quota=0"), 24);
    ASSERT_EQ(workers_under("v2-max", NULL), 24);
    ASSERT_EQ(workers_under("bad-cpumax", NULL), 24);
    /* The knob cannot change while running. */
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    ASSERT_OK(usched_set(s, "topology", "pack:1 core:2 pu:1"));
    ASSERT_OK(usched_start(s));
    ASSERT_EQ(usched_set(s, "knobs", "quota=0"), -EBUSY);
    ASSERT_OK(usched_destroy(s));

    /* The line `usched topo` prints. */
    char *line = quota_line("v2", SHAPE, NULL);
    char want[8192];
    snprintf(want, sizeof want,
             "quota: 1.50 CPUs (cgroup v2 %s/v2/sys/fs/cgroup/user.slice/app.scope/cpu.max: "
             "150000 us per 100000 us): 2 workers on CPUs 0,2\n",
             QUOTA_CGROUP_DIR);
    ASSERT_STR_EQ(line, want);
    free(line);
    line = quota_line("v2-ns", SHAPE, "0-2");
    ASSERT_STR_CONTAINS(line, "quota: 4.00 CPUs (cgroup v2 ");
    ASSERT_STR_CONTAINS(line, "no fewer workers than the 3 CPUs\n");
    free(line);
    line = quota_line("bad-period", SHAPE, NULL);
    ASSERT_STR_CONTAINS(line, "quota: ignored: ");
    ASSERT_STR_CONTAINS(line, "period '0'");
    free(line);
    line = quota_line(NULL, SHAPE, NULL);
    ASSERT_STR_EQ(line, "quota: none: a virtual topology has no cgroup (synthetic, XML, or a "
                        "captured root without proc/self/mountinfo; USCHED_CGROUP_ROOT names one "
                        "to apply)\n");
    free(line);
    ASSERT_EQ(usched_quota_print(NULL, SHAPE, NULL), -EINVAL);
    ASSERT_EQ(usched_quota_print(stdout, "no/such/file.xml", NULL), -ENOENT);
    puts("quota: ok");
    return 0;
}
