/* Inside of the topology module: the model struct, shared by the loader
 * (topo.c) and the printers (print.c). Nothing outside src/topo/ includes it. */
#ifndef USCHED_TOPO_IMPL_H
#define USCHED_TOPO_IMPL_H

#include <hwloc.h>

#include "topo/topo.h"

enum topo_source { TOPO_SRC_LIVE, TOPO_SRC_SYNTHETIC, TOPO_SRC_XML, TOPO_SRC_FSROOT };

/* Read-only after usched__topo_load. Arrays indexed by dense CPU number have
 * ncpus entries; masks have `words` words per group. */
struct usched__topo {
    hwloc_topology_t hw; /* kept for the tree printer and group objects */
    enum topo_source source;
    int live;
    int ncpus, words, nkinds, smt_width;
    int max_os;                     /* largest OS index */
    int *os;                        /* [cpu] OS index */
    int *cpu_of_os;                 /* [0..max_os] dense CPU or -1 */
    int *kind;                      /* [cpu] core kind */
    hwloc_obj_t *pu;                /* [cpu] hwloc PU */
    int ngroups[TOPO_NLEVELS];
    int *group[TOPO_NLEVELS];       /* [cpu] group index at the level */
    hwloc_obj_t *gobj[TOPO_NLEVELS]; /* [group] the hwloc object standing for it */
    uint64_t *masks[TOPO_NLEVELS];  /* [group * words] member masks */
    int *weight[TOPO_NLEVELS];      /* [group] member count */
    int *order;                     /* [cpu * ncpus] CPUs by distance */
    int *band;                      /* [cpu * TOPO_NLEVELS] band ends */
    /* Kept across --cpus and quota restrictions (whole_llc_record): for each
     * OS index of the topology as loaded, the OS indices of its LLC (one set
     * per LLC, which its PUs share). */
    int whole_max_os;
    hwloc_const_bitmap_t *whole_llc; /* [0..whole_max_os], NULL: no such PU */
    int whole_nsets;
    hwloc_bitmap_t *whole_sets;     /* [whole_nsets]: owned, one per LLC */
};

/* Largest OS index a CPU may have (the model keeps a table indexed by it);
 * Linux numbers CPUs below NR_CPUS, at most 8192. */
#define TOPO_MAX_OS_INDEX 65535

/* Reads the hwloc XML topology file `input` with libxml2, checks what
 * hwloc's own reader does not survive (xmlcheck.c), and returns the same
 * topology written anew in the shape hwloc's exporter writes: *out is
 * malloc'ed and NUL-terminated, *outlen counts the NUL (hwloc_topology_
 * set_xmlbuffer's size). 0, or -EINVAL/-ENOMEM with err naming the file,
 * the line and what is wrong. */
int usched__topo_xml_read(const char *input, char **out, size_t *outlen, char *err, size_t errlen);

/* Writes a mask as a CPU list ("0-5,12,14-15", dense numbers) or "none". */
void usched__topo_put_list(FILE *f, const usched__topo_t *t, const uint64_t *mask);

#endif
