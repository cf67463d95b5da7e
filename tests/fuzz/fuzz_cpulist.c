/*
 * CPU lists ("0-7,16"): the parser alone against a limit taken from the
 * first byte (a set bit at or above the limit, or success with no bit, is a
 * bug), and, for short lists, as the "cpus" restriction of a small topology.
 */
#include <errno.h>

#include "fuzz.h"
#include "topo/topo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1024) return 0;
    int limit = 1 + data[0] * 17; /* 1 .. 4336 */
    int words = (limit + 63) / 64;
    char *s = fuzz_str(data + 1, size - 1);
    uint64_t mask[68];
    char err[256];
    err[0] = '\0';
    int r = usched__cpulist_parse(s, limit, mask, words, err, sizeof err);
    if (r == 0) {
        int bits = 0;
        for (int w = 0; w < words; w++) bits += __builtin_popcountll(mask[w]);
        if (!bits) abort();
        if (limit % 64 && mask[words - 1] >> (limit % 64)) abort();
    } else if (r != -EINVAL || !err[0]) {
        abort();
    }
    if (size < 48 && data[0] % 8 == 0) {
        usched__topo_t *t;
        /* The restriction keeps exactly the CPUs the list names. */
        int ok = usched__cpulist_parse(s, 8, mask, 1, err, sizeof err) == 0;
        if (usched__topo_load(&t, "pack:2 core:2 pu:2", s, err, sizeof err) == 0) {
            if (!ok || usched__topo_ncpus(t) != __builtin_popcountll(mask[0])) abort();
            usched__topo_free(t);
        } else if (ok) {
            abort();
        }
    }
    free(s);
    return 0;
}
