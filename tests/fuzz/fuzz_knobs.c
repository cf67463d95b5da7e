/*
 * Settings as text: knob strings ("smt=0,scope=llc") through the parser,
 * which must leave every knob unchanged on error and in range on success,
 * and usched_set's keys (policy, cpus, knobs, stack_size, pin, topology,
 * unknown) on a scheduler that is not started. The first byte chooses.
 */
#include <errno.h>

#include "core/knobs.h"
#include "fuzz.h"
#include "usched.h"

static const char *const keys[] = {"knobs", "policy", "cpus", "stack_size", "pin", "topology", "nokey"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 2048) return 0;
    char *s = fuzz_str(data + 1, size - 1);
    usched__knobs_t k, before;
    usched__knobs_default(&k);
    usched__knobs_default(&before);
    int r = usched__knobs_parse(&k, s, data[0] & 1);
    for (int i = 0; i < USCHED_NKNOBS; i++) {
        int64_t v = usched__knob_get(&k, i);
        if (r < 0 && v != usched__knob_get(&before, i)) abort(); /* nothing changes on error */
        if (v < usched__knob_table[i].min || v > usched__knob_table[i].max) abort();
    }
    if (r < 0 && (r != -EINVAL && r != -EBUSY && r != -ENOMEM)) abort();

    usched_t *sc;
    if (usched_create(&sc) < 0) abort();
    const char *key = keys[(data[0] >> 1) % (sizeof keys / sizeof keys[0])];
    r = usched_set(sc, key, s);
    if (r < 0 && !usched_last_error()[0]) abort();
    usched_destroy(sc);
    free(s);
    return 0;
}
