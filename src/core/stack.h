/*
 * Fiber stacks (docs/stacks.md): reserved, not committed (an idle fiber
 * costs the pages it touched). Carved from large mmap chunks so that one
 * million stacks do not need one million mappings; each stack gets a guard
 * page: a lightweight one (MADV_GUARD_INSTALL, Linux 6.13+, splits no
 * mapping) where the kernel has it, else a PROT_NONE page while the process
 * stays within a mapping budget (every such guard splits a mapping, and
 * vm.max_map_count is 65,530 by default); beyond the budget stacks get a
 * zero canary band below their low end instead, checked when the fiber
 * switches out (usched__stack_check). Design: stack.c, docs/stacks.md.
 */
#ifndef USCHED_STACK_H
#define USCHED_STACK_H

#include <stddef.h>
#include <stdint.h>

typedef struct usched__stack {
    void *lo;        /* lowest usable byte (above the guard page or canary) */
    size_t size;     /* usable bytes */
    uint8_t guarded; /* 1: guard page below lo; 0: canary at lo */
} usched__stack_t;

/* Allocates a stack of at least `size` usable bytes (rounded to pages). */
int usched__stack_alloc(size_t size, usched__stack_t *out);
/* Returns a stack (its pages are released to the kernel lazily). */
void usched__stack_free(usched__stack_t *st);
/* Batch forms for per-CPU caches: one pool lock for many stacks.
 * alloc_many returns how many it took (1..n; it grows the pool only when
 * it has none) or a negative errno; free_many takes stacks of one size. */
int usched__stack_alloc_many(size_t size, usched__stack_t *out, int n);
void usched__stack_free_many(usched__stack_t *st, int n);
/* A per-CPU cache of free stacks in front of the shared pool, owned by one
 * worker: it refills and spills half of itself at a time, under one pool
 * lock. USCHED_STACK_CACHE stacks: behind the worker's spare fibers (up to
 * 1,024, worker.h), which take a batch of 1,000 spawns. */
#define USCHED_STACK_CACHE 256
typedef struct usched__stack_cache {
    int n;
    usched__stack_t v[USCHED_STACK_CACHE];
} usched__stack_cache_t;

/* Takes a stack of `size` bytes from cache c (c NULL: from the pool). */
int usched__stack_cache_get(usched__stack_cache_t *c, size_t size, usched__stack_t *out);
/* Returns a stack to cache c (c NULL: to the pool). */
void usched__stack_cache_put(usched__stack_cache_t *c, const usched__stack_t *st);
/* Trades *st for the stack cache c freed last (its top is the warmest in this
 * CPU's cache): *st takes that one's place. No change when c is empty. The
 * two must have the same size. */
void usched__stack_cache_trade(usched__stack_cache_t *c, usched__stack_t *st);
/* Returns every stack of cache c to the pool. */
void usched__stack_cache_drain(usched__stack_cache_t *c);

/* Returns to the kernel the pages of free stacks beyond the `keep` most
 * recently freed of each size (keep < 0: the allocator's default, 4096 or
 * 256 MiB), at most `max` stacks (max < 0: all). Freeing never releases
 * pages by itself (a madvise per free costs a TLB shootdown on every CPU);
 * workers trim a little each time they park. Returns how many it released. */
long usched__stack_trim(long keep, long max);
/* Aborts with "usched: stack overflow in fiber <id> (stack <size> bytes)" if
 * the canary of an unguarded stack was overwritten. */
void usched__stack_check(const usched__stack_t *st, uint64_t fiber_id);

/* Guard-page fault reporting: installs (once per process) a SIGSEGV/SIGBUS
 * handler on an alternate stack, and per worker thread an alternate signal
 * stack. The handler names the fiber whose guard page was hit (published
 * with usched__stack_set_current) and aborts; other faults go to the
 * previous handler / default action. */
int usched__stack_thread_init(void);
void usched__stack_thread_fini(void);
void usched__stack_set_current(const usched__stack_t *st, uint64_t fiber_id);

/* ---- tuning, testing and reporting -------------------------------------- */

/* How stacks of chunks made from now on are guarded. AUTO: a lightweight
 * guard (madvise MADV_GUARD_INSTALL, Linux 6.13+, splits no mapping) when
 * the kernel has it, else mprotect guard pages within the mapping budget,
 * else canaries. MPROTECT: never the lightweight guard. NONE: canaries. */
enum { USCHED__STACK_GUARD_AUTO, USCHED__STACK_GUARD_MPROTECT, USCHED__STACK_GUARD_NONE };
void usched__stack_set_guard_mode(int mode);
/* Mappings (vm.max_map_count units) the allocator may spend on guard pages;
 * 0 disables every kind of guard page (canaries only); < 0 restores the
 * default, half of /proc/sys/vm/max_map_count. Affects chunks made later. */
void usched__stack_set_budget(long mappings);

struct usched__stack_stats {
    long budget;         /* mapping budget for guard pages */
    long mappings;       /* mappings created so far (counted before merging) */
    long chunks;         /* chunks mapped */
    long guarded;        /* stacks created with a guard page */
    long unguarded;      /* stacks created with a canary */
    long free;           /* stacks in the free lists now */
    long released;       /* frees that returned the stack's pages (MADV_DONTNEED) */
    int light_guards;    /* 1 if the kernel has MADV_GUARD_INSTALL */
};
void usched__stack_get_stats(struct usched__stack_stats *out);

#endif
