/*
 * Allocation-failure injection for tests (docs/design.md, "Allocation
 * failure"). Every allocation and mapping the library makes for itself goes
 * through these wrappers; a test arms the hook with usched__fault_arm(n) and
 * the n-th allocation after that fails as if memory ran out (once).
 *
 * Cost when disarmed, i.e. always outside those tests: one relaxed load of a
 * global word per allocation, on paths that are about to call malloc or
 * mmap anyway (never the switch, yield or hand-off paths; a spawn that
 * reuses a cached descriptor and stack allocates nothing). It is compiled
 * in every build, so the tests exercise the library a user runs.
 *
 * Not covered: allocations made inside hwloc, libc (pthread_create's stack)
 * and the kernel; the policies of src/policy, which see only include/.
 */
#ifndef USCHED_BASE_FAULT_H
#define USCHED_BASE_FAULT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Allocations left before the injected failure; 0 when disarmed. */
extern _Atomic long usched__fault_countdown;

/* Arms the hook: the n-th allocation or mapping from now fails (n >= 1);
 * n = 0 disarms it. */
void usched__fault_arm(long n);
/* Allocations still to go before the failure (0: it happened, or disarmed). */
long usched__fault_pending(void);
/* How many failures were injected since the process started. */
long usched__fault_injected(void);
bool usched__fault_hit_slow(void);

static inline bool usched__fault_hit(void)
{
    return __builtin_expect(atomic_load_explicit(&usched__fault_countdown, memory_order_relaxed) != 0, 0) &&
           usched__fault_hit_slow();
}

static inline void *usched__malloc(size_t n)
{
    return usched__fault_hit() ? NULL : malloc(n);
}

static inline void *usched__calloc(size_t n, size_t size)
{
    return usched__fault_hit() ? NULL : calloc(n, size);
}

static inline void *usched__realloc(void *p, size_t n)
{
    return usched__fault_hit() ? NULL : realloc(p, n);
}

static inline void *usched__aligned_alloc(size_t align, size_t n)
{
    return usched__fault_hit() ? NULL : aligned_alloc(align, n);
}

/* n bytes on cache lines of their own (64-byte aligned, rounded up to whole
 * lines): for state that CPUs write apart and must not share a line. */
static inline void *usched__alloc_lines(size_t n)
{
    return usched__aligned_alloc(64, (n + 63) & ~(size_t)63);
}

static inline char *usched__strdup(const char *s)
{
    return usched__fault_hit() ? NULL : strdup(s);
}

/* mmap; an injected failure is MAP_FAILED with errno ENOMEM, as the
 * kernel's (the callers turn errno into a negative return at once). */
static inline void *usched__mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (usched__fault_hit()) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return mmap(addr, len, prot, flags, fd, off);
}

/* pthread_create; an injected failure returns ENOMEM (a thread's stack is a
 * mapping). */
static inline int usched__thread_create(pthread_t *th, const pthread_attr_t *a, void *(*fn)(void *),
                                        void *arg)
{
    return usched__fault_hit() ? ENOMEM : pthread_create(th, a, fn, arg);
}

#endif
