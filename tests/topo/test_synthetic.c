/*
 * Synthetic shapes (hwloc synthetic strings), this machine, restriction by a
 * CPU list, and the loader's errors for every kind of bad input.
 */
#include <fcntl.h>
#include <hwloc.h>
#include <sched.h>

#include "topo_test.h"

struct shape {
    const char *desc;
    int cpus, cores, l2, llcs, packages, numa, smt;
};

/* hwloc 2.9 accepts "numa:N" as a level (N nodes below each parent object);
 * without one it puts a single node over the whole machine. */
static const struct shape shapes[] = {
    {"pack:1 core:4 pu:1", 4, 4, 4, 1, 1, 1, 1},             /* no SMT, no caches */
    {"pack:1 l3:1 l2:4 core:1 pu:2", 8, 4, 4, 1, 1, 1, 2},   /* SMT2 */
    {"pack:1 l2:2 core:2 pu:4", 16, 4, 2, 2, 1, 1, 4},       /* SMT4, L2 per 2 cores, no L3 */
    {"core:2 pu:8", 16, 2, 2, 1, 1, 1, 8},                   /* SMT8, no package level */
    {"pack:2 core:6 pu:2", 24, 12, 12, 2, 2, 1, 2},          /* no cache: LLC = package */
    {"pack:2 l3:1 l2:6 core:1 pu:2", 24, 12, 12, 2, 2, 1, 2},
    {"pack:2 l3:2 l2:4 core:1 pu:2", 32, 16, 16, 4, 2, 1, 2}, /* 2 LLCs per package */
    {"pack:4 l3:1 l2:2 core:2 pu:1", 16, 16, 8, 4, 4, 1, 1}, /* Bulldozer-like modules */
    {"pack:2 numa:2 l3:1 core:4 pu:2", 32, 16, 16, 4, 2, 4, 2}, /* node inside package */
    {"numa:2 pack:2 l3:1 core:2 pu:1", 8, 8, 8, 4, 4, 2, 1}, /* node over 2 packages */
    {"pack:1 core:1 pu:1", 1, 1, 1, 1, 1, 1, 1},
};

static void shape(const struct shape *s)
{
    usched__topo_t *t = topo_load_ok(s->desc, NULL);
    printf("%-34s cpus %d cores %d l2 %d llc %d pkg %d numa %d smt %d\n", s->desc,
           usched__topo_ncpus(t), usched__topo_ngroups(t, TOPO_SMT), usched__topo_ngroups(t, TOPO_L2),
           usched__topo_ngroups(t, TOPO_LLC), usched__topo_ngroups(t, TOPO_PACKAGE),
           usched__topo_ngroups(t, TOPO_NUMA), usched__topo_smt_width(t));
    ASSERT_EQ(usched__topo_ncpus(t), s->cpus);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_SMT), s->cores);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_L2), s->l2);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_LLC), s->llcs);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_PACKAGE), s->packages);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_NUMA), s->numa);
    ASSERT_EQ(usched__topo_smt_width(t), s->smt);
    ASSERT_EQ(usched__topo_nkinds(t), 1);
    ASSERT_EQ(usched__topo_is_live(t), 0);
    topo_check_invariants(t);
    for (int f = 0; f < 3; f++) { /* every printer copes with every shape */
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        ASSERT_OK(usched__topo_print(t, m, (const char *[]){"tree", "dfly", "json"}[f]));
        fclose(m);
        ASSERT_GT(len, 0);
        free(buf);
    }
    usched__topo_free(t);
}

static void load_fails(const char *input, const char *cpus, int code, const char *needle)
{
    usched__topo_t *t = (usched__topo_t *)1;
    char err[512] = "";
    int r = usched__topo_load(&t, input, cpus, err, sizeof err);
    if (r != code) TEST_FAIL_("'%s' cpus %s: %d, expected %d (%s)", input, cpus, r, code, err);
    ASSERT(t == NULL);
    ASSERT_STR_CONTAINS(err, needle);
    ASSERT(!strchr(err, '\n'));
}

int main(void)
{
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) shape(&shapes[i]);

    /* Distances where NUMA and package do not nest. Node inside package:
     * cpus 0-7 node 0, 8-15 node 1, both package 0. */
    usched__topo_t *t = topo_load_ok("pack:2 numa:2 l3:1 core:4 pu:2", NULL);
    ASSERT_EQ(usched__topo_level_shared(t, 0, 1), TOPO_SMT);
    ASSERT_EQ(usched__topo_level_shared(t, 0, 2), TOPO_LLC);
    ASSERT_EQ(usched__topo_level_shared(t, 0, 8), TOPO_PACKAGE);
    ASSERT_EQ(usched__topo_level_shared(t, 0, 16), TOPO_MACHINE);
    usched__topo_free(t);
    /* Node over two packages: cpus 0-1 package 0, 2-3 package 1, node 0. */
    t = topo_load_ok("numa:2 pack:2 l3:1 core:2 pu:1", NULL);
    ASSERT_EQ(usched__topo_level_shared(t, 0, 1), TOPO_LLC);
    ASSERT_EQ(usched__topo_level_shared(t, 0, 2), TOPO_NUMA);
    ASSERT_EQ(usched__topo_level_shared(t, 0, 4), TOPO_MACHINE);
    const int *band = usched__topo_band_end(t, 0);
    ASSERT_EQ(band[TOPO_SMT], 1);
    ASSERT_EQ(band[TOPO_L2], 1);
    ASSERT_EQ(band[TOPO_LLC], 2);
    ASSERT_EQ(band[TOPO_PACKAGE], 2);
    ASSERT_EQ(band[TOPO_NUMA], 4);
    ASSERT_EQ(band[TOPO_MACHINE], 8);
    usched__topo_free(t);

    /* A CPU list keeps OS numbers and renumbers densely. */
    t = topo_load_ok("pack:2 core:6 pu:2", "0-3, 12");
    ASSERT_EQ(usched__topo_ncpus(t), 5);
    ASSERT_EQ(usched__topo_os_index(t, 4), 12);
    ASSERT_EQ(usched__topo_cpu_of_os(t, 12), 4);
    ASSERT_EQ(usched__topo_cpu_of_os(t, 5), -1);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_SMT), 3);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_PACKAGE), 2);
    topo_check_invariants(t);
    /* ... and remembers each CPU's whole LLC (here its package) as loaded:
     * the CPUs a contended worker may be widened onto (monitor.c C4). */
    int os[64];
    ASSERT_EQ(usched__topo_llc_whole_os(t, 0, os, 64), 12);
    for (int i = 0; i < 12; i++) ASSERT_EQ(os[i], i);
    ASSERT_EQ(usched__topo_llc_whole_os(t, 4, os, 2), 12); /* counted, 2 written */
    ASSERT_EQ(os[0], 12);
    ASSERT_EQ(os[1], 13);
    usched__topo_free(t);
    /* Unrestricted, the whole LLC is the model's LLC group. */
    t = topo_load_ok("pack:2 l3:2 l2:4 core:1 pu:2", NULL);
    for (int c = 0; c < usched__topo_ncpus(t); c++) {
        const uint64_t *m = usched__topo_group_mask(t, TOPO_LLC, usched__topo_group(t, c, TOPO_LLC));
        int n = usched__topo_llc_whole_os(t, c, os, 64);
        ASSERT_EQ(n, usched__topo_group_weight(t, TOPO_LLC, usched__topo_group(t, c, TOPO_LLC)));
        for (int i = 0; i < n; i++) {
            int d = usched__topo_cpu_of_os(t, os[i]);
            ASSERT(d >= 0 && (m[d / 64] >> (d % 64) & 1));
        }
    }
    usched__topo_free(t);

    /* This machine: at least one CPU, live, sane. */
    t = topo_load_ok(NULL, NULL);
    ASSERT_EQ(usched__topo_is_live(t), 1);
    topo_check_invariants(t);
    int n = usched__topo_ncpus(t);
    usched__topo_free(t);
    t = topo_load_ok("", "0");
    ASSERT_EQ(usched__topo_ncpus(t), 1);
    usched__topo_free(t);
    /* ... restricted to the CPUs the process may use: bound to its last
     * allowed CPU, this machine has that one CPU. */
    cpu_set_t all, one;
    ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) last = c;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    t = topo_load_ok(NULL, NULL);
    ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
    /* The process's CPUs are those of all its threads; under qemu-user (a
     * cross build's USCHED_TEST_EMULATOR) qemu's own threads keep every CPU. */
    if (getenv("USCHED_TEST_EMULATOR")) {
        /* what still holds: the CPU the process was bound to is in the
         * topology, which has no more CPUs than the machine */
        printf("restriction to the allowed CPUs: under %s %d CPUs (its own threads keep every CPU); "
               "CPU %d among them\n",
               getenv("USCHED_TEST_EMULATOR"), usched__topo_ncpus(t), last);
        ASSERT_GE(usched__topo_ncpus(t), 1);
        ASSERT_LE(usched__topo_ncpus(t), n);
        ASSERT_GE(usched__topo_cpu_of_os(t, last), 0);
        ASSERT_EQ(usched__topo_os_index(t, usched__topo_cpu_of_os(t, last)), last);
    } else {
        ASSERT_EQ(usched__topo_ncpus(t), 1);
        ASSERT_EQ(usched__topo_os_index(t, 0), last);
    }
    usched__topo_free(t);

    /* Bad inputs. */
    load_fails("/nonexistent/root", NULL, -ENOENT, "input '/nonexistent/root': no such file");
    load_fails("missing.xml", NULL, -ENOENT, "no such file or directory");
    load_fails("nosuchthing", NULL, -ENOENT, "no such file or directory");
    load_fails("pack:2 bogus:3", NULL, -EINVAL, "malformed hwloc synthetic description");
    load_fails("pack:x core:2", NULL, -EINVAL, "malformed");
    load_fails("pack:0 core:2", NULL, -EINVAL, "malformed");
    load_fails("/tmp", NULL, -EINVAL, "not a captured Linux root");
    /* Bounded: more CPUs than Linux supports is refused before hwloc builds
     * them; a device would be read forever. */
    load_fails("pack:1000 core:1000 pu:1000", NULL, -EINVAL, "describes more than 8192 CPUs");
    load_fails("pack:2 core:4097(indexes=0) pu:1", NULL, -EINVAL, "describes more than 8192 CPUs");
    load_fails("group:2 pack:2 core:1 pu:0x000000ff2", NULL, -EINVAL, "describes more than 8192 CPUs");
    load_fails("/dev/zero", NULL, -EINVAL, "input '/dev/zero': not a regular file");
    load_fails("pack:2 core:2 pu:1", "", -EINVAL, "empty");
    load_fails("pack:2 core:2 pu:1", "4", -EINVAL, "CPU 4 is out of range (4 CPUs: 0-3)");
    load_fails("pack:2 core:2 pu:1", "3-1", -EINVAL, "reversed range");
    load_fails("pack:2 core:2 pu:1", "1,x", -EINVAL, "expected a CPU number");
    char big[32];
    snprintf(big, sizeof big, "0-%d", n);
    load_fails(NULL, big, -EINVAL, "out of range");

    /* Files that exist but are not XML topologies: tests/topo/test_xml.c. */
    char path[] = "/tmp/usched-topo-bad-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "<topology version=\"9.0\">\n</topology>\n", 37), 37);
    close(fd);
    load_fails(path, NULL, -EINVAL, "not an XML topology hwloc can read");
    unlink(path);

    /* Printer: unknown format prints nothing. */
    t = topo_load_ok("pack:1 core:2 pu:1", NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ASSERT_EQ(usched__topo_print(t, m, "xml"), -EINVAL);
    fclose(m);
    ASSERT_EQ(len, 0);
    free(buf);
    usched__topo_free(t);
    return 0;
}
