/*
 * Topology model (DESIGN section 4). Loaded once per scheduler with hwloc,
 * then read-only: every query below is O(1) or O(mask words).
 *
 * CPUs are numbered 0..ncpus-1 densely in increasing OS index; the OS index
 * is kept beside. Groups at each level are numbered 0..ngroups-1 densely.
 * Levels, from nearest to farthest:
 *   TOPO_SMT      the core (SMT siblings share it)
 *   TOPO_L2       the L2 cache (or cluster); a core alone when there is none
 *   TOPO_LLC      the last-level cache; the package when there is no cache
 *   TOPO_PACKAGE  the package (socket)
 *   TOPO_NUMA     the NUMA node; the whole machine when a CPU has none
 *                 (when only some CPUs have none, those form one group)
 *   TOPO_MACHINE  everything
 * topo_level_shared(a, b) is the first level, in that order, at which a and b
 * are in the same group: their distance.
 */
#ifndef USCHED_TOPO_H
#define USCHED_TOPO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum topo_level {
    TOPO_SMT = 0,
    TOPO_L2,
    TOPO_LLC,
    TOPO_PACKAGE,
    TOPO_NUMA,
    TOPO_MACHINE,
    TOPO_NLEVELS
};

typedef struct usched__topo usched__topo_t;

/* Name of a level ("smt", "l2", "llc", "package", "numa", "machine"). */
const char *usched__topo_level_name(int level);

/* Loads a topology. input NULL or "" = this machine (restricted to the CPUs
 * the process may use); otherwise a directory (captured Linux root), an
 * existing file (hwloc XML) or an hwloc synthetic string. cpus (NULL = all)
 * restricts to a subset by dense CPU number of the unrestricted topology.
 * Returns 0, -ENOENT (missing path) or -EINVAL (anything else bad); on error
 * writes one line naming the input and the problem into err. */
int usched__topo_load(usched__topo_t **out, const char *input, const char *cpus,
                      char *err, size_t errlen);
void usched__topo_free(usched__topo_t *t);

/* True when loaded from the live machine (workers may be pinned). */
int usched__topo_is_live(const usched__topo_t *t);

int usched__topo_ncpus(const usched__topo_t *t);
/* Number of 64-bit words in a CPU mask of this topology. */
int usched__topo_mask_words(const usched__topo_t *t);
int usched__topo_os_index(const usched__topo_t *t, int cpu);
/* Dense CPU for an OS index, -1 if not in the topology. */
int usched__topo_cpu_of_os(const usched__topo_t *t, int os_index);

int usched__topo_ngroups(const usched__topo_t *t, int level);
/* Group index of `cpu` at `level`. */
int usched__topo_group(const usched__topo_t *t, int cpu, int level);
/* Member mask (mask_words words) of group `g` at `level`. */
const uint64_t *usched__topo_group_mask(const usched__topo_t *t, int level, int g);
/* Number of CPUs in group `g` at `level`. */
int usched__topo_group_weight(const usched__topo_t *t, int level, int g);
/* Lowest level shared by CPUs a and b (TOPO_SMT when a == b). */
int usched__topo_level_shared(const usched__topo_t *t, int a, int b);
/* Core kind of a CPU (0 = the only or most efficient kind ... n-1), and the
 * number of kinds (1 when hwloc reports none). */
int usched__topo_core_kind(const usched__topo_t *t, int cpu);
int usched__topo_nkinds(const usched__topo_t *t);
/* Largest number of PUs in one core. */
int usched__topo_smt_width(const usched__topo_t *t);

/* All CPUs ordered by increasing distance from `cpu` (cpu itself first):
 * returns an array of ncpus entries. band_end[level] is the index one past the
 * last CPU whose distance is <= level, so CPUs [band_end[l-1], band_end[l])
 * are exactly those at distance l. Callers that want to spread load rotate
 * their start inside each band. */
const int *usched__topo_order(const usched__topo_t *t, int cpu);
const int *usched__topo_band_end(const usched__topo_t *t, int cpu);

/* Printers (DESIGN section 4): format "tree", "dfly" or "json". -EINVAL for an
 * unknown format (nothing printed). */
int usched__topo_print(const usched__topo_t *t, FILE *f, const char *format);

/* Parses a CPU list "0-7,16" into a mask of `words` words; -EINVAL (with
 * detail in err) for malformed, empty, or any CPU >= limit. */
int usched__cpulist_parse(const char *s, int limit, uint64_t *mask, int words,
                          char *err, size_t errlen);

#endif
