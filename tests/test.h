/*
 * Tiny test support: typed assertions that print both sides and the place,
 * then abort (so CTest records a failure and sanitizers keep their report).
 */
#ifndef USCHED_TEST_H
#define USCHED_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TEST_FAIL_(...)                                                         \
    do {                                                                        \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                        \
        fprintf(stderr, __VA_ARGS__);                                           \
        fputc('\n', stderr);                                                    \
        fflush(stderr);                                                         \
        abort();                                                                \
    } while (0)

#define ASSERT(c)                                                               \
    do {                                                                        \
        if (!(c)) TEST_FAIL_("assertion failed: %s", #c);                       \
    } while (0)

#define ASSERT_CMP_(a, op, b, T, fmt)                                           \
    do {                                                                        \
        T a_ = (T)(a);                                                          \
        T b_ = (T)(b);                                                          \
        if (!(a_ op b_))                                                        \
            TEST_FAIL_("%s %s %s: %" fmt " vs %" fmt, #a, #op, #b, a_, b_);     \
    } while (0)

#define ASSERT_EQ(a, b) ASSERT_CMP_(a, ==, b, int64_t, PRId64)
#define ASSERT_NE(a, b) ASSERT_CMP_(a, !=, b, int64_t, PRId64)
#define ASSERT_LT(a, b) ASSERT_CMP_(a, <, b, int64_t, PRId64)
#define ASSERT_LE(a, b) ASSERT_CMP_(a, <=, b, int64_t, PRId64)
#define ASSERT_GT(a, b) ASSERT_CMP_(a, >, b, int64_t, PRId64)
#define ASSERT_GE(a, b) ASSERT_CMP_(a, >=, b, int64_t, PRId64)
#define ASSERT_EQ_U(a, b) ASSERT_CMP_(a, ==, b, uint64_t, PRIu64)
#define ASSERT_PTR_EQ(a, b) ASSERT_CMP_(a, ==, b, const void *, "p")
#define ASSERT_OK(e)                                                            \
    do {                                                                        \
        long r_ = (long)(e);                                                    \
        if (r_ < 0) TEST_FAIL_("%s failed: %ld (%s)", #e, r_, strerror((int)-r_)); \
    } while (0)
#define ASSERT_STR_EQ(a, b)                                                     \
    do {                                                                        \
        const char *a_ = (a), *b_ = (b);                                        \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                  \
            TEST_FAIL_("%s == %s:\n--- got ---\n%s\n--- expected ---\n%s", #a, #b, \
                       a_ ? a_ : "(null)", b_ ? b_ : "(null)");                 \
    } while (0)
#define ASSERT_STR_CONTAINS(hay, needle)                                        \
    do {                                                                        \
        const char *h_ = (hay), *n_ = (needle);                                 \
        if (!h_ || !strstr(h_, n_))                                             \
            TEST_FAIL_("%s does not contain \"%s\": \"%s\"", #hay, n_, h_ ? h_ : "(null)"); \
    } while (0)

/* Stress sizes scale with USCHED_STRESS_SCALE (percent, default 100, never
 * below 1 item): sanitizer builds set it lower. */
static inline long test_scale(long n)
{
    const char *s = getenv("USCHED_STRESS_SCALE");
    long pct = s ? strtol(s, NULL, 10) : 100;
    if (pct <= 0) pct = 100;
    long r = n * pct / 100;
    return r < 1 ? 1 : r;
}

/* ThreadSanitizer counts every live fiber as a thread and dies beyond 8128,
 * and each costs it about 1 MiB and a slow start (4,000 alive on 24 virtual
 * CPUs took 40 s): tests that keep many fibers alive at once cap them with
 * this. */
#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif
#ifndef TEST_TSAN
#define TEST_TSAN 0
#endif

static inline long test_cap_alive(long n)
{
    return TEST_TSAN && n > 1500 ? 1500 : n;
}

static inline double test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
