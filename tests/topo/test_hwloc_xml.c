/*
 * An independent check of the captured machines: the core, L2, LLC, package
 * and NUMA partitions usched reports must be those of hwloc's own XML export
 * of the same machine (for a sysfs dump, the lstopo-2.9.xml that hwloc 2.9's
 * lstopo wrote from it; for an XML machine, that XML). The golden snapshots
 * of topo_machines are usched's own output; this test derives each partition
 * here, from the XML's objects, with none of usched's topology code:
 *   core     the PUs of the Core object above the PU (the PU alone if none);
 *   L2       the PUs under the L2 cache above the PU, else the core;
 *   LLC      the PUs under the highest-level cache above the PU, else the
 *            package;
 *   package  the PUs of the Package above the PU, else every PU;
 *   NUMA     the PUs of the smallest NUMA node whose cpuset holds the PU; the
 *            PUs that no node holds form one group (every PU if none does).
 * Groups are compared as sets of OS indexes, so numbering plays no part.
 * With arguments, only the machines named run.
 */
#include <hwloc.h>
#include <stdbool.h>

#include "topo_test.h"

/* The XML export of machine m. */
static const char *xml_of(const struct topo_machine *m, char *buf, size_t len)
{
    const char *dir = topo_data_dir();
    if (!m->root[0]) {
        snprintf(buf, len, "%s/%s", dir, m->file);
    } else {
        size_t n = strlen(m->file) - strlen(".tar.bz2");
        snprintf(buf, len, "%s/%.*s.lstopo-2.9.xml", dir, (int)n, m->file);
    }
    if (access(buf, R_OK) != 0) TEST_FAIL_("%s: hwloc's export %s: %s", m->name, buf, strerror(errno));
    return buf;
}

static bool is_cache(hwloc_obj_t o)
{
    return hwloc_obj_type_is_cache(o->type) && o->attr->cache.type != HWLOC_OBJ_CACHE_INSTRUCTION;
}

/* The expected group (a set of OS indexes, within `all`) of PU p at level. */
static void expected(hwloc_topology_t x, hwloc_obj_t p, int level, hwloc_const_bitmap_t all,
                     hwloc_bitmap_t out)
{
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(x, HWLOC_OBJ_CORE, p);
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(x, HWLOC_OBJ_PACKAGE, p);
    hwloc_obj_t l2 = NULL, llc = NULL;
    for (hwloc_obj_t a = p->parent; a; a = a->parent) {
        if (!is_cache(a)) continue;
        if (a->attr->cache.depth == 2 && !l2) l2 = a;
        if (!llc || a->attr->cache.depth > llc->attr->cache.depth) llc = a;
    }
    hwloc_const_bitmap_t set = p->cpuset;
    switch (level) {
    case TOPO_SMT: set = core ? core->cpuset : p->cpuset; break;
    case TOPO_L2: set = l2 ? l2->cpuset : core ? core->cpuset : p->cpuset; break;
    case TOPO_LLC: set = llc ? llc->cpuset : pkg ? pkg->cpuset : all; break;
    case TOPO_PACKAGE: set = pkg ? pkg->cpuset : all; break;
    case TOPO_NUMA: {
        hwloc_obj_t best = NULL;
        for (hwloc_obj_t n = hwloc_get_next_obj_by_type(x, HWLOC_OBJ_NUMANODE, NULL); n;
             n = hwloc_get_next_obj_by_type(x, HWLOC_OBJ_NUMANODE, n))
            if (hwloc_bitmap_isset(n->cpuset, p->os_index) &&
                (!best || hwloc_bitmap_weight(n->cpuset) < hwloc_bitmap_weight(best->cpuset)))
                best = n;
        if (best) {
            set = best->cpuset;
            break;
        }
        /* no node holds p: the PUs no node holds */
        hwloc_bitmap_copy(out, all);
        for (hwloc_obj_t n = hwloc_get_next_obj_by_type(x, HWLOC_OBJ_NUMANODE, NULL); n;
             n = hwloc_get_next_obj_by_type(x, HWLOC_OBJ_NUMANODE, n))
            hwloc_bitmap_andnot(out, out, n->cpuset);
        return;
    }
    default: TEST_FAIL_("level %d", level);
    }
    hwloc_bitmap_and(out, set, all);
}

/* usched's group of dense CPU c at level, as OS indexes. */
static void reported(const usched__topo_t *t, int c, int level, hwloc_bitmap_t out)
{
    const uint64_t *m = usched__topo_group_mask(t, level, usched__topo_group(t, c, level));
    hwloc_bitmap_zero(out);
    for (int d = 0; d < usched__topo_ncpus(t); d++)
        if (topo_mask_has(m, d)) hwloc_bitmap_set(out, (unsigned)usched__topo_os_index(t, d));
}

static void machine(const struct topo_machine *m)
{
    char path[8192];
    hwloc_topology_t x;
    ASSERT_EQ(hwloc_topology_init(&x), 0);
    if (hwloc_topology_set_xml(x, xml_of(m, path, sizeof path)) != 0)
        TEST_FAIL_("%s: hwloc cannot read %s: %s", m->name, path, strerror(errno));
    ASSERT_EQ(hwloc_topology_load(x), 0);
    usched__topo_t *t = topo_load_ok(topo_machine_input(m), NULL);

    /* the same PUs, by OS index */
    hwloc_bitmap_t all = hwloc_bitmap_alloc(), got = hwloc_bitmap_alloc(), want = hwloc_bitmap_alloc();
    ASSERT(all && got && want);
    hwloc_bitmap_copy(all, hwloc_topology_get_topology_cpuset(x));
    for (int c = 0; c < usched__topo_ncpus(t); c++) hwloc_bitmap_set(got, (unsigned)usched__topo_os_index(t, c));
    if (!hwloc_bitmap_isequal(got, all)) {
        char *a = NULL, *b = NULL;
        hwloc_bitmap_list_asprintf(&a, got);
        hwloc_bitmap_list_asprintf(&b, all);
        TEST_FAIL_("%s: usched has PUs %s, hwloc's export %s", m->name, a, b);
    }

    static const int levels[] = {TOPO_SMT, TOPO_L2, TOPO_LLC, TOPO_PACKAGE, TOPO_NUMA};
    printf("%-14s %4d PUs:", m->name, usched__topo_ncpus(t));
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        int l = levels[i];
        for (int c = 0; c < usched__topo_ncpus(t); c++) {
            int os = usched__topo_os_index(t, c);
            hwloc_obj_t p = hwloc_get_pu_obj_by_os_index(x, (unsigned)os);
            ASSERT(p);
            expected(x, p, l, all, want);
            reported(t, c, l, got);
            if (!hwloc_bitmap_isequal(got, want)) {
                char *a = NULL, *b = NULL;
                hwloc_bitmap_list_asprintf(&a, got);
                hwloc_bitmap_list_asprintf(&b, want);
                TEST_FAIL_("%s: %s group of PU %d: usched says %s, hwloc's export %s", m->name,
                           usched__topo_level_name(l), os, a, b);
            }
        }
        printf(" %s %d", usched__topo_level_name(l), usched__topo_ngroups(t, l));
    }
    printf(" - as hwloc's export\n");
    hwloc_bitmap_free(all);
    hwloc_bitmap_free(got);
    hwloc_bitmap_free(want);
    usched__topo_free(t);
    hwloc_topology_destroy(x);
}

int main(int argc, char **argv)
{
    int ran = 0;
    for (int i = 0; i < TOPO_NMACHINES; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++) want |= !strcmp(argv[a], topo_machines[i].name);
        if (!want) continue;
        machine(&topo_machines[i]);
        ran++;
    }
    if (!ran) TEST_FAIL_("no machine matched the arguments");
    printf("ok: %d machines\n", ran);
    return 0;
}
