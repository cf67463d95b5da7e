/*
 * What soak.c and soak_servers.c share: the clock, the label of the run in
 * progress and the exact-count check.
 */
#ifndef USCHED_SOAK_H
#define USCHED_SOAK_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "usched.h"

static inline uint64_t soak_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

extern const char *soak_label; /* "policy=... topology=..." of the current run */

/* Exits 1 naming the count and both values when got != want. */
#define CHECK_EQ(what, got, want)                                                  \
    do {                                                                           \
        uint64_t g_ = (uint64_t)(got), w_ = (uint64_t)(want);                      \
        if (g_ != w_) {                                                            \
            fprintf(stderr, "soak: %s: %s is %" PRIu64 ", expected %" PRIu64 "\n", \
                    soak_label, what, g_, w_);                                     \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

/* Every server of servers/ on s: `requests` well-behaved requests per
 * protocol, `hostile` connections of each hostile kind (soak_servers.c). */
void soak_servers(usched_t *s, long requests, long hostile);

#endif
