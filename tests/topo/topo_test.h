/*
 * Shared by the topology tests: the captured machines of tests/data/topologies
 * with the counts of its README, unpacking a sysfs dump into a temporary
 * directory, and the invariants every loaded topology must satisfy.
 */
#ifndef USCHED_TOPO_TEST_H
#define USCHED_TOPO_TEST_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"
#include "test.h"
#include "topo/topo.h"

/* One row per machine of tests/data/topologies/README.md ("The machines and
 * the counts the tests expect"):
 *   name, file under the folder, root inside the tarball ("" for XML),
 *   packages, cores, PUs, L3 domains, NUMA nodes, L2 domains, threads per core.
 * The L2 count of the two AMD XMLs is one per core, as their lstopo view
 * shows. */
#define TOPO_MACHINES(X)                                                                        \
    X(westmere, "sysfs/24em64t-2n6c2t+2mic.olddriver.tar.bz2", "24em64t-2n6c2t+2mic.olddriver",  \
      2, 12, 24, 2, 2, 12, 2)                                                                   \
    X(nehalem, "sysfs/8em64t-4c2t.tar.bz2", "8em64t-4c2t", 1, 4, 8, 1, 1, 4, 2)                \
    X(skylake_ve, "sysfs/32intel64-2p8co2t+8ve.tar.bz2", "32intel64-2p8co2t+8ve", 2, 16, 32, 2,  \
      2, 16, 2)                                                                                 \
    X(memsidecaches, "sysfs/memorysidecaches.tar.bz2", "memorysidecaches", 2, 40, 80, 2, 4, 40, \
      2)                                                                                        \
    X(hybrid, "sysfs/20em64t-hybrid-1p6c2t+2ca4co1t.tar.bz2", "20em64t-hybrid-1p6c2t+2ca4co1t",  \
      1, 14, 20, 1, 1, 8, 2)                                                                    \
    X(bulldozer_s, "sysfs/64amd64-4s2n4ca2co.tar.bz2", "64amd64-4s2n4ca2co", 4, 64, 64, 8, 8,   \
      32, 1)                                                                                    \
    X(bulldozer_p, "sysfs/64amd64-4p2n4ca2co.tar.bz2", "64amd64-4p2n4ca2co/fsroot", 4, 64, 64,  \
      8, 8, 32, 1)                                                                              \
    X(magnycours, "sysfs/48amd64-4d2n6c-sparse.tar.bz2", "48amd64-4d2n6c-sparse", 4, 48, 48, 8, \
      8, 48, 1)                                                                                 \
    X(power7, "sysfs/256ppc-8n8s4t.tar.bz2", "256ppc-8n8s4t", 64, 64, 256, 64, 8, 64, 4)        \
    X(power9, "sysfs/nvidiagpunumanodes.tar.bz2", "nvidiagpunumanodes", 2, 8, 32, 4, 2, 4, 4)   \
    X(kunpeng, "sysfs/128arm-2pa2n8cluster4co.tar.bz2", "128arm-2pa2n8cluster4co", 2, 128, 128, \
      4, 4, 128, 1)                                                                             \
    X(gb10, "sysfs/nvidia-dgx-gb10.tar.bz2", "nvidia-dgx-gb10", 1, 20, 20, 2, 1, 20, 1)         \
    X(offline, "sysfs/offline-cpu0-node0.tar.bz2", "offline-cpu0-node0", 2, 17, 17, 2, 1, 17,  \
      1)                                                                                        \
    X(zen1, "xml/AMD-17h-Zen-2xEpyc-7451.xml", "", 2, 48, 96, 16, 8, 48, 2)                     \
    X(zen4, "xml/AMD-19h-Zen4-2xEpyc-9654.xml", "", 2, 192, 384, 24, 2, 192, 2)                 \
    X(knl, "xml/Intel-KnightsLanding-XeonPhi-7210.xml", "", 1, 64, 256, 0, 1, 32, 4)

struct topo_machine {
    const char *name, *file, *root;
    int packages, cores, pus, l3, numa, l2, smt;
};

static const struct topo_machine topo_machines[] = {
#define X(n, f, r, pk, co, pu, l3, nu, l2, smt) {#n, f, r, pk, co, pu, l3, nu, l2, smt},
    TOPO_MACHINES(X)
#undef X
};
#define TOPO_NMACHINES ((int)(sizeof topo_machines / sizeof topo_machines[0]))

/* The data folder, or a loud failure: it is part of the repository, and a
 * missing folder must not turn these tests into silent passes. */
static inline const char *topo_data_dir(void)
{
    static char readme[4096];
    struct stat st;
    snprintf(readme, sizeof readme, "%s/README.md", USCHED_TOPOLOGIES_DIR);
    if (stat(readme, &st) != 0)
        TEST_FAIL_("captured topologies not found: %s is missing (configure with "
                   "-DUSCHED_TOPOLOGIES_DIR=<tests/data/topologies>)",
                   readme);
    return USCHED_TOPOLOGIES_DIR;
}

static char topo_tmp_[4096];

static inline void topo_tmp_cleanup_(void)
{
    if (!topo_tmp_[0]) return;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", topo_tmp_);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", topo_tmp_);
}

/* The path to load for machine m: the XML file, or the root of its sysfs dump
 * as the build unpacked it (TOPO_ROOTS_DIR), else unpacked now into a
 * temporary directory removed at exit. */
static inline const char *topo_machine_input(const struct topo_machine *m)
{
    static char path[8192];
    const char *dir = topo_data_dir();
    if (!m->root[0]) {
        snprintf(path, sizeof path, "%s/%s", dir, m->file);
        return path;
    }
    struct stat st;
    snprintf(path, sizeof path, "%s/%s/sys", TOPO_ROOTS_DIR, m->root);
    if (stat(path, &st) == 0) { /* unpacked by the build (tests/topo/CMakeLists.txt) */
        snprintf(path, sizeof path, "%s/%s", TOPO_ROOTS_DIR, m->root);
        return path;
    }
    if (!topo_tmp_[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(topo_tmp_, sizeof topo_tmp_, "%s/usched-topo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(topo_tmp_)) TEST_FAIL_("mkdtemp %s: %s", topo_tmp_, strerror(errno));
        atexit(topo_tmp_cleanup_);
    }
    snprintf(path, sizeof path, "%s/%s", topo_tmp_, m->root);
    if (stat(path, &st) != 0) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "tar xjf '%s/%s' -C '%s'", dir, m->file, topo_tmp_);
        if (system(cmd) != 0) TEST_FAIL_("unpacking failed: %s", cmd);
        if (stat(path, &st) != 0) TEST_FAIL_("%s: no root %s after unpacking", m->file, path);
    }
    return path;
}

static inline const struct topo_machine *topo_machine_named(const char *name)
{
    for (int i = 0; i < TOPO_NMACHINES; i++)
        if (!strcmp(topo_machines[i].name, name)) return &topo_machines[i];
    TEST_FAIL_("no machine %s", name);
}

static inline usched__topo_t *topo_load_ok(const char *input, const char *cpus)
{
    usched__topo_t *t = NULL;
    char err[512] = "";
    int r = usched__topo_load(&t, input, cpus, err, sizeof err);
    if (r < 0) TEST_FAIL_("loading '%s' (cpus %s): %d %s", input, cpus ? cpus : "all", r, err);
    return t;
}

/* The text of a snapshot file in golden/. */
static inline char *topo_golden(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", TOPO_GOLDEN_DIR, name);
    FILE *f = fopen(path, "r");
    if (!f) TEST_FAIL_("golden file %s: %s (USCHED_UPDATE_GOLDEN=1 topo_machines writes it)", path,
                       strerror(errno));
    return test_slurp(f);
}

static inline int topo_mask_has(const uint64_t *m, int c) { return (int)(m[c / 64] >> (c % 64) & 1); }

/* What every topology must satisfy, whatever its source:
 *  - OS numbers strictly increase with the dense number, cpu_of_os inverts;
 *  - at each level the groups partition the CPUs: masks, weights and the
 *    per-CPU group agree, no group is empty, and the machine is one group;
 *  - SMT within L2 within LLC within package (NUMA may cut a package);
 *  - level_shared is symmetric and is the first level whose groups agree;
 *  - order(c) is a permutation starting with c, sorted by distance from c,
 *    and band_end delimits exactly the CPUs at each distance;
 *  - kinds lie in [0, nkinds), smt_width is the largest core. */
static inline void topo_check_invariants(const usched__topo_t *t)
{
    int n = usched__topo_ncpus(t), words = usched__topo_mask_words(t);
    ASSERT_GT(n, 0);
    ASSERT_EQ(words, (n + 63) / 64);
    for (int c = 0; c < n; c++) {
        if (c) ASSERT_LT(usched__topo_os_index(t, c - 1), usched__topo_os_index(t, c));
        ASSERT_EQ(usched__topo_cpu_of_os(t, usched__topo_os_index(t, c)), c);
    }
    ASSERT_EQ(usched__topo_cpu_of_os(t, -1), -1);
    ASSERT_EQ(usched__topo_cpu_of_os(t, usched__topo_os_index(t, n - 1) + 1), -1);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_MACHINE), 1);
    int widest = 0;
    for (int l = 0; l < TOPO_NLEVELS; l++) {
        int ng = usched__topo_ngroups(t, l), total = 0;
        ASSERT_GT(ng, 0);
        for (int g = 0; g < ng; g++) {
            const uint64_t *m = usched__topo_group_mask(t, l, g);
            int w = 0;
            for (int c = 0; c < n; c++) {
                ASSERT_EQ(topo_mask_has(m, c), usched__topo_group(t, c, l) == g);
                w += topo_mask_has(m, c);
            }
            ASSERT_GT(w, 0);
            ASSERT_EQ(usched__topo_group_weight(t, l, g), w);
            total += w;
            if (l == TOPO_SMT && w > widest) widest = w;
        }
        ASSERT_EQ(total, n);
    }
    ASSERT_EQ(usched__topo_smt_width(t), widest);
    ASSERT_GE(usched__topo_nkinds(t), 1);
    for (int c = 0; c < n; c++) {
        ASSERT_GE(usched__topo_core_kind(t, c), 0);
        ASSERT_LT(usched__topo_core_kind(t, c), usched__topo_nkinds(t));
    }
    for (int a = 0; a < n; a++) {
        const int *ord = usched__topo_order(t, a), *band = usched__topo_band_end(t, a);
        ASSERT_EQ(ord[0], a);
        ASSERT_EQ(band[TOPO_MACHINE], n);
        char *seen = calloc((size_t)n, 1);
        ASSERT(seen);
        for (int i = 0; i < n; i++) {
            int b = ord[i], d = usched__topo_level_shared(t, a, b);
            ASSERT(b >= 0 && b < n && !seen[b]);
            seen[b] = 1;
            ASSERT_EQ(d, usched__topo_level_shared(t, b, a));
            int first = TOPO_MACHINE;
            for (int l = TOPO_NUMA; l >= 0; l--)
                if (usched__topo_group(t, a, l) == usched__topo_group(t, b, l)) first = l;
            ASSERT_EQ(d, first);
            ASSERT_LT(i, band[d]);
            if (d > 0) ASSERT_GE(i, band[d - 1]);
            for (int l = TOPO_SMT; l < TOPO_PACKAGE; l++)
                if (usched__topo_group(t, a, l) == usched__topo_group(t, b, l))
                    ASSERT_EQ(usched__topo_group(t, a, l + 1), usched__topo_group(t, b, l + 1));
        }
        free(seen);
    }
}

#endif
