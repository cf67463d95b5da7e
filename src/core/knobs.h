/*
 * Knobs (DESIGN section 6): named runtime tunables, like sysctls, described
 * once in USCHED_KNOBS_MAP. The table drives usched_set(s, "knobs", ...), the
 * USCHED_KNOBS environment variable, `usched knobs`, and the policies'
 * usched_pol_knob(). Columns: name, type, default, min, max, whether it may
 * change while running, which policies read it, description.
 */
#ifndef USCHED_KNOBS_H
#define USCHED_KNOBS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum usched__knob_type { KNOB_BOOL, KNOB_INT, KNOB_LEVEL };

#define USCHED_KNOBS_MAP(X)                                                       \
    X(smt, KNOB_BOOL, 1, 0, 1, 1, "usched,linux,ule,bsd4",                        \
      "prefer fully idle cores over idle SMT siblings of busy cores")             \
    X(affine, KNOB_BOOL, 1, 0, 1, 1, "usched,linux",                              \
      "keep sync pairs on one CPU and wake near the waker")                       \
    X(scope, KNOB_LEVEL, 5, 0, 5, 1, "usched",                                    \
      "widest level a wake-up searches for an idle CPU: core, l2, llc, package, numa, machine") \
    X(steal, KNOB_BOOL, 1, 0, 1, 1, "usched,linux,ule",                           \
      "idle CPUs steal runnable fibers from busy ones")                           \
    X(steal_thresh, KNOB_INT, 2, 1, 256, 1, "usched,ule",                         \
      "minimum victim load to steal from beyond the LLC (ULE: from anywhere)")    \
    X(spin_us, KNOB_INT, 50, 0, 1000000, 1, "all",                                \
      "microseconds an idle CPU spins looking for work before parking")           \
    X(next_cap, KNOB_INT, 3, 0, 1000, 1, "all",                                   \
      "consecutive next-slot runs before the next slot is demoted to the queue tail") \
    X(affinity_us, KNOB_INT, 1000, 0, 1000000, 1, "ule",                          \
      "cache affinity window per cache level, microseconds (ULE's affinity)")     \
    X(wake_wide_factor, KNOB_INT, 0, 0, 4096, 1, "linux,usched",                  \
      "wakee-flips factor for wake_wide (0 = the LLC size, as Linux)")

enum usched__knob {
#define X(name, type, def, min, max, rt, pols, desc) USCHED_KNOB_##name,
    USCHED_KNOBS_MAP(X)
#undef X
    USCHED_NKNOBS
};

struct usched__knob_info {
    const char *name;
    int type;
    int64_t def, min, max;
    bool runtime; /* may change while running */
    const char *policies;
    const char *desc;
};

extern const struct usched__knob_info usched__knob_table[USCHED_NKNOBS];

typedef struct usched__knobs {
    _Atomic int64_t v[USCHED_NKNOBS];
} usched__knobs_t;

void usched__knobs_default(usched__knobs_t *k);
/* Parses "name=value,name=value" into k. When `running`, knobs that cannot
 * change while running are refused (-EBUSY). Nothing changes on error
 * (-EINVAL naming the knob and the problem, via usched__error). */
int usched__knobs_parse(usched__knobs_t *k, const char *spec, bool running);
int usched__knob_lookup(const char *name);
/* Formats a value the way it is parsed ("1", "llc"). */
const char *usched__knob_format(int knob, int64_t v, char *buf, size_t len);

static inline int64_t usched__knob_get(const usched__knobs_t *k, int id)
{
    return atomic_load_explicit(&k->v[id], memory_order_relaxed);
}

#endif
