/*
 * Support for the fuzz targets (README.md). Each target is one file
 * fuzz_<name>.c defining LLVMFuzzerTestOneInput, built two ways:
 *   - with libFuzzer (cmake -DUSCHED_FUZZ=ON, clang; scripts/fuzz.sh), which
 *     supplies main and the mutation loop;
 *   - with replay.c as main in every build: it feeds each file of the
 *     target's corpus (corpus/<name>/) to the same function, so CTest catches
 *     a corpus input that crashes, leaks (ASan) or hangs (the test timeout).
 */
#ifndef USCHED_FUZZ_H
#define USCHED_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The input as a NUL-terminated string (stops at an embedded NUL, as any C
 * caller would). Caller frees. Aborts when out of memory: a fuzz run must not
 * mistake that for a finding. */
static inline char *fuzz_str(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* The number of CPUs a synthetic-looking string would describe at most: the
 * product of every number in it, read as strtoul base 0 reads it (as hwloc
 * does: "0xff2" is 4082), saturating. Targets skip inputs
 * above a few thousand CPUs: loading them is correct but takes seconds (the
 * model is ncpus^2), which only slows the search down. The loader's own cap
 * is tested in tests/topo/test_synthetic.c. */
static inline long fuzz_cpus_bound(const char *s)
{
    long n = 1;
    for (const char *p = s; *p;) {
        if (*p < '0' || *p > '9') {
            p++;
            continue;
        }
        char *end;
        unsigned long u = strtoul(p, &end, 0); /* as hwloc reads arities: 0x.. too */
        long v = u > 1000000 ? 1000000 : (long)u;
        p = end > p ? end : p + 1;
        if (v > 1) n = n > 1000000 / v ? 1000000 : n * v;
    }
    return n;
}

/* Prints a loaded topology in every format (to /dev/null), then frees it:
 * the printers must accept whatever the loader accepted. */
static inline void fuzz_print_and_free(usched__topo_t *t)
{
    FILE *null = fopen("/dev/null", "w");
    if (!null) abort();
    static const char *const formats[] = {"tree", "dfly", "json"};
    for (int i = 0; i < 3; i++)
        if (usched__topo_print(t, null, formats[i]) < 0) abort();
    fclose(null);
    usched__topo_free(t);
}

#endif
