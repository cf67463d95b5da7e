/*
 * Topology printers (docs/topology.md) and the public usched_topo_print.
 *
 *   tree  hwloc's tree, indented two columns a level, caches with sizes,
 *         NUMA nodes with memory, each object with its usched CPU list.
 *   dfly  DragonFly BSD's hw.cpu_topology.tree (notes/kernel-algorithms.md
 *         section 3.3): PACKAGE, CHIP ID <package physical id>, CORE ID
 *         <core physical id>, THREAD ID <position in the core>; members as
 *         "cpuN " (OS number, ascending, each followed by a space, as the
 *         kernel's old format prints them); children by ID ascending.
 *   json  counts, one object per CPU, and the member list of every group.
 *
 * Every printer writes only to f; usched_topo_print renders into memory and
 * copies out on success, so a failure never leaves a partial printout.
 */
#include <errno.h>
#include <hwloc.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "usched.h"
#include "base/error.h"
#include "base/export.h"
#include "topo/topo_impl.h"

/* ---- helpers ------------------------------------------------------------------ */

static int first_cpu(const usched__topo_t *t, const uint64_t *mask)
{
    for (int w = 0; w < t->words; w++)
        if (mask[w]) return w * 64 + __builtin_ctzll(mask[w]);
    return -1;
}

#define FOR_EACH_CPU(t, mask, c)                                                \
    for (int c = 0; c < (t)->ncpus; c++)                                        \
        if ((mask)[c / 64] >> (c % 64) & 1)

/* "0-5,12,14-15" (dense CPU numbers), or "none". */
void usched__topo_put_list(FILE *f, const usched__topo_t *t, const uint64_t *mask)
{
    int any = 0;
    for (int c = 0; c < t->ncpus;) {
        if (!(mask[c / 64] >> (c % 64) & 1)) {
            c++;
            continue;
        }
        int e = c;
        while (e + 1 < t->ncpus && (mask[(e + 1) / 64] >> ((e + 1) % 64) & 1)) e++;
        fprintf(f, "%s%d", any ? "," : "", c);
        if (e > c) fprintf(f, "-%d", e);
        any = 1;
        c = e + 1;
    }
    if (!any) fputs("none", f);
}

/* The dense mask of an hwloc cpuset (OS numbers). */
static void mask_of_set(const usched__topo_t *t, hwloc_const_bitmap_t set, uint64_t *mask)
{
    memset(mask, 0, (size_t)t->words * sizeof *mask);
    if (!set) return;
    int i;
    hwloc_bitmap_foreach_begin(i, set) {
        int c = usched__topo_cpu_of_os(t, i);
        if (c >= 0) mask[c / 64] |= UINT64_C(1) << (c % 64);
    }
    hwloc_bitmap_foreach_end();
}

/* Physical ID of a group's object: hwloc's OS index, -1 if it has none. */
static long group_id(const usched__topo_t *t, int level, int g)
{
    hwloc_obj_t o = t->gobj[level][g];
    if (level == TOPO_NUMA && o->type != HWLOC_OBJ_NUMANODE) return -1;
    if (level == TOPO_PACKAGE && o->type != HWLOC_OBJ_PACKAGE) return -1;
    if (level == TOPO_SMT && o->type != HWLOC_OBJ_CORE) return -1;
    return o->os_index == HWLOC_UNKNOWN_INDEX ? -1 : (long)o->os_index;
}

/* ---- dfly ------------------------------------------------------------------ */

struct dfly_node {
    long id;
    int first; /* lowest member, breaks ties */
    int g;
};

static int cmp_dfly(const void *a, const void *b)
{
    const struct dfly_node *x = a, *y = b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return x->first - y->first;
}

static void dfly_line(FILE *f, const usched__topo_t *t, const char *prefix, int last,
                      const char *label, long id, const uint64_t *mask)
{
    fprintf(f, "%s%s%s", prefix, last ? "\\-" : "|-", label);
    if (id >= 0) fprintf(f, " ID %ld", id);
    fputs(id >= 0 ? ": " : " MEMBERS: ", f);
    FOR_EACH_CPU(t, mask, c) fprintf(f, "cpu%d ", t->os[c]);
    fputc('\n', f);
}

static void child_prefix(char *out, size_t n, const char *prefix, int last)
{
    size_t l = strlen(prefix);
    if (l + 3 > n) l = n - 3; /* 4 levels never come near */
    memcpy(out, prefix, l);
    memcpy(out + l, last ? "  " : "| ", 3);
}

static int print_dfly(const usched__topo_t *t, FILE *f)
{
    int npkg = t->ngroups[TOPO_PACKAGE], ncore = t->ngroups[TOPO_SMT];
    struct dfly_node *pkgs = calloc((size_t)npkg, sizeof *pkgs);
    struct dfly_node *cores = calloc((size_t)ncore, sizeof *cores);
    int *cores_in = calloc((size_t)npkg, sizeof *cores_in);
    uint64_t *all = calloc((size_t)t->words, sizeof *all);
    uint64_t *one = calloc((size_t)t->words, sizeof *one);
    if (!pkgs || !cores || !cores_in || !all || !one) {
        free(pkgs), free(cores), free(cores_in), free(all), free(one);
        return -ENOMEM;
    }
    int max_cores = 0;
    for (int g = 0; g < npkg; g++) {
        hwloc_obj_t o = t->gobj[TOPO_PACKAGE][g];
        long id = group_id(t, TOPO_PACKAGE, g);
        /* POWER7 reports package id -1: hwloc's logical index stands in. */
        if (id < 0) id = o->type == HWLOC_OBJ_PACKAGE ? (long)o->logical_index : 0;
        pkgs[g] = (struct dfly_node){id, first_cpu(t, usched__topo_group_mask(t, TOPO_PACKAGE, g)), g};
    }
    for (int g = 0; g < ncore; g++) {
        int first = first_cpu(t, usched__topo_group_mask(t, TOPO_SMT, g));
        int p = t->group[TOPO_PACKAGE][first];
        long id = group_id(t, TOPO_SMT, g);
        if (id < 0) id = cores_in[p]; /* no core id: position in the package */
        cores[g] = (struct dfly_node){id, first, g};
        if (++cores_in[p] > max_cores) max_cores = cores_in[p];
    }
    qsort(pkgs, (size_t)npkg, sizeof *pkgs, cmp_dfly);
    qsort(cores, (size_t)ncore, sizeof *cores, cmp_dfly);
    int depth = t->smt_width > 1 ? 3 : max_cores > 1 ? 2 : 1;

    for (int c = 0; c < t->ncpus; c++) all[c / 64] |= UINT64_C(1) << (c % 64);
    dfly_line(f, t, "", 1, "PACKAGE", -1, all);
    for (int i = 0; i < npkg; i++) {
        char p1[32], p2[32];
        int pg = pkgs[i].g, lastp = i == npkg - 1;
        child_prefix(p1, sizeof p1, "  ", lastp);
        dfly_line(f, t, "  ", lastp, "CHIP", pkgs[i].id, usched__topo_group_mask(t, TOPO_PACKAGE, pg));
        if (depth < 2) continue;
        int left = cores_in[pg];
        for (int j = 0; j < ncore; j++) {
            if (t->group[TOPO_PACKAGE][cores[j].first] != pg) continue;
            int lastc = --left == 0;
            const uint64_t *cm = usched__topo_group_mask(t, TOPO_SMT, cores[j].g);
            dfly_line(f, t, p1, lastc, "CORE", cores[j].id, cm);
            if (depth < 3) continue;
            child_prefix(p2, sizeof p2, p1, lastc);
            int pos = 0, n = t->weight[TOPO_SMT][cores[j].g];
            FOR_EACH_CPU(t, cm, c) {
                one[c / 64] = UINT64_C(1) << (c % 64);
                dfly_line(f, t, p2, pos == n - 1, "THREAD", pos, one);
                one[c / 64] = 0;
                pos++;
            }
        }
    }
    free(pkgs), free(cores), free(cores_in), free(all), free(one);
    return 0;
}

/* ---- tree ------------------------------------------------------------------ */

/* lstopo's rule: the largest unit that still leaves at least 10 of it. */
static void put_size(FILE *f, uint64_t bytes)
{
    static const char *const unit[] = {"KB", "MB", "GB", "TB"};
    int u = 0;
    uint64_t v = bytes >> 10;
    while (u < 3 && v >= 10 * 1024) v >>= 10, u++;
    fprintf(f, "%" PRIu64 " %s", v, unit[u]);
}

static void tree_obj(FILE *f, const usched__topo_t *t, hwloc_obj_t o, int depth,
                     uint64_t *tmp)
{
    if (o->type == HWLOC_OBJ_PU && o->parent && o->parent->type == HWLOC_OBJ_CORE) return;
    char name[64];
    hwloc_obj_type_snprintf(name, sizeof name, o, 0);
    fprintf(f, "%*s%s", 2 * depth, "", name);
    if (o->os_index != HWLOC_UNKNOWN_INDEX &&
        (o->type == HWLOC_OBJ_PACKAGE || o->type == HWLOC_OBJ_CORE || o->type == HWLOC_OBJ_PU ||
         o->type == HWLOC_OBJ_NUMANODE || o->type == HWLOC_OBJ_DIE))
        fprintf(f, " P#%u", o->os_index);
    if (hwloc_obj_type_is_cache(o->type) && o->attr->cache.size) {
        fputc(' ', f);
        put_size(f, o->attr->cache.size);
    }
    if (o->type == HWLOC_OBJ_NUMANODE && o->attr->numanode.local_memory) {
        fputc(' ', f);
        put_size(f, o->attr->numanode.local_memory);
    }
    mask_of_set(t, o->cpuset, tmp);
    fputs(": cpus ", f);
    usched__topo_put_list(f, t, tmp);
    fputc('\n', f);
    for (hwloc_obj_t m = o->memory_first_child; m; m = m->next_sibling)
        tree_obj(f, t, m, depth + 1, tmp);
    for (hwloc_obj_t c = o->first_child; c; c = c->next_sibling) tree_obj(f, t, c, depth + 1, tmp);
}

static int print_tree(const usched__topo_t *t, FILE *f)
{
    uint64_t *tmp = calloc((size_t)t->words, sizeof *tmp);
    if (!tmp) return -ENOMEM;
    fprintf(f, "cpus %d, packages %d, numa nodes %d, llcs %d, l2 %d, cores %d, smt %d", t->ncpus,
            t->ngroups[TOPO_PACKAGE], hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_NUMANODE),
            t->ngroups[TOPO_LLC], t->ngroups[TOPO_L2], t->ngroups[TOPO_SMT], t->smt_width);
    if (t->nkinds > 1) {
        fprintf(f, ", core kinds %d (", t->nkinds);
        for (int k = 0; k < t->nkinds; k++) {
            memset(tmp, 0, (size_t)t->words * sizeof *tmp);
            for (int c = 0; c < t->ncpus; c++)
                if (t->kind[c] == k) tmp[c / 64] |= UINT64_C(1) << (c % 64);
            fprintf(f, "%s%d: ", k ? "; " : "", k);
            usched__topo_put_list(f, t, tmp);
        }
        fputc(')', f);
    }
    fputc('\n', f);
    tree_obj(f, t, hwloc_get_root_obj(t->hw), 0, tmp);
    free(tmp);
    return 0;
}

/* ---- json ------------------------------------------------------------------ */

static const char *const source_names[] = {
    [TOPO_SRC_LIVE] = "machine", [TOPO_SRC_SYNTHETIC] = "synthetic",
    [TOPO_SRC_XML] = "xml", [TOPO_SRC_FSROOT] = "linux-root",
};

static int print_json(const usched__topo_t *t, FILE *f)
{
    fprintf(f, "{\n  \"source\": \"%s\",\n", source_names[t->source]);
    fprintf(f, "  \"pus\": %d,\n  \"cores\": %d,\n  \"l2\": %d,\n  \"llcs\": %d,\n", t->ncpus,
            t->ngroups[TOPO_SMT], t->ngroups[TOPO_L2], t->ngroups[TOPO_LLC]);
    fprintf(f, "  \"packages\": %d,\n  \"numa_nodes\": %d,\n  \"numa_groups\": %d,\n",
            t->ngroups[TOPO_PACKAGE], hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_NUMANODE),
            t->ngroups[TOPO_NUMA]);
    fprintf(f, "  \"smt\": %d,\n  \"kinds\": %d,\n  \"cpus\": [\n", t->smt_width, t->nkinds);
    for (int c = 0; c < t->ncpus; c++)
        fprintf(f,
                "    {\"cpu\": %d, \"os_index\": %d, \"core\": %d, \"l2\": %d, \"llc\": %d, "
                "\"package\": %d, \"numa\": %d, \"kind\": %d}%s\n",
                c, t->os[c], t->group[TOPO_SMT][c], t->group[TOPO_L2][c], t->group[TOPO_LLC][c],
                t->group[TOPO_PACKAGE][c], t->group[TOPO_NUMA][c], t->kind[c],
                c + 1 < t->ncpus ? "," : "");
    fputs("  ],\n  \"groups\": {\n", f);
    for (int l = 0; l < TOPO_MACHINE; l++) {
        fprintf(f, "    \"%s\": [\n", usched__topo_level_name(l));
        for (int g = 0; g < t->ngroups[l]; g++) {
            fprintf(f, "      {\"id\": %ld, \"cpus\": \"", group_id(t, l, g));
            usched__topo_put_list(f, t, usched__topo_group_mask(t, l, g));
            fprintf(f, "\"}%s\n", g + 1 < t->ngroups[l] ? "," : "");
        }
        fprintf(f, "    ]%s\n", l + 1 < TOPO_MACHINE ? "," : "");
    }
    fputs("  }\n}\n", f);
    return 0;
}

/* ---- entry points ------------------------------------------------------------ */

static int print_emulate(const usched__topo_t *t, FILE *f)
{
    return usched__topo_print_emulate(t, f); /* src/topo/emulate.c */
}

#define TOPO_FORMATS(X)                                                         \
    X(tree)                                                                     \
    X(dfly)                                                                     \
    X(json)                                                                     \
    X(emulate)

static const struct {
    const char *name;
    int (*print)(const usched__topo_t *, FILE *);
} formats[] = {
#define X(n) {#n, print_##n},
    TOPO_FORMATS(X)
#undef X
};

static int find_format(const char *format)
{
    if (!format) format = "tree";
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (!strcmp(formats[i].name, format)) return (int)i;
    return -1;
}

int usched__topo_print(const usched__topo_t *t, FILE *f, const char *format)
{
    int i = find_format(format);
    return i < 0 ? -EINVAL : formats[i].print(t, f);
}

USCHED_EXPORT int usched_topo_print(FILE *f, const char *input, const char *cpus,
                                    const char *format)
{
    if (find_format(format) < 0)
        return usched__error(EINVAL, "format '%s': unknown (tree, dfly, json or emulate)", format);
    if (!f) return usched__error(EINVAL, "topo: no output stream");
    char err[512];
    usched__topo_t *t;
    int r = usched__topo_load(&t, input, cpus, err, sizeof err);
    if (r < 0) return usched__error(-r, "%s", err);
    if (format && !strcmp(format, "emulate") && t->live) {
        usched__topo_free(t);
        return usched__error(EINVAL, "emulate: needs a virtual topology (--input: an hwloc "
                                     "synthetic string, an XML file or a captured root)");
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) {
        usched__topo_free(t);
        return usched__error(ENOMEM, "topo: out of memory");
    }
    r = usched__topo_print(t, m, format);
    if (fclose(m) != 0 && r == 0) r = -ENOMEM;
    usched__topo_free(t);
    if (r == 0 && fwrite(buf, 1, len, f) != len) r = usched__error(EIO, "topo: write failed");
    else if (r < 0) r = usched__error(-r, "topo: out of memory while printing");
    free(buf);
    return r;
}
