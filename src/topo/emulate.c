/*
 * SMT emulation on real CPUs (docs/emulation.md): the real CPU each virtual
 * CPU of a virtual topology runs on.
 *
 * Every PU of one virtual core goes to the same real CPU, so that two busy
 * virtual siblings share one CPU's time, as SMT siblings share one core's
 * pipeline. Cores take the real CPUs round-robin in topology order (the order
 * of their first PU): with real CPUs {0,1} and "pack:1 core:2 pu:2", PUs 0-1
 * run on CPU 0 and PUs 2-3 on CPU 1. With more cores than real CPUs, cores
 * share CPUs (the caller says so: usched__topo_emulate_map returns how many
 * cores each real CPU holds at most).
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/fault.h"
#include "topo/topo_impl.h"

int usched__topo_emulate_map(const usched__topo_t *t, const int *real, int nreal, int *out,
                             char *err, size_t errlen)
{
    if (t->live) {
        snprintf(err, errlen, "emulate: needs a virtual topology (set topology to an hwloc "
                              "synthetic string, an XML file or a captured root)");
        return -EINVAL;
    }
    if (nreal <= 0) {
        snprintf(err, errlen, "emulate: the set of real CPUs to run on is empty");
        return -EINVAL;
    }
    int ncores = t->ngroups[TOPO_SMT];
    int *slot = usched__malloc((size_t)ncores * sizeof *slot);
    if (!slot) {
        snprintf(err, errlen, "emulate: out of memory");
        return -ENOMEM;
    }
    for (int g = 0; g < ncores; g++) slot[g] = -1;
    int next = 0;
    for (int c = 0; c < t->ncpus; c++) {
        int g = t->group[TOPO_SMT][c];
        if (slot[g] < 0) slot[g] = next++;
        out[c] = real[slot[g] % nreal];
    }
    free(slot);
    return (next + nreal - 1) / nreal; /* cores per real CPU, at most */
}

int usched__topo_allowed_cpus(int *real, int max)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -errno;
    int n = 0;
    for (int i = 0; i < CPU_SETSIZE && n < max; i++)
        if (CPU_ISSET(i, &set)) real[n++] = i;
    return n;
}

/* The "emulate" printout (usched topo --emulate): one header line, a line
 * saying so when cores share real CPUs, then one line per virtual CPU. */
int usched__topo_print_emulate(const usched__topo_t *t, FILE *f)
{
    int real[CPU_SETSIZE];
    int nreal = usched__topo_allowed_cpus(real, CPU_SETSIZE);
    if (nreal < 0) return nreal;
    int *map = usched__malloc((size_t)t->ncpus * sizeof *map);
    if (!map) return -ENOMEM;
    char err[200];
    int share = usched__topo_emulate_map(t, real, nreal, map, err, sizeof err);
    if (share < 0) {
        free(map);
        return share;
    }
    int ncores = t->ngroups[TOPO_SMT];
    fprintf(f, "SMT emulation: %d virtual cores, %d virtual CPUs on %d real CPUs\n", ncores,
            t->ncpus, nreal < ncores ? nreal : ncores);
    if (share > 1)
        fprintf(f, "note: %d cores on %d real CPUs: up to %d cores share one real CPU\n", ncores,
                nreal, share);
    fprintf(f, "%-6s %-6s %s\n", "cpu", "core", "real-cpu");
    for (int c = 0; c < t->ncpus; c++)
        fprintf(f, "%-6d %-6d %d\n", c, t->group[TOPO_SMT][c], map[c]);
    free(map);
    return 0;
}
