/* The knob table, its parser, and the public knob API (usched knobs). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "base/error.h"
#include "base/export.h"
#include "core/core.h"

const struct usched__knob_info usched__knob_table[USCHED_NKNOBS] = {
#define X(n, type, def, min, max, rt, pols, desc) {#n, type, def, min, max, rt, pols, desc},
    USCHED_KNOBS_MAP(X)
#undef X
};

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

/* The names of a KNOB_CHOICE knob's values min..max, in order. */
static const char *const *choice_names(int knob)
{
    static const char *const io_poller[] = {"shared", "percpu", NULL};
    return knob == USCHED_KNOB_io_poller ? io_poller : NULL;
}

/* The names of a choice knob's values joined by sep, the last by last
 * ("a, b or c"; "a|b|c"). */
static const char *choice_list(int knob, char *buf, size_t len, const char *sep, const char *last)
{
    const char *const *n = choice_names(knob);
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; n && n[i] && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i == 0 ? "" : n[i + 1] ? sep : last, n[i]);
    return buf;
}

const char *usched__knob_format(int knob, int64_t v, char *buf, size_t len)
{
    const struct usched__knob_info *ki = &usched__knob_table[knob];
    if (ki->type == KNOB_LEVEL && v >= 0 && v < TOPO_NLEVELS)
        snprintf(buf, len, "%s", usched__topo_level_name((int)v));
    else if (ki->type == KNOB_CHOICE && v >= ki->min && v <= ki->max)
        snprintf(buf, len, "%s", choice_names(knob)[v - ki->min]);
    else
        snprintf(buf, len, "%lld", (long long)v);
    return buf;
}

static int parse_value(int id, const char *val, int64_t *out)
{
    const struct usched__knob_info *ki = &usched__knob_table[id];
    if (ki->type == KNOB_LEVEL) {
        int l = usched__topo_level_of(val);
        if (l >= 0) {
            *out = l;
            return 0;
        }
        return usched__error(EINVAL,
                             "knobs: %s: '%s' is not a level (core, l2, llc, package, numa, machine)",
                             ki->name, val);
    }
    if (ki->type == KNOB_CHOICE) {
        const char *const *n = choice_names(id);
        for (int i = 0; n[i]; i++)
            if (strcmp(n[i], val) == 0) {
                *out = ki->min + i;
                return 0;
            }
        char names[128];
        return usched__error(EINVAL, "knobs: %s: '%s' is not one of %s", ki->name, val,
                             choice_list(id, names, sizeof names, ", ", " or "));
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
    char *copy = usched__strdup(spec);
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
    atomic_fetch_add_explicit(&k->gen, 1, memory_order_release);
    return 0;
}

/* ---- public API ------------------------------------------------------------ */

USCHED_EXPORT int usched_knob_count(void)
{
    return USCHED_NKNOBS;
}

USCHED_EXPORT int usched_knob_info(int i, struct usched_knob_info *out)
{
    static const char *const types[] = {[KNOB_BOOL] = "bool", [KNOB_INT] = "int",
                                        [KNOB_LEVEL] = "level", [KNOB_CHOICE] = "choice"};
    if (!out) return usched__error(EINVAL, "knob_info: out is NULL");
    if (i < 0 || i >= USCHED_NKNOBS)
        return usched__error(EINVAL, "knob_info: index %d out of range [0, %d)", i, USCHED_NKNOBS);
    const struct usched__knob_info *k = &usched__knob_table[i];
    memset(out, 0, sizeof *out);
    out->name = k->name;
    out->type = types[k->type];
    out->def = k->def;
    out->min = k->min;
    out->max = k->max;
    out->runtime = k->runtime;
    out->policies = k->policies;
    out->desc = k->desc;
    usched__knob_format(i, k->def, out->def_text, sizeof out->def_text);
    if (k->type == KNOB_LEVEL) {
        char lo[16], hi[16]; /* level names are short */
        usched__knob_format(i, k->min, lo, sizeof lo);
        usched__knob_format(i, k->max, hi, sizeof hi);
        snprintf(out->range_text, sizeof out->range_text, "%s..%s", lo, hi);
    } else if (k->type == KNOB_CHOICE) {
        choice_list(i, out->range_text, sizeof out->range_text, "|", "|");
    } else {
        snprintf(out->range_text, sizeof out->range_text, "%lld..%lld", (long long)k->min,
                 (long long)k->max);
    }
    return 0;
}

USCHED_EXPORT int usched_knob_get(usched_t *s, const char *name, int64_t *value)
{
    if (!s || !name || !value) return usched__error(EINVAL, "knob_get: NULL argument");
    int id = usched__knob_lookup(name);
    if (id < 0) return usched__error(EINVAL, "knob_get: unknown knob '%s' (see `usched knobs`)", name);
    *value = usched__knob_get(&s->knobs, id);
    return 0;
}
