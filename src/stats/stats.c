/* Counter names and descriptions, generated from USCHED_STATS_MAP. */
#include <string.h>

#include "base/export.h"
#include "stats/stats.h"

static const char *const names[USCHED_NSTATS] = {
#define X(name, desc) #name,
    USCHED_STATS_MAP(X)
#undef X
};

static const char *const descs[USCHED_NSTATS] = {
#define X(name, desc) desc,
    USCHED_STATS_MAP(X)
#undef X
};

const char *usched__stat_name(int id)
{
    return id >= 0 && id < USCHED_NSTATS ? names[id] : NULL;
}

const char *usched__stat_desc(int id)
{
    return id >= 0 && id < USCHED_NSTATS ? descs[id] : NULL;
}

int usched__stat_lookup(const char *name)
{
    for (int i = 0; i < USCHED_NSTATS; i++)
        if (strcmp(names[i], name) == 0) return i;
    return -1;
}

USCHED_EXPORT int usched_stat_count(void)
{
    return USCHED_NSTATS;
}

USCHED_EXPORT const char *usched_stat_name(int i)
{
    return usched__stat_name(i);
}

USCHED_EXPORT const char *usched_stat_desc(int i)
{
    return usched__stat_desc(i);
}
