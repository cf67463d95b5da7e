/*
 * Distance and iteration by distance on the 2 x 6 x 2 Westmere dump, whose
 * numbering is not contiguous (packages alternate even/odd, HT siblings are
 * N and N+12: cpu1 and cpu13). Every pair is checked against the kernel's
 * own sibling files in the dump: thread_siblings_list (SMT), cache/index2
 * shared_cpu_list (L2), cache/index3 (LLC), core_siblings_list (package)
 * and node<N>/cpulist (NUMA).
 */
#include "topo_test.h"

#define NCPU 24

static usched__topo_t *t;
static uint64_t sib[NCPU][TOPO_MACHINE]; /* [dense cpu][level] dense mask */

/* Reads a sysfs list file (OS numbers) into a dense mask. */
static uint64_t read_list(const char *root, const char *rel)
{
    char path[8192], line[256] = "", err[256];
    snprintf(path, sizeof path, "%s/sys/devices/system/%s", root, rel);
    FILE *f = fopen(path, "r");
    if (!f) TEST_FAIL_("%s: %s", path, strerror(errno));
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    uint64_t os;
    if (usched__cpulist_parse(line, NCPU, &os, 1, err, sizeof err) < 0)
        TEST_FAIL_("%s: %s", path, err);
    uint64_t dense = 0;
    for (int i = 0; i < NCPU; i++)
        if (os >> i & 1) dense |= 1ull << usched__topo_cpu_of_os(t, i);
    return dense;
}

static int expected_level(int a, int b)
{
    for (int l = 0; l < TOPO_MACHINE; l++)
        if (sib[a][l] >> b & 1) return l;
    return TOPO_MACHINE;
}

int main(void)
{
    const char *root = topo_machine_input(topo_machine_named("westmere"));
    t = topo_load_ok(root, NULL);
    ASSERT_EQ(usched__topo_ncpus(t), NCPU);
    for (int os = 0; os < NCPU; os++) {
        int c = usched__topo_cpu_of_os(t, os);
        char rel[128];
        static const char *const files[] = {
            [TOPO_SMT] = "topology/thread_siblings_list",
            [TOPO_L2] = "cache/index2/shared_cpu_list",
            [TOPO_LLC] = "cache/index3/shared_cpu_list",
            [TOPO_PACKAGE] = "topology/core_siblings_list",
        };
        for (int l = TOPO_SMT; l <= TOPO_PACKAGE; l++) {
            snprintf(rel, sizeof rel, "cpu/cpu%d/%s", os, files[l]);
            sib[c][l] = read_list(root, rel);
        }
    }
    for (int node = 0; node < 2; node++) {
        char rel[64];
        snprintf(rel, sizeof rel, "node/node%d/cpulist", node);
        uint64_t m = read_list(root, rel);
        for (int c = 0; c < NCPU; c++)
            if (m >> c & 1) sib[c][TOPO_NUMA] = m;
    }

    /* Every pair, and every band of every CPU, as the kernel files say. */
    for (int a = 0; a < NCPU; a++) {
        const int *ord = usched__topo_order(t, a), *band = usched__topo_band_end(t, a);
        for (int b = 0; b < NCPU; b++)
            if (usched__topo_level_shared(t, a, b) != expected_level(a, b))
                TEST_FAIL_("cpu%d-cpu%d: level %s, the sibling files say %s", a, b,
                           usched__topo_level_name(usched__topo_level_shared(t, a, b)),
                           usched__topo_level_name(expected_level(a, b)));
        for (int l = 0, i = 0; l < TOPO_NLEVELS; l++) {
            uint64_t got = 0, want = 0;
            for (; i < band[l]; i++) got |= 1ull << ord[i];
            for (int b = 0; b < NCPU; b++)
                if (expected_level(a, b) == l) want |= 1ull << b;
            ASSERT_EQ_U(got, want);
        }
    }

    /* The example by hand: cpu1 (package 1, core with cpu13). */
    static const int want1[NCPU] = {1,  13, 3, 5, 7, 9, 11, 15, 17, 19, 21, 23,
                                    0,  2,  4, 6, 8, 10, 12, 14, 16, 18, 20, 22};
    static const int band1[TOPO_NLEVELS] = {2, 2, 12, 12, 12, 24};
    const int *ord = usched__topo_order(t, 1), *band = usched__topo_band_end(t, 1);
    for (int i = 0; i < NCPU; i++) ASSERT_EQ(ord[i], want1[i]);
    for (int l = 0; l < TOPO_NLEVELS; l++) ASSERT_EQ(band[l], band1[l]);
    ASSERT_EQ(usched__topo_order(t, 13)[1], 1);
    ASSERT_EQ(usched__topo_level_shared(t, 1, 13), TOPO_SMT);
    ASSERT_EQ(usched__topo_level_shared(t, 1, 3), TOPO_LLC);
    ASSERT_EQ(usched__topo_level_shared(t, 1, 2), TOPO_MACHINE);
    ASSERT_EQ(usched__topo_level_shared(t, 5, 5), TOPO_SMT);
    ASSERT_EQ(usched__topo_group_weight(t, TOPO_SMT, usched__topo_group(t, 1, TOPO_SMT)), 2);
    ASSERT_EQ_U(usched__topo_group_mask(t, TOPO_SMT, usched__topo_group(t, 1, TOPO_SMT))[0],
                (1u << 1) | (1u << 13));
    ASSERT_EQ_U(usched__topo_group_mask(t, TOPO_PACKAGE, usched__topo_group(t, 1, TOPO_PACKAGE))[0],
                0xaaaaaau);
    topo_check_invariants(t);
    usched__topo_free(t);
    return 0;
}
