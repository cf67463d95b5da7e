/* Helpers shared by the rq tests. */
#ifndef USCHED_RQ_TEST_H
#define USCHED_RQ_TEST_H

#include <stdint.h>

#include "test.h"

/* Pointer equality printing both sides. (test.h's ASSERT_PTR_EQ declares
 * its second operand with type `const void` and does not compile.) */
#define RQ_ASSERT_PTR_EQ(a, b)                                                  \
    do {                                                                        \
        const void *pa_ = (a), *pb_ = (b);                                      \
        if (pa_ != pb_) TEST_FAIL_("%s == %s: %p vs %p", #a, #b, pa_, pb_);     \
    } while (0)

#endif
