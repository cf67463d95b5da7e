/* The library's own version and hwloc's (usched_version, usched_hwloc_version). */
#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>

#include "usched.h"
#include "base/export.h"

USCHED_EXPORT const char *usched_version(void)
{
    return USCHED_VERSION_STRING;
}

static char hwloc_text[64];
static pthread_once_t hwloc_once = PTHREAD_ONCE_INIT;

static void hwloc_text_init(void)
{
    unsigned api = hwloc_get_api_version();
    if (api == HWLOC_API_VERSION)
        snprintf(hwloc_text, sizeof hwloc_text, "%s", HWLOC_VERSION);
    else
        snprintf(hwloc_text, sizeof hwloc_text, "%s (run-time API 0x%x)", HWLOC_VERSION, api);
}

USCHED_EXPORT const char *usched_hwloc_version(void)
{
    pthread_once(&hwloc_once, hwloc_text_init);
    return hwloc_text;
}
