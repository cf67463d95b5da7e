/* Helpers shared by the src/sync tests. */
#ifndef USCHED_SYNC_TEST_H
#define USCHED_SYNC_TEST_H

#include <sched.h>

#include "test.h"
#include "usched.h"

#define VIRTUAL24 "pack:2 l3:1 l2:6 core:1 pu:2"

/* A started scheduler on `topology` (NULL or "" = this machine). */
static inline usched_t *sync_test_start(const char *topology)
{
    usched_t *s;
    ASSERT_OK(usched_create(&s));
    if (topology && *topology) ASSERT_OK(usched_set(s, "topology", topology));
    ASSERT_OK(usched_start(s));
    return s;
}

/* Spins the calling thread (yielding) until cond holds: for waiting on a
 * state change, never a timing. */
#define WAIT_UNTIL(cond)                                                        \
    do {                                                                        \
        while (!(cond)) {                                                       \
            if (usched_self())                                                  \
                usched_yield();                                                 \
            else                                                                \
                sched_yield();                                                  \
        }                                                                       \
    } while (0)

#endif
