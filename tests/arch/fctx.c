/*
 * Fiber contexts (core/fctx.h): host <-> fiber switching with the tool
 * hooks, the final switch out of a finished fiber, reuse of one stack by a
 * thousand fibers in turn, and a fiber that resumes on another thread. Run
 * it in ASan and TSan builds: they must stay silent.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "core/fctx.h"
#include "test.h"

enum { STACK = 64 << 10 };

static void *stack_new(void)
{
    void *p = mmap(NULL, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT(p != MAP_FAILED);
    return p;
}

/* A noinline callee that takes a pointer into the caller's frame, so the
 * frame has ASan redzones and a (possible) fake stack. */
__attribute__((noinline)) static uint64_t sum_buf(const uint8_t *b, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += b[i];
    return s;
}

struct fib {
    usched__fctx_t ctx;
    usched__fctx_t *host; /* where to switch to (set by whoever resumes) */
    uint64_t in, out;
    int done;
};

static void fiber_entry(void *arg)
{
    struct fib *f = arg;
    usched__fctx_started(&f->ctx);
    for (;;) {
        uint8_t buf[256];
        memset(buf, (int)(f->in & 0xff), sizeof buf);
        f->out = sum_buf(buf, sizeof buf) + f->in;
        if (f->in == 0)
            break;
        usched__fctx_switch(&f->ctx, f->host);
    }
    f->done = 1;
    usched__fctx_switch_final(&f->ctx, f->host);
}

static void test_host_fiber(void)
{
    usched__fctx_t host;
    usched__fctx_host(&host);
    void *stack = stack_new();
    long fibers = test_scale(1000);
    for (long k = 0; k < fibers; k++) {
        struct fib f = { .host = &host };
        usched__fctx_make(&f.ctx, stack, STACK, fiber_entry, &f, usched__ctx_fpmode());
        ASSERT(f.ctx.stack_lo == stack);
        ASSERT_EQ(f.ctx.stack_size, STACK);
        for (uint64_t v = 1; v <= 20; v++) {
            f.in = v * 3 + (uint64_t)k;
            usched__fctx_switch(&host, &f.ctx);
            ASSERT_EQ_U(f.out, 256 * (f.in & 0xff) + f.in);
            ASSERT_EQ(f.done, 0);
        }
        f.in = 0;
        usched__fctx_switch(&host, &f.ctx);
        ASSERT_EQ(f.done, 1);
        ASSERT_EQ_U(f.out, 0);
        usched__fctx_destroy(&f.ctx);
    }
    usched__fctx_destroy(&host); /* a no-op for hosts */
    munmap(stack, STACK);
    printf("host/fiber: %ld fibers on one stack\n", fibers);
}

/* One fiber, resumed by a host on thread 1, then on thread 2, then on 1... */
static struct fib migrant;

static void *resume_once(void *arg)
{
    uint64_t v = (uint64_t)(uintptr_t)arg;
    usched__fctx_t host;
    usched__fctx_host(&host);
    migrant.host = &host;
    migrant.in = v;
    usched__fctx_switch(&host, &migrant.ctx);
    return NULL;
}

static void test_migration(void)
{
    void *stack = stack_new();
    usched__fctx_make(&migrant.ctx, stack, STACK, fiber_entry, &migrant, usched__ctx_fpmode());
    for (uint64_t v = 5; v > 0; v--) {
        pthread_t t;
        ASSERT_EQ(pthread_create(&t, NULL, resume_once, (void *)(uintptr_t)(v - 1)), 0);
        ASSERT_EQ(pthread_join(t, NULL), 0);
        ASSERT_EQ_U(migrant.out, 256 * (v - 1) + (v - 1));
    }
    ASSERT_EQ(migrant.done, 1);
    usched__fctx_destroy(&migrant.ctx);
    munmap(stack, STACK);
}

int main(void)
{
    test_host_fiber();
    test_migration();
    printf("fctx: ok\n");
    return 0;
}
