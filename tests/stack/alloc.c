/*
 * Stack allocator (core/stack.h): bad sizes, 200k alloc/free cycles with
 * reuse, 200k stacks alive at once (distinct, usable end to end), several
 * sizes, the mprotect guard budget, concurrent alloc/free, and the canary
 * check passing on a stack used almost to its end.
 */
#include <alloca.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "usched.h"
#include "core/fctx.h"
#include "core/stack.h"
#include "test.h"

enum { KB = 1024, SZ = 64 * KB };

static long chunks(void)
{
    struct usched__stack_stats s;
    usched__stack_get_stats(&s);
    return s.chunks;
}

static void test_bad_sizes(void)
{
    usched__stack_t st = { 0 };
    ASSERT_EQ(usched__stack_alloc(0, &st), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "stack size 0");
    ASSERT_EQ(usched__stack_alloc(SIZE_MAX, &st), -EINVAL);
    ASSERT_STR_CONTAINS(usched_last_error(), "must be 1..");
    ASSERT_EQ(usched__stack_alloc((size_t)2 << 30, &st), -EINVAL);
    /* Small and odd sizes round up to whole pages, at least two. */
    ASSERT_OK(usched__stack_alloc(1, &st));
    ASSERT_EQ(st.size, 8 * KB);
    usched__stack_free(&st);
    ASSERT(st.lo == NULL);
    ASSERT_OK(usched__stack_alloc(SZ + 1, &st));
    ASSERT_EQ(st.size, SZ + 4 * KB);
    ASSERT_EQ((uintptr_t)st.lo % 4096, 0);
    usched__stack_free(&st);
    usched__stack_free(&st); /* already NULL: ignored */
}

static void test_cycles(void)
{
    long n = test_scale(200000);
    usched__stack_t st;
    ASSERT_OK(usched__stack_alloc(SZ, &st));
    void *first = st.lo;
    usched__stack_free(&st);
    long c0 = chunks();
    for (long i = 0; i < n; i++) {
        ASSERT_OK(usched__stack_alloc(SZ, &st));
        if (st.lo != first) /* LIFO: the stack just freed comes back */
            TEST_FAIL_("cycle %ld: got %p, expected %p", i, st.lo, first);
        ((volatile char *)st.lo)[st.size - 1] = 1;
        usched__stack_free(&st);
    }
    ASSERT_EQ(chunks(), c0);
    printf("cycles: %ld alloc/free, no new chunk\n", n);
}

static int cmp_lo(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const usched__stack_t *)a)->lo;
    uintptr_t y = (uintptr_t)((const usched__stack_t *)b)->lo;
    return (x > y) - (x < y);
}

static void test_many_alive(void)
{
    long n = test_scale(200000);
    usched__stack_t *st = calloc((size_t)n, sizeof *st);
    ASSERT(st);
    for (long i = 0; i < n; i++) {
        ASSERT_OK(usched__stack_alloc(SZ, &st[i]));
        ASSERT_EQ(st[i].size, SZ);
        volatile char *p = st[i].lo;
        p[0] = 1;               /* lowest and highest usable bytes */
        p[SZ - 1] = 2;
    }
    qsort(st, (size_t)n, sizeof *st, cmp_lo);
    for (long i = 1; i < n; i++) /* no overlap, and room for a gap page */
        ASSERT_GE((uintptr_t)st[i].lo, (uintptr_t)st[i - 1].lo + SZ + 4096);
    long c = chunks();
    for (long i = 0; i < n; i++)
        usched__stack_free(&st[i]);
    for (long i = 0; i < n; i++)
        ASSERT_OK(usched__stack_alloc(SZ, &st[i]));
    ASSERT_EQ(chunks(), c); /* all reused */
    for (long i = 0; i < n; i++)
        usched__stack_free(&st[i]);
    struct usched__stack_stats s;
    usched__stack_get_stats(&s);
    printf("alive: %ld stacks, %ld chunks, %ld mappings counted, %ld guarded, %ld canaried, "
           "%ld released, light guards %s\n", n, s.chunks, s.mappings, s.guarded, s.unguarded,
           s.released, s.light_guards ? "yes" : "no");
    ASSERT_GE(s.free, n);
    free(st);
}

static void test_sizes(void)
{
    static const size_t sizes[] = { 16 * KB, 64 * KB, 256 * KB, 1024 * KB, 8192 * KB };
    usched__stack_t st[5][3];
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++) {
            ASSERT_OK(usched__stack_alloc(sizes[i], &st[i][j]));
            ASSERT_EQ(st[i][j].size, sizes[i]);
            memset(st[i][j].lo, 0x5a, sizes[i]);
        }
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++)
            usched__stack_free(&st[i][j]);
}

/* mprotect guards: a chunk of 64 guarded stacks fits the budget, the next
 * does not and is canaried. */
static void test_budget(void)
{
    struct usched__stack_stats s;
    usched__stack_get_stats(&s);
    usched__stack_set_guard_mode(USCHED__STACK_GUARD_MPROTECT);
    long budget = (s.mappings + 2 * 64 + 1) * 16 / 15 + 2;
    usched__stack_set_budget(budget);
    usched__stack_t st[128];
    for (int i = 0; i < 128; i++)
        ASSERT_OK(usched__stack_alloc(96 * KB, &st[i])); /* a fresh pool */
    for (int i = 0; i < 128; i++)
        ASSERT_EQ(st[i].guarded, i < 64);
    usched__stack_get_stats(&s);
    ASSERT_LE(s.mappings, budget + 1);
    for (int i = 0; i < 128; i++)
        usched__stack_free(&st[i]);
    usched__stack_set_budget(0);
    ASSERT_OK(usched__stack_alloc(100 * KB, &st[0]));
    ASSERT_EQ(st[0].guarded, 0);
    usched__stack_check(&st[0], 1); /* untouched canary */
    usched__stack_free(&st[0]);
    usched__stack_set_budget(-1);
    usched__stack_set_guard_mode(USCHED__STACK_GUARD_AUTO);
    usched__stack_get_stats(&s);
    ASSERT_GT(s.budget, 0);
}

/* Each thread keeps 16 stacks alive, writing its own mark (thread and
 * iteration) at both ends of each and reading it back before the free: a
 * stack handed to two threads at once, or freed under its owner, shows as a
 * mark another thread wrote. */
struct churner {
    long n, id;
};

static void *churn(void *arg)
{
    const struct churner *c = arg;
    usched__stack_t st[16];
    uint64_t mark[16];
    for (long i = 0; i < c->n; i++) {
        int k = (int)(i % 16);
        if (i >= 16) {
            volatile uint64_t *lo = st[k].lo, *hi = (volatile uint64_t *)((char *)st[k].lo + st[k].size) - 1;
            if (*lo != mark[k] || *hi != mark[k])
                TEST_FAIL_("thread %ld: stack %p holds %#llx..%#llx, not its mark %#llx", c->id, st[k].lo,
                           (unsigned long long)*lo, (unsigned long long)*hi, (unsigned long long)mark[k]);
            usched__stack_free(&st[k]);
        }
        ASSERT_OK(usched__stack_alloc(32 * KB, &st[k]));
        mark[k] = (uint64_t)c->id << 48 | (uint64_t)i;
        *(volatile uint64_t *)st[k].lo = mark[k];
        *((volatile uint64_t *)((char *)st[k].lo + st[k].size) - 1) = mark[k];
    }
    for (int k = 0; k < 16; k++) {
        ASSERT_EQ_U(*(volatile uint64_t *)st[k].lo, mark[k]);
        usched__stack_free(&st[k]);
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t t[4];
    struct churner c[4];
    long n = test_scale(100000);
    for (int i = 0; i < 4; i++) {
        c[i] = (struct churner){n, i + 1};
        ASSERT_EQ(pthread_create(&t[i], NULL, churn, &c[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(pthread_join(t[i], NULL), 0);
    printf("threads: 4 x %ld alloc/free, every stack held its owner's mark\n", n);
}

/* A fiber that uses its unguarded stack down to about 6 KiB above lo (what
 * is left is for memset's frames, large under sanitizers): the canary check must pass. */
static usched__fctx_t host, deep;
static usched__stack_t deep_st;

static void deep_entry(void *arg)
{
    (void)arg;
    usched__fctx_started(&deep);
    char here;
    size_t n = (size_t)((uintptr_t)&here - (uintptr_t)deep_st.lo) - 6144;
    char *b = alloca(n);
    memset(b, 0xab, n);
    __asm__ __volatile__("" : : "r"(b) : "memory");
    ASSERT_LT((uintptr_t)b - (uintptr_t)deep_st.lo, 8192);
    usched__fctx_switch_final(&deep, &host);
}

static void test_deep_no_false_alarm(void)
{
    usched__stack_set_budget(0);
    ASSERT_OK(usched__stack_alloc(72 * KB, &deep_st)); /* a fresh pool: unguarded */
    ASSERT_EQ(deep_st.guarded, 0);
    usched__fctx_host(&host);
    usched__fctx_make(&deep, deep_st.lo, deep_st.size, deep_entry, NULL, usched__ctx_fpmode());
    usched__fctx_switch(&host, &deep);
    usched__stack_check(&deep_st, 3);
    usched__fctx_destroy(&deep);
    usched__stack_free(&deep_st);
    usched__stack_set_budget(-1);
}

int main(void)
{
    test_bad_sizes();
    test_cycles();
    test_many_alive();
    test_sizes();
    test_budget();
    test_threads();
    test_deep_no_false_alarm();
    printf("stack alloc: ok\n");
    return 0;
}
