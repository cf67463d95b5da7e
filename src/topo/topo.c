/*
 * Topology loading (hwloc) and the read-only model of docs/topology.md.
 *
 * Loading: hwloc builds its tree from one of four sources (this machine, a
 * synthetic string, an XML file as xmlcheck.c reads, checks and rewrites
 * it, a captured Linux root); an optional CPU list restricts it; then one
 * pass over the PUs fills the model below and everything a scheduler asks
 * afterwards is an array lookup.
 *
 * Model, per level (SMT, L2, LLC, package, NUMA, machine): the group of each
 * CPU, the member mask and weight of each group. Groups are numbered in
 * hwloc's tree order (the order of their first PU), CPUs by increasing OS
 * index. The hwloc object of each group is kept for the printers.
 *
 * Which hwloc object stands for a level (first ancestor of the PU of that
 * type, else the fallback):
 *   SMT      Core                  else the PU itself
 *   L2       L2 cache              else the SMT group
 *   LLC      L3 cache, else L2     else the package
 *   package  Package               else the machine
 *   NUMA     the smallest NUMA node whose cpuset holds the PU; CPUs that
 *            have none (a package with no node: offline-cpu0-node0) form
 *            one group of their own, keyed by the machine object
 *   machine  the root
 * hwloc decides what a core is (a Bulldozer module is two Cores under one
 * L2), so the SMT level never second-guesses it.
 */
#include <errno.h>
#include <hwloc.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fault.h"
#include "topo/topo_impl.h"

static const char *const level_names[] = {
#define X(id, name, desc) [USCHED_LVL_##id] = #name,
    USCHED_LEVEL_MAP(X)
#undef X
};

/* The hwloc object each level stands for when the machine has it (level_obj
 * below says what stands in when it does not), in the order of the levels. */
static const hwloc_obj_type_t level_hwloc[] = {
    [TOPO_SMT] = HWLOC_OBJ_CORE,         [TOPO_L2] = HWLOC_OBJ_L2CACHE,
    [TOPO_LLC] = HWLOC_OBJ_L3CACHE,      [TOPO_PACKAGE] = HWLOC_OBJ_PACKAGE,
    [TOPO_NUMA] = HWLOC_OBJ_NUMANODE,    [TOPO_MACHINE] = HWLOC_OBJ_MACHINE,
};
_Static_assert(sizeof level_names / sizeof *level_names == USCHED_NLEVELS &&
                   sizeof level_hwloc / sizeof *level_hwloc == USCHED_NLEVELS,
               "one name and one hwloc object per level of USCHED_LEVEL_MAP");
_Static_assert(TOPO_SMT == 0 && TOPO_MACHINE == USCHED_NLEVELS - 1,
               "levels run from the core (0) to the machine");

const char *usched__topo_level_name(int level)
{
    if (level < 0 || level >= TOPO_NLEVELS) return "?";
    return level_names[level];
}

int usched__topo_level_of(const char *name)
{
    for (int l = 0; name && l < TOPO_NLEVELS; l++)
        if (strcmp(name, level_names[l]) == 0) return l;
    return -1;
}

/* ---- loading ---------------------------------------------------------------- */

/* hwloc 2.x reads a captured root only through the environment: these
 * variables are set and restored under this lock around init + load. */
static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;

struct saved_env {
    const char *name;
    char *old; /* strdup'ed previous value, NULL if unset */
};

static int env_push(struct saved_env *e, const char *name, const char *value)
{
    const char *old = getenv(name);
    e->name = name;
    e->old = old ? usched__strdup(old) : NULL;
    if (old && !e->old) return -ENOMEM;
    return setenv(name, value, 1) == 0 ? 0 : -ENOMEM;
}

static void env_pop(struct saved_env *e)
{
    if (!e->name) return;
    if (e->old) setenv(e->name, e->old, 1);
    else unsetenv(e->name);
    free(e->old);
    e->name = NULL;
    e->old = NULL;
}

/* Most CPUs a topology may have: Linux's own limit (NR_CPUS is at most 8192
 * on x86-64, 4096 on arm64). The model keeps an ncpus x ncpus distance order
 * (256 MiB at 8192); a synthetic "pack:1000 core:1000 pu:1000" would
 * otherwise keep hwloc building objects for minutes. */
#define TOPO_MAX_CPUS 8192

/* The number of PUs an hwloc synthetic string describes, as the product of
 * the arities of its levels ("type:N" or "N", N as strtoul base 0 reads it;
 * attributes in parentheses and
 * memory children in brackets do not multiply). Saturates above
 * TOPO_MAX_CPUS; hwloc itself judges the syntax. */
static long synthetic_cpus(const char *s)
{
    long n = 1;
    while (*s) {
        while (*s == ' ' || *s == '\t' || *s == '\n') s++;
        const char *tok = s;
        while (*s && *s != ' ' && *s != '\t' && *s != '\n') s++;
        if (tok == s || *tok == '[') continue;
        const char *c = tok;
        for (const char *p = tok; p < s && *p != '('; p++)
            if (*p == ':') c = p + 1;
        if (*c < '0' || *c > '9') continue;
        /* hwloc reads arities with strtoul base 0: "0xff2" is 4082 (found
         * by tests/fuzz/fuzz_topo_synthetic). */
        unsigned long v = strtoul(c, NULL, 0);
        if (v > TOPO_MAX_CPUS) v = TOPO_MAX_CPUS + 1;
        if (v > 0) n = n * (long)v > TOPO_MAX_CPUS ? TOPO_MAX_CPUS + 1 : n * (long)v;
    }
    return n;
}

/* Which source `input` names (see usched__topo_load); -ENOENT/-EINVAL with
 * the message in err for a path that cannot be a topology. */
static int classify(const char *input, enum topo_source *kind, char *err, size_t errlen)
{
    struct stat st;
    if (!input || !*input) {
        *kind = TOPO_SRC_LIVE;
    } else if (stat(input, &st) == 0 && S_ISDIR(st.st_mode)) {
        *kind = TOPO_SRC_FSROOT;
        char cpu[4096];
        snprintf(cpu, sizeof cpu, "%s/sys/devices/system/cpu", input);
        if (stat(cpu, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, errlen,
                     "input '%s': directory is not a captured Linux root "
                     "(no sys/devices/system/cpu inside)",
                     input);
            return -EINVAL;
        }
    } else if (stat(input, &st) == 0) {
        *kind = TOPO_SRC_XML;
        if (!S_ISREG(st.st_mode)) {
            /* hwloc would read a device or FIFO forever (/dev/zero). */
            snprintf(err, errlen, "input '%s': not a regular file, a directory or a synthetic string",
                     input);
            return -EINVAL;
        }
    } else if (strchr(input, '/') || strstr(input, ".xml") || !strchr(input, ':')) {
        /* Synthetic descriptions are "type:count" lists; anything else that
         * does not exist was meant as a path. */
        snprintf(err, errlen, "input '%s': no such file or directory", input);
        return -ENOENT;
    } else {
        *kind = TOPO_SRC_SYNTHETIC;
        long n = synthetic_cpus(input);
        if (n > TOPO_MAX_CPUS) {
            snprintf(err, errlen, "input '%s': describes more than %d CPUs, the most usched supports",
                     input, TOPO_MAX_CPUS);
            return -EINVAL;
        }
    }
    return 0;
}

/* Every PU has its own OS index, known and in range: an XML file may leave
 * one out (hwloc then reports HWLOC_UNKNOWN_INDEX) or repeat one, and the
 * dense numbering needs them distinct (found by tests/fuzz/fuzz_topo_xml). */
static int check_os_indices(hwloc_topology_t hw, const char *input, char *err, size_t errlen)
{
    hwloc_bitmap_t seen = hwloc_bitmap_alloc();
    if (!seen) {
        snprintf(err, errlen, "topology: out of memory");
        return -ENOMEM;
    }
    int r = 0;
    for (hwloc_obj_t pu = NULL; !r && (pu = hwloc_get_next_obj_by_type(hw, HWLOC_OBJ_PU, pu));) {
        if (pu->os_index > TOPO_MAX_OS_INDEX) {
            if (pu->os_index == HWLOC_UNKNOWN_INDEX)
                snprintf(err, errlen, "input '%s': a CPU has no OS index", input ? input : "");
            else
                snprintf(err, errlen, "input '%s': a CPU has OS index %u, above %d",
                         input ? input : "", pu->os_index, TOPO_MAX_OS_INDEX);
            r = -EINVAL;
        } else if (hwloc_bitmap_isset(seen, pu->os_index)) {
            snprintf(err, errlen, "input '%s': two CPUs have OS index %u", input ? input : "",
                     pu->os_index);
            r = -EINVAL;
        } else {
            hwloc_bitmap_set(seen, pu->os_index);
        }
    }
    hwloc_bitmap_free(seen);
    return r;
}

/* Creates and loads the hwloc topology of `input`; sets *kind. */
static int hw_load(hwloc_topology_t *out, const char *input, enum topo_source *kind,
                   char *err, size_t errlen)
{
    hwloc_topology_t hw;
    struct saved_env e1 = {0}, e2 = {0}, e3 = {0};
    char *xml = NULL; /* an XML input as read and checked, written anew for hwloc */
    size_t xml_len = 0;
    int r = classify(input, kind, err, errlen);
    if (r == 0 && *kind == TOPO_SRC_XML) r = usched__topo_xml_read(input, &xml, &xml_len, err, errlen);
    if (r < 0) return r;
    if (*kind == TOPO_SRC_FSROOT) {
        /* hwloc reads both variables when it loads; the x86 backend would
         * otherwise mix in this host's CPUID (tests/data/topologies/README.md). */
        pthread_mutex_lock(&env_lock);
        r = env_push(&e1, "HWLOC_FSROOT", input);
        if (!r) r = env_push(&e2, "HWLOC_COMPONENTS", "linux,stop");
        /* A root without CPU data makes hwloc print its own complaint on
         * stderr; the caller reports the failure in one line instead
         * (unless the user asked for hwloc's messages). */
        if (!r && !getenv("HWLOC_HIDE_ERRORS")) r = env_push(&e3, "HWLOC_HIDE_ERRORS", "2");
    }
    if (!r && hwloc_topology_init(&hw) < 0) r = -ENOMEM;
    if (r == -ENOMEM) {
        snprintf(err, errlen, "topology: out of memory");
    } else {
        switch (*kind) {
        case TOPO_SRC_LIVE:
            /* hwloc refuses RESTRICT_TO_CPUBINDING without IS_THISSYSTEM. */
            if (hwloc_topology_set_flags(hw, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM |
                                                 HWLOC_TOPOLOGY_FLAG_RESTRICT_TO_CPUBINDING) < 0)
                r = -EINVAL;
            break;
        case TOPO_SRC_XML:
            if (xml_len > INT_MAX || hwloc_topology_set_xmlbuffer(hw, xml, (int)xml_len) < 0) r = -EINVAL;
            break;
        case TOPO_SRC_SYNTHETIC:
            if (hwloc_topology_set_synthetic(hw, input) < 0) r = -EINVAL;
            break;
        case TOPO_SRC_FSROOT: break;
        }
        if (!r && hwloc_topology_load(hw) < 0) r = -EINVAL;
        if (r < 0) {
            static const char *const why[] = {
                [TOPO_SRC_LIVE] = "hwloc cannot read this machine's topology",
                [TOPO_SRC_SYNTHETIC] = ("malformed hwloc synthetic description "
                                        "(expected levels like 'pack:2 l3:1 l2:6 core:1 pu:2')"),
                [TOPO_SRC_XML] = "not an XML topology hwloc can read",
                [TOPO_SRC_FSROOT] = "hwloc cannot read this captured Linux root",
            };
            snprintf(err, errlen, "input '%s': %s", input ? input : "", why[*kind]);
            hwloc_topology_destroy(hw);
        }
    }
    free(xml);
    if (*kind == TOPO_SRC_FSROOT) {
        env_pop(&e3);
        env_pop(&e2);
        env_pop(&e1);
        pthread_mutex_unlock(&env_lock);
    }
    if (r < 0) return r;
    int npu = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PU);
    if (npu <= 0 || npu > TOPO_MAX_CPUS) {
        if (npu <= 0) snprintf(err, errlen, "input '%s': the topology has no CPU", input ? input : "");
        else
            snprintf(err, errlen, "input '%s': %d CPUs, more than the %d usched supports",
                     input ? input : "", npu, TOPO_MAX_CPUS);
        hwloc_topology_destroy(hw);
        return -EINVAL;
    }
    if ((r = check_os_indices(hw, input, err, errlen)) < 0) {
        hwloc_topology_destroy(hw);
        return r;
    }
    *out = hw;
    return 0;
}

static int cmp_uint(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return (x > y) - (x < y);
}

/* OS indices of all PUs, ascending (the dense numbering). Caller frees. */
static unsigned *sorted_os(hwloc_topology_t hw, int *n)
{
    *n = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PU);
    unsigned *os = usched__malloc((size_t)*n * sizeof *os);
    if (!os) return NULL;
    for (int i = 0; i < *n; i++) os[i] = hwloc_get_obj_by_type(hw, HWLOC_OBJ_PU, i)->os_index;
    qsort(os, (size_t)*n, sizeof *os, cmp_uint);
    return os;
}

/* Restricts hw to the CPUs of `cpus` (dense numbers of the unrestricted
 * topology). */
static int restrict_cpus(hwloc_topology_t hw, const char *cpus, char *err, size_t errlen)
{
    int n, r = 0;
    unsigned *os = sorted_os(hw, &n);
    int words = (n + 63) / 64;
    uint64_t *mask = usched__calloc((size_t)words, sizeof *mask);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (!os || !mask || !set) {
        snprintf(err, errlen, "cpus '%s': out of memory", cpus);
        r = -ENOMEM;
        goto out;
    }
    r = usched__cpulist_parse(cpus, n, mask, words, err, errlen);
    if (r < 0) goto out;
    for (int c = 0; c < n; c++)
        if (mask[c / 64] >> (c % 64) & 1) hwloc_bitmap_set(set, os[c]);
    if (hwloc_topology_restrict(hw, set, HWLOC_RESTRICT_FLAG_REMOVE_CPULESS) < 0) {
        snprintf(err, errlen, "cpus '%s': hwloc cannot restrict the topology (%s)", cpus,
                 strerror(errno));
        r = -EINVAL;
    }
out:
    hwloc_bitmap_free(set);
    free(mask);
    free(os);
    return r;
}

/* ---- the model ------------------------------------------------------------- */

static hwloc_obj_t ancestor(hwloc_obj_t pu, hwloc_obj_type_t type)
{
    for (hwloc_obj_t o = pu->parent; o; o = o->parent)
        if (o->type == type) return o;
    return NULL;
}

/* The object standing for `level` for this PU (see the top of the file). */
static hwloc_obj_t level_obj(usched__topo_t *t, hwloc_obj_t pu, int level, hwloc_obj_t numa)
{
    hwloc_obj_t o;
    switch (level) {
    case TOPO_SMT: return (o = ancestor(pu, level_hwloc[TOPO_SMT])) ? o : pu;
    case TOPO_L2: return (o = ancestor(pu, level_hwloc[TOPO_L2])) ? o : level_obj(t, pu, TOPO_SMT, numa);
    case TOPO_LLC:
        if ((o = ancestor(pu, level_hwloc[TOPO_LLC]))) return o;
        if ((o = ancestor(pu, level_hwloc[TOPO_L2]))) return o;
        return level_obj(t, pu, TOPO_PACKAGE, numa);
    case TOPO_PACKAGE: return (o = ancestor(pu, level_hwloc[TOPO_PACKAGE])) ? o : hwloc_get_root_obj(t->hw);
    case TOPO_NUMA: return numa ? numa : hwloc_get_root_obj(t->hw);
    default: return hwloc_get_root_obj(t->hw);
    }
}

/* The smallest NUMA node whose cpuset holds the PU, NULL if none. */
static hwloc_obj_t local_numa(hwloc_topology_t hw, hwloc_obj_t pu)
{
    hwloc_obj_t best = NULL;
    int bestw = 0;
    for (hwloc_obj_t n = NULL; (n = hwloc_get_next_obj_by_type(hw, HWLOC_OBJ_NUMANODE, n));) {
        if (!n->cpuset || !hwloc_bitmap_isset(n->cpuset, pu->os_index)) continue;
        int w = hwloc_bitmap_weight(n->cpuset);
        if (!best || w < bestw) best = n, bestw = w;
    }
    return best;
}

static void *xcalloc(size_t n, size_t size, int *fail)
{
    void *p = usched__calloc(n ? n : 1, size);
    if (!p) *fail = 1;
    return p;
}

/* Kinds present among the CPUs, in hwloc's order (least performant first),
 * renumbered densely. */
static void fill_kinds(usched__topo_t *t)
{
    int nr = hwloc_cpukinds_get_nr(t->hw, 0);
    int used[64] = {0};
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    t->nkinds = 1;
    if (nr <= 1 || nr > 64 || !set) {
        hwloc_bitmap_free(set);
        return;
    }
    for (int k = 0; k < nr; k++) {
        if (hwloc_cpukinds_get_info(t->hw, (unsigned)k, set, NULL, NULL, NULL, 0) < 0) continue;
        for (int c = 0; c < t->ncpus; c++)
            if (hwloc_bitmap_isset(set, (unsigned)t->os[c])) t->kind[c] = k, used[k] = 1;
    }
    int dense[64], nk = 0;
    for (int k = 0; k < nr; k++) dense[k] = used[k] ? nk++ : 0;
    for (int c = 0; c < t->ncpus; c++) t->kind[c] = dense[t->kind[c]];
    t->nkinds = nk ? nk : 1;
    hwloc_bitmap_free(set);
}

/* Per CPU, all CPUs by increasing distance (itself first, then ascending
 * within each band) and the band ends. Counting sort on the distance. */
static void fill_order(usched__topo_t *t)
{
    int n = t->ncpus;
    for (int c = 0; c < n; c++) {
        int *ord = t->order + (size_t)c * n, *band = t->band + (size_t)c * TOPO_NLEVELS;
        int count[TOPO_NLEVELS] = {0};
        for (int o = 0; o < n; o++) count[usched__topo_level_shared(t, c, o)]++;
        int start[TOPO_NLEVELS], sum = 0;
        for (int l = 0; l < TOPO_NLEVELS; l++) {
            start[l] = sum;
            sum += count[l];
            band[l] = sum;
        }
        ord[start[TOPO_SMT]++] = c;
        for (int o = 0; o < n; o++)
            if (o != c) ord[start[usched__topo_level_shared(t, c, o)]++] = o;
    }
}

static int build_model(usched__topo_t *t)
{
    hwloc_topology_t hw = t->hw;
    int fail = 0, n = t->ncpus = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PU);
    unsigned *os = sorted_os(hw, &n);
    if (!os) return -ENOMEM;
    t->words = (n + 63) / 64;
    t->os = xcalloc((size_t)n, sizeof *t->os, &fail);
    t->pu = xcalloc((size_t)n, sizeof *t->pu, &fail);
    t->kind = xcalloc((size_t)n, sizeof *t->kind, &fail);
    t->max_os = n ? (int)os[n - 1] : 0;
    t->cpu_of_os = xcalloc((size_t)t->max_os + 1, sizeof *t->cpu_of_os, &fail);
    t->order = xcalloc((size_t)n * n, sizeof *t->order, &fail);
    t->band = xcalloc((size_t)n * TOPO_NLEVELS, sizeof *t->band, &fail);
    hwloc_obj_t *numa = xcalloc((size_t)n, sizeof *numa, &fail);
    for (int l = 0; l < TOPO_NLEVELS; l++) {
        t->group[l] = xcalloc((size_t)n, sizeof *t->group[l], &fail);
        t->gobj[l] = xcalloc((size_t)n, sizeof *t->gobj[l], &fail);
    }
    if (fail) {
        free(os);
        free(numa);
        return -ENOMEM;
    }
    for (int i = 0; i <= t->max_os; i++) t->cpu_of_os[i] = -1;
    for (int c = 0; c < n; c++) {
        t->os[c] = (int)os[c];
        t->cpu_of_os[os[c]] = c;
    }
    free(os);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t pu = hwloc_get_obj_by_type(hw, HWLOC_OBJ_PU, (unsigned)i);
        int c = t->cpu_of_os[pu->os_index];
        t->pu[c] = pu;
        numa[c] = local_numa(hw, pu);
    }

    /* Groups in tree order: walk PUs in hwloc's logical order and number each
     * level's object at its first PU. userdata marks numbered objects. */
    for (int l = 0; l < TOPO_NLEVELS; l++) {
        for (int c = 0; c < n; c++) level_obj(t, t->pu[c], l, numa[c])->userdata = NULL;
        int ng = 0;
        for (int i = 0; i < n; i++) {
            hwloc_obj_t pu = hwloc_get_obj_by_type(hw, HWLOC_OBJ_PU, (unsigned)i);
            int c = t->cpu_of_os[pu->os_index];
            hwloc_obj_t o = level_obj(t, pu, l, numa[c]);
            if (!o->userdata) {
                t->gobj[l][ng] = o;
                o->userdata = (void *)(intptr_t)++ng;
            }
            t->group[l][c] = (int)(intptr_t)o->userdata - 1;
        }
        for (int c = 0; c < n; c++) level_obj(t, t->pu[c], l, numa[c])->userdata = NULL;
        t->ngroups[l] = ng;
        t->masks[l] = xcalloc((size_t)ng * t->words, sizeof *t->masks[l], &fail);
        t->weight[l] = xcalloc((size_t)ng, sizeof *t->weight[l], &fail);
        if (fail) break;
        for (int c = 0; c < n; c++) {
            int g = t->group[l][c];
            t->masks[l][(size_t)g * t->words + c / 64] |= UINT64_C(1) << (c % 64);
            t->weight[l][g]++;
        }
    }
    free(numa);
    if (fail) return -ENOMEM;
    for (int g = 0; g < t->ngroups[TOPO_SMT]; g++)
        if (t->weight[TOPO_SMT][g] > t->smt_width) t->smt_width = t->weight[TOPO_SMT][g];
    fill_kinds(t);
    fill_order(t);
    return 0;
}

/* Records each PU's LLC as loaded, before restrict_cpus or a quota removes
 * CPUs from t->hw (usched__topo_llc_whole_os). */
static int whole_llc_record(usched__topo_t *t)
{
    int n = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_PU);
    /* From the PUs' OS indices, not the root's cpuset: an XML topology may
     * give a PU an index outside every cpuset (fuzz_topo_xml's seed
     * crash-pu-index-outside-cpuset.xml). */
    int max = 0;
    for (int i = 0; i < n; i++) {
        int os = (int)hwloc_get_obj_by_type(t->hw, HWLOC_OBJ_PU, (unsigned)i)->os_index;
        if (os > max) max = os;
    }
    t->whole_llc = usched__calloc((size_t)max + 1, sizeof *t->whole_llc);
    t->whole_sets = usched__calloc((size_t)n + 1, sizeof *t->whole_sets);
    if (!t->whole_llc || !t->whole_sets) return -ENOMEM;
    t->whole_max_os = max;
    for (int i = 0; i < n; i++) {
        hwloc_obj_t pu = hwloc_get_obj_by_type(t->hw, HWLOC_OBJ_PU, (unsigned)i);
        hwloc_const_cpuset_t llc = level_obj(t, pu, TOPO_LLC, NULL)->cpuset;
        int k = 0; /* the set already recorded for this LLC, if any */
        while (k < t->whole_nsets && !hwloc_bitmap_isequal(t->whole_sets[k], llc)) k++;
        if (k == t->whole_nsets) {
            if (!(t->whole_sets[k] = hwloc_bitmap_dup(llc))) return -ENOMEM;
            t->whole_nsets++;
        }
        t->whole_llc[pu->os_index] = t->whole_sets[k];
    }
    return 0;
}

int usched__topo_llc_whole_os(const usched__topo_t *t, int cpu, int *os, int max)
{
    int me = t->os[cpu], n = 0, i;
    hwloc_const_bitmap_t set = me <= t->whole_max_os ? t->whole_llc[me] : NULL;
    if (!set) { /* not recorded (cannot happen after a load): the CPU alone */
        if (max > 0) os[0] = me;
        return 1;
    }
    hwloc_bitmap_foreach_begin(i, set) {
        if (n < max) os[n] = i;
        n++;
    }
    hwloc_bitmap_foreach_end();
    return n;
}

int usched__topo_load(usched__topo_t **out, const char *input, const char *cpus, char *err,
                      size_t errlen)
{
    *out = NULL;
    if (errlen) err[0] = '\0';
    usched__topo_t *t = usched__calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "topology: out of memory");
        return -ENOMEM;
    }
    int r = hw_load(&t->hw, input, &t->source, err, errlen);
    if (r < 0) {
        free(t);
        return r;
    }
    t->live = t->source == TOPO_SRC_LIVE;
    if ((r = whole_llc_record(t)) < 0) {
        snprintf(err, errlen, "topology: out of memory");
        usched__topo_free(t);
        return r;
    }
    if (cpus && (r = restrict_cpus(t->hw, cpus, err, errlen)) < 0) {
        usched__topo_free(t);
        return r;
    }
    if ((r = build_model(t)) < 0) {
        snprintf(err, errlen, "topology: out of memory");
        usched__topo_free(t);
        return r;
    }
    *out = t;
    return 0;
}

/* Frees the model built by build_model (not the hwloc topology). */
static void free_model(usched__topo_t *t)
{
    for (int l = 0; l < TOPO_NLEVELS; l++) {
        free(t->group[l]);
        free(t->gobj[l]);
        free(t->masks[l]);
        free(t->weight[l]);
        t->group[l] = NULL;
        t->gobj[l] = NULL;
        t->masks[l] = NULL;
        t->weight[l] = NULL;
    }
    free(t->os);
    free(t->pu);
    free(t->kind);
    free(t->cpu_of_os);
    free(t->order);
    free(t->band);
    t->os = t->cpu_of_os = t->kind = t->order = t->band = NULL;
    t->pu = NULL;
    t->smt_width = 0;
}

int usched__topo_restrict(usched__topo_t *t, const uint64_t *mask, char *err, size_t errlen)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    int r = set ? 0 : -ENOMEM, n = 0;
    for (int c = 0; set && c < t->ncpus; c++)
        if (mask[c / 64] >> (c % 64) & 1) hwloc_bitmap_set(set, (unsigned)t->os[c]), n++;
    if (!r && !n) {
        snprintf(err, errlen, "topology: cannot restrict to no CPU");
        r = -EINVAL;
    } else if (!r && hwloc_topology_restrict(t->hw, set, HWLOC_RESTRICT_FLAG_REMOVE_CPULESS) < 0) {
        /* hwloc leaves the topology unusable only on ENOMEM; the model
         * still describes it otherwise. */
        snprintf(err, errlen, "topology: hwloc cannot restrict it (%s)", strerror(errno));
        r = errno == ENOMEM ? -ENOMEM : -EINVAL;
    } else if (!r) {
        free_model(t);
        if ((r = build_model(t)) < 0) snprintf(err, errlen, "topology: out of memory");
    } else {
        snprintf(err, errlen, "topology: out of memory");
    }
    hwloc_bitmap_free(set);
    return r;
}

void usched__topo_free(usched__topo_t *t)
{
    if (!t) return;
    free_model(t);
    for (int i = 0; i < t->whole_nsets; i++) hwloc_bitmap_free(t->whole_sets[i]);
    free(t->whole_sets);
    free(t->whole_llc);
    if (t->hw) hwloc_topology_destroy(t->hw);
    free(t);
}

/* ---- queries (all O(1) or O(words)) ------------------------------------------ */

int usched__topo_is_live(const usched__topo_t *t) { return t->live; }
int usched__topo_ncpus(const usched__topo_t *t) { return t->ncpus; }
int usched__topo_mask_words(const usched__topo_t *t) { return t->words; }
int usched__topo_os_index(const usched__topo_t *t, int cpu) { return t->os[cpu]; }
int usched__topo_ngroups(const usched__topo_t *t, int level) { return t->ngroups[level]; }
int usched__topo_group(const usched__topo_t *t, int cpu, int level) { return t->group[level][cpu]; }
int usched__topo_core_kind(const usched__topo_t *t, int cpu) { return t->kind[cpu]; }
int usched__topo_nkinds(const usched__topo_t *t) { return t->nkinds; }
int usched__topo_smt_width(const usched__topo_t *t) { return t->smt_width; }

int usched__topo_cpu_of_os(const usched__topo_t *t, int os_index)
{
    if (os_index < 0 || os_index > t->max_os) return -1;
    return t->cpu_of_os[os_index];
}

const uint64_t *usched__topo_group_mask(const usched__topo_t *t, int level, int g)
{
    return t->masks[level] + (size_t)g * t->words;
}

int usched__topo_group_weight(const usched__topo_t *t, int level, int g)
{
    return t->weight[level][g];
}

int usched__topo_level_shared(const usched__topo_t *t, int a, int b)
{
    for (int l = 0; l < TOPO_MACHINE; l++)
        if (t->group[l][a] == t->group[l][b]) return l;
    return TOPO_MACHINE;
}

const int *usched__topo_order(const usched__topo_t *t, int cpu)
{
    return t->order + (size_t)cpu * t->ncpus;
}

const int *usched__topo_band_end(const usched__topo_t *t, int cpu)
{
    return t->band + (size_t)cpu * TOPO_NLEVELS;
}
