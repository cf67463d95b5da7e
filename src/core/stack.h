/*
 * Fiber stacks (DESIGN section 5): reserved, not committed (an idle fiber
 * costs the pages it touched). Carved from large mmap chunks so that one
 * million stacks do not need one million mappings; each stack gets a
 * PROT_NONE guard page while the process stays within a mapping budget (every
 * guard splits a mapping, and vm.max_map_count is 65,530 by default); beyond
 * the budget stacks get a canary word at their low end instead, checked when
 * the fiber switches out (usched__stack_check).
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

#endif
