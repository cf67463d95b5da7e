/*
 * Topology input as an hwloc synthetic string ("pack:2 l3:1 l2:6 core:1
 * pu:2"): the loader, the model built from it, the three printers and the
 * quota CPU choice. Checks what the model promises on success (every CPU
 * first in its own distance order, bands covering all CPUs, groups holding
 * their CPUs), and a message on failure.
 */
#include <stdio.h>

#include "fuzz.h"
#include "topo/topo.h"

static void check(const usched__topo_t *t)
{
    int n = usched__topo_ncpus(t);
    if (n < 1) abort();
    for (int c = 0; c < n; c++) {
        const int *ord = usched__topo_order(t, c);
        const int *band = usched__topo_band_end(t, c);
        if (ord[0] != c || band[TOPO_NLEVELS - 1] != n) abort();
        for (int l = 0; l < TOPO_NLEVELS; l++) {
            int g = usched__topo_group(t, c, l);
            if (g < 0 || g >= usched__topo_ngroups(t, l)) abort();
            if (!(usched__topo_group_mask(t, l, g)[c / 64] >> (c % 64) & 1)) abort();
        }
    }
    uint64_t *mask = calloc((size_t)usched__topo_mask_words(t), sizeof *mask);
    if (!mask) abort();
    int want = n / 2 + 1, got = 0;
    usched__quota_pick(t, want, mask);
    for (int w = 0; w < usched__topo_mask_words(t); w++) got += __builtin_popcountll(mask[w]);
    if (got != want) abort();
    free(mask);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 512) return 0;
    char *s = fuzz_str(data, size);
    /* Only what the loader takes as synthetic: anything with a '/' or no ':'
     * is a path, and would read the file system (the XML target covers
     * file contents). */
    if (strchr(s, '/') || !strchr(s, ':') || fuzz_cpus_bound(s) > 2048) {
        free(s);
        return 0;
    }
    usched__topo_t *t;
    char err[512];
    err[0] = '\0';
    if (usched__topo_load(&t, s, NULL, err, sizeof err) == 0) {
        check(t);
        fuzz_print_and_free(t);
    } else if (!err[0]) {
        abort(); /* every failure says why */
    }
    free(s);
    return 0;
}
