/*
 * Every captured machine of tests/data/topologies: the counts usched reports
 * against the README's table, the model invariants, and, for each SMT
 * machine, the dfly and json output against the snapshots in golden/.
 *
 * USCHED_UPDATE_GOLDEN=1 rewrites the snapshots instead of comparing (then
 * check them by hand against the lstopo consoles before committing); such
 * a run compared nothing, so it reports itself skipped (exit 77), and under
 * CI=true it is refused: the test fails without writing.
 * With an argument, only the machines named on the command line run.
 */
#include "topo_test.h"

static char *render(const usched__topo_t *t, const char *format)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ASSERT(m);
    ASSERT_OK(usched__topo_print(t, m, format));
    ASSERT_EQ(fclose(m), 0);
    return buf;
}

/* USCHED_UPDATE_GOLDEN=1: write the snapshots instead of comparing. */
static bool updating(void)
{
    const char *upd = getenv("USCHED_UPDATE_GOLDEN");
    if (!upd || strcmp(upd, "1")) return false;
    const char *ci = getenv("CI");
    if (ci && !strcmp(ci, "true"))
        TEST_FAIL_("USCHED_UPDATE_GOLDEN=1 under CI=true: golden files are never rewritten in CI");
    return true;
}

static void golden(const struct topo_machine *m, const usched__topo_t *t, const char *format)
{
    char name[256], path[4096];
    snprintf(name, sizeof name, "%s.%s", m->name, format);
    snprintf(path, sizeof path, "%s/%s", TOPO_GOLDEN_DIR, name);
    char *got = render(t, format);
    if (updating()) {
        FILE *f = fopen(path, "w");
        if (!f || fputs(got, f) < 0 || fclose(f) != 0) TEST_FAIL_("writing %s", path);
        printf("  wrote %s\n", path);
    } else {
        char *want = topo_golden(name);
        if (strcmp(got, want) != 0) TEST_FAIL_("%s %s differs from %s", m->name, format, path);
        free(want);
    }
    free(got);
}

static void machine(const struct topo_machine *m)
{
    const char *input = topo_machine_input(m);
    double t0 = test_now();
    usched__topo_t *t = topo_load_ok(input, NULL);
    double ms = (test_now() - t0) * 1e3;
    int llcs = m->l3 ? m->l3 : m->l2; /* KNL: no L3, its L2 tiles are the LLCs */
    printf("%-14s packages %3d cores %3d pus %3d llcs %2d numa %d l2 %3d smt %d kinds %d  (%.1f ms)\n",
           m->name, usched__topo_ngroups(t, TOPO_PACKAGE), usched__topo_ngroups(t, TOPO_SMT),
           usched__topo_ncpus(t), usched__topo_ngroups(t, TOPO_LLC),
           usched__topo_ngroups(t, TOPO_NUMA), usched__topo_ngroups(t, TOPO_L2),
           usched__topo_smt_width(t), usched__topo_nkinds(t), ms);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_PACKAGE), m->packages);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_SMT), m->cores);
    ASSERT_EQ(usched__topo_ncpus(t), m->pus);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_LLC), llcs);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_L2), m->l2);
    ASSERT_EQ(usched__topo_smt_width(t), m->smt);
    ASSERT_EQ(usched__topo_is_live(t), 0);
    /* offline-cpu0-node0: package 0 has no NUMA node, so its CPUs form a
     * second NUMA group beside node 1 (hwloc counts one node). */
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_NUMA), m->numa + !strcmp(m->name, "offline"));
    topo_check_invariants(t);
    if (m->smt > 1) {
        golden(m, t, "dfly");
        golden(m, t, "json");
    }
    usched__topo_free(t);
}

int main(int argc, char **argv)
{
    bool update = updating(); /* refused under CI before anything is written */
    for (int i = 0; i < TOPO_NMACHINES; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++) want |= !strcmp(argv[a], topo_machines[i].name);
        if (want) machine(&topo_machines[i]);
    }

    /* Details the counts do not show. */
    usched__topo_t *t = topo_load_ok(topo_machine_input(topo_machine_named("hybrid")), NULL);
    ASSERT_EQ(usched__topo_nkinds(t), 2); /* E-cores (kind 0) = OS 12-19, P-cores 0-11 */
    for (int c = 0; c < usched__topo_ncpus(t); c++)
        ASSERT_EQ(usched__topo_core_kind(t, c), usched__topo_os_index(t, c) < 12 ? 1 : 0);
    usched__topo_free(t);

    /* Bulldozer: two cores per module, sharing the L2. */
    t = topo_load_ok(topo_machine_input(topo_machine_named("bulldozer_s")), NULL);
    ASSERT_EQ(usched__topo_level_shared(t, 0, 1), TOPO_L2);
    ASSERT_EQ(usched__topo_level_shared(t, 0, 2), TOPO_LLC);
    usched__topo_free(t);

    /* offline-cpu0-node0: OS 4-20 online, dense 0-16. */
    t = topo_load_ok(topo_machine_input(topo_machine_named("offline")), NULL);
    ASSERT_EQ(usched__topo_os_index(t, 0), 4);
    ASSERT_EQ(usched__topo_os_index(t, 16), 20);
    ASSERT_EQ(usched__topo_cpu_of_os(t, 3), -1);
    usched__topo_free(t);

    /* A CPU list on a real machine: Westmere dense 0-3 and 12-13 are OS
     * 0-3, 12-13: two cores with both threads, two single threads. */
    t = topo_load_ok(topo_machine_input(topo_machine_named("westmere")), "0-3,12,13");
    ASSERT_EQ(usched__topo_ncpus(t), 6);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_PACKAGE), 2);
    ASSERT_EQ(usched__topo_ngroups(t, TOPO_SMT), 4);
    ASSERT_EQ(usched__topo_level_shared(t, usched__topo_cpu_of_os(t, 1), usched__topo_cpu_of_os(t, 13)),
              TOPO_SMT);
    topo_check_invariants(t);
    usched__topo_free(t);
    if (update) {
        printf("skipped: USCHED_UPDATE_GOLDEN=1 rewrote the snapshots and compared nothing; run again without it\n");
        return 77;
    }
    return 0;
}
