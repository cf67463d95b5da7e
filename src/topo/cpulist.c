/*
 * CPU list parser: "0-7,16", Linux cpulist syntax, with blanks allowed around
 * numbers, commas and dashes.
 *
 * hwloc_bitmap_list_sscanf() reads the same syntax but accepts "3-" (an
 * infinite range) and says nothing about where a list went wrong; a user who
 * types a bad --cpus deserves the position and the reason, so this is a
 * small hand-written parser (it runs once per load, never on the hot path).
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "topo/topo.h"

/* Skips blanks (spaces, tabs, newlines). */
static const char *skip_blanks(const char *p)
{
    while (*p && isspace((unsigned char)*p)) p++;
    return p;
}

/* Reads a decimal number at *pp; returns -1 if there is none, -2 on
 * overflow. */
static long read_number(const char **pp)
{
    const char *p = *pp;
    long v = 0;
    if (!isdigit((unsigned char)*p)) return -1;
    while (isdigit((unsigned char)*p)) {
        if (v > (INT_MAX - 9) / 10) return -2;
        v = v * 10 + (*p++ - '0');
    }
    *pp = p;
    return v;
}

int usched__cpulist_parse(const char *s, int limit, uint64_t *mask, int words,
                          char *err, size_t errlen)
{
    if (!s) s = "";
    if (limit < 0 || (long)words * 64 < limit) {
        snprintf(err, errlen, "cpus '%s': mask of %d words cannot hold %d CPUs", s,
                 words, limit);
        return -EINVAL;
    }
    memset(mask, 0, (size_t)words * sizeof *mask);
    const char *p = skip_blanks(s);
    if (!*p) {
        snprintf(err, errlen, "cpus '%s': empty CPU list", s);
        return -EINVAL;
    }
    for (;;) {
        long lo, hi = 0;
        p = skip_blanks(p);
        const char *at = p;
        lo = read_number(&p);
        if (lo < 0) goto bad_number;
        hi = lo;
        p = skip_blanks(p);
        if (*p == '-') {
            p = skip_blanks(p + 1);
            at = p;
            hi = read_number(&p);
            if (hi < 0) goto bad_number;
            if (hi < lo) {
                snprintf(err, errlen, "cpus '%s': reversed range %ld-%ld", s, lo, hi);
                return -EINVAL;
            }
            p = skip_blanks(p);
        }
        if (hi >= limit && limit == 0) {
            snprintf(err, errlen, "cpus '%s': CPU %ld is out of range (there are no CPUs)", s, hi);
            return -EINVAL;
        }
        if (hi >= limit) {
            snprintf(err, errlen, "cpus '%s': CPU %ld is out of range (%d CPUs: 0-%d)", s,
                     hi, limit, limit - 1);
            return -EINVAL;
        }
        for (long c = lo; c <= hi; c++) mask[c / 64] |= UINT64_C(1) << (c % 64);
        if (!*p) return 0;
        if (*p != ',') {
            snprintf(err, errlen, "cpus '%s': unexpected '%c' at position %d", s, *p,
                     (int)(p - s) + 1);
            return -EINVAL;
        }
        p++;
        continue;
    bad_number:
        if (lo == -2 || hi == -2)
            snprintf(err, errlen, "cpus '%s': number too large at position %d", s,
                     (int)(at - s) + 1);
        else if (*at)
            snprintf(err, errlen, "cpus '%s': expected a CPU number at position %d, got '%c'",
                     s, (int)(at - s) + 1, *at);
        else
            snprintf(err, errlen, "cpus '%s': expected a CPU number at the end", s);
        return -EINVAL;
    }
}
