/*
 * Topology model (docs/topology.md). Loaded once per scheduler with hwloc,
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

#include "usched/policy.h" /* enum usched_level, USCHED_LEVEL_MAP */

/* The levels are those of the policy interface (one list, USCHED_LEVEL_MAP);
 * short names for the library's own code. */
#define TOPO_SMT USCHED_LVL_SMT
#define TOPO_L2 USCHED_LVL_L2
#define TOPO_LLC USCHED_LVL_LLC
#define TOPO_PACKAGE USCHED_LVL_PACKAGE
#define TOPO_NUMA USCHED_LVL_NUMA
#define TOPO_MACHINE USCHED_LVL_MACHINE
#define TOPO_NLEVELS USCHED_NLEVELS

typedef struct usched__topo usched__topo_t;

/* Name of a level ("core", "l2", "llc", "package", "numa", "machine"), "?"
 * out of range; the level of a name, -1 if none. */
const char *usched__topo_level_name(int level);
int usched__topo_level_of(const char *name);

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

/* Printers (docs/topology.md): format "tree", "dfly" or "json". -EINVAL for an
 * unknown format (nothing printed). */
int usched__topo_print(const usched__topo_t *t, FILE *f, const char *format);

/* The OS indices (ascending, at most max written into os) of the CPUs that
 * share `cpu`'s LLC in the topology as loaded, before any --cpus or quota
 * restriction: on the live machine, the CPUs of that LLC the process may
 * use, whether or not the scheduler runs a worker on them. Returns their
 * number (at least 1: cpu itself). */
int usched__topo_llc_whole_os(const usched__topo_t *t, int cpu, int *os, int max);

/* Restricts a loaded topology to the CPUs of `mask` (dense numbers, at least
 * one) and rebuilds the model: CPUs are renumbered densely. -EINVAL for an
 * empty mask, -ENOMEM; after -ENOMEM the topology may only be freed. */
int usched__topo_restrict(usched__topo_t *t, const uint64_t *mask, char *err, size_t errlen);

/* ---- CPU quota (quota.c, docs/quota.md) ----------------------------------------
 * The cgroup CPU bandwidth limit of the process (v2 cpu.max, v1
 * cpu.cfs_quota_us / cpu.cfs_period_us), the tightest of its cgroup and every
 * ancestor. Files are read under a root directory ("" or NULL = "/"), so
 * tests point it at captured files. */
struct usched__quota {
    int limited;              /* 1: a limit applies (quota_us/period_us CPUs) */
    int version;              /* cgroup version of the limit: 1 or 2; 0 none */
    int64_t quota_us, period_us;
    int workers;              /* ceil(quota_us / period_us), at least 1 */
    char file[512];           /* the file holding the tightest limit */
    char reason[512];         /* no limit or ignored: why (one line) */
};

/* Fills q. Returns 0 (limit or none found; q->reason says why none), or
 * -ENOENT / -EINVAL when the cgroup files are missing or malformed: the
 * limit is then ignored, q->reason names the file and the problem. */
int usched__quota_read(const char *root, struct usched__quota *q);

/* Chooses n CPUs of t into mask (mask_words words, cleared first): one CPU
 * per core first, starting in the LLC with the most cores and moving outwards
 * by distance; SMT siblings only once every core has one. */
void usched__quota_pick(const usched__topo_t *t, int n, uint64_t *mask);

/* The cgroup root for a topology loaded from `input`: $USCHED_CGROUP_ROOT if
 * set, "/" for this machine, a captured root holding proc/self/mountinfo, else
 * NULL (a virtual topology has no cgroup). */
const char *usched__quota_root(const usched__topo_t *t, const char *input);

/* Reads the quota for t (loaded from `input`) and, when it allows fewer
 * busy workers than t has CPUs, restricts t to the CPUs usched__quota_pick
 * chooses. q (may be NULL) receives what was read. A missing or malformed
 * cgroup is ignored (q->reason); only restricting can fail (-ENOMEM). */
int usched__topo_apply_quota(usched__topo_t *t, const char *input, struct usched__quota *q,
                             char *err, size_t errlen);

/* SMT emulation (src/topo/emulate.c, docs/emulation.md). Fills out[cpu]
 * (ncpus entries) with the real CPU (an entry of real[0..nreal-1], OS
 * numbers) each virtual CPU runs on: a core's PUs share one real CPU, cores
 * take the real CPUs round-robin in topology order. Returns the largest
 * number of cores sharing one real CPU (1 when each has its own), -EINVAL
 * for a live topology or an empty real set, -ENOMEM; errors write one line
 * into err. */
int usched__topo_emulate_map(const usched__topo_t *t, const int *real, int nreal, int *out,
                             char *err, size_t errlen);
/* The OS numbers of the CPUs this process may run on (its affinity), at most
 * max of them, ascending: returns their count or a negative errno. */
int usched__topo_allowed_cpus(int *real, int max);

/* Prints the emulation mapping (the "emulate" format of usched__topo_print). */
int usched__topo_print_emulate(const usched__topo_t *t, FILE *f);

/* Parses a CPU list "0-7,16" into a mask of `words` words; -EINVAL (with
 * detail in err) for malformed, empty, or any CPU >= limit. */
int usched__cpulist_parse(const char *s, int limit, uint64_t *mask, int words,
                          char *err, size_t errlen);

#endif
