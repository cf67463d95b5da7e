/* The knob table and its parser. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/knobs.h"

const struct usched__knob_info usched__knob_table[USCHED_NKNOBS] = {
#define X(n, type, def, min, max, rt, pols, desc) {#n, type, def, min, max, rt, pols, desc},
    USCHED_KNOBS_MAP(X)
#undef X
};

static const char *const level_names[] = {"core", "l2", "llc", "package", "numa", "machine"};

void usched__knobs_default(usched__knobs_t *k)
{
    for (int i = 0; i < USCHED_NKNOBS; i++)
        atomic_store_explicit(&k->v[i], usched__knob_table[i].def, memory_order_relaxed);
}

int usched__knob_lookup(const char *name)
{
    for (int i = 0; i < USCHED_NKNOBS; i++)
        if (strcmp(usched__knob_table[i].name, name) == 0) return i;
    return -1;
}

const char *usched__knob_format(int knob, int64_t v, char *buf, size_t len)
{
    if (usched__knob_table[knob].type == KNOB_LEVEL && v >= 0 && v < 6)
        snprintf(buf, len, "%s", level_names[v]);
    else
        snprintf(buf, len, "%lld", (long long)v);
    return buf;
}

static int parse_value(int id, const char *val, int64_t *out)
{
    const struct usched__knob_info *ki = &usched__knob_table[id];
    if (ki->type == KNOB_LEVEL) {
        for (int l = 0; l < 6; l++)
            if (strcmp(val, level_names[l]) == 0) {
                *out = l;
                return 0;
            }
        return usched__error(EINVAL,
                             "knobs: %s: '%s' is not a level (core, l2, llc, package, numa, machine)",
                             ki->name, val);
    }
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (*val == '\0' || *end != '\0' || errno == ERANGE)
        return usched__error(EINVAL, "knobs: %s: '%s' is not an integer", ki->name, val);
    if (v < ki->min || v > ki->max)
        return usched__error(EINVAL, "knobs: %s: %lld is out of range [%lld, %lld]", ki->name, v,
                             (long long)ki->min, (long long)ki->max);
    *out = v;
    return 0;
}

int usched__knobs_parse(usched__knobs_t *k, const char *spec, bool running)
{
    if (!spec) return usched__error(EINVAL, "knobs: no value");
    int64_t vals[USCHED_NKNOBS];
    bool set[USCHED_NKNOBS] = {0};
    char *copy = strdup(spec);
    if (!copy) return -ENOMEM;
    int rc = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ') item++;
        if (*item == '\0') continue;
        char *eq = strchr(item, '=');
        if (!eq) {
            rc = usched__error(EINVAL, "knobs: '%s' is not name=value", item);
            break;
        }
        *eq = '\0';
        int id = usched__knob_lookup(item);
        if (id < 0) {
            rc = usched__error(EINVAL, "knobs: unknown knob '%s' (see `usched knobs`)", item);
            break;
        }
        if (running && !usched__knob_table[id].runtime) {
            rc = usched__error(EBUSY, "knobs: %s cannot change while running", item);
            break;
        }
        if ((rc = parse_value(id, eq + 1, &vals[id])) < 0) break;
        set[id] = true;
    }
    free(copy);
    if (rc < 0) return rc;
    for (int i = 0; i < USCHED_NKNOBS; i++)
        if (set[i]) atomic_store_explicit(&k->v[i], vals[i], memory_order_relaxed);
    return 0;
}
