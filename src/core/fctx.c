/*
 * Fiber contexts: the arch switch plus what each tool must hear about it.
 *
 * AddressSanitizer keeps per-stack state (bounds for its stack-overflow and
 * use-after-return logic, a "fake stack" per context): every switch is
 * bracketed by __sanitizer_start_switch_fiber (old side, names the new
 * stack's bounds) and __sanitizer_finish_switch_fiber (new side, learns the
 * old side's bounds). A host (worker thread) stack's bounds are not known up
 * front: the fiber it switches to learns them in its finish call and stores
 * them in the host context through `asan_from`. The last switch out of a
 * dying fiber passes NULL so ASan frees the fiber's fake stack. The frames
 * a dead fiber never returned from stay poisoned, so making a context on a
 * reused stack clears that poison first.
 *
 * ThreadSanitizer models each fiber as its own "thread": create one per
 * fiber, switch to it before every switch (flag 0: the switch is a
 * synchronisation, as a fiber may resume on another worker), destroy it once
 * the fiber is gone. A host uses the thread's own fiber object.
 *
 * valgrind's memcheck takes a large change of the stack pointer for a stack
 * switch only if the new stack is registered; registration happens when a
 * fiber context is made and dropped when it is destroyed.
 *
 * In a build with no sanitizer the switch is a tail call of the arch switch
 * (the machine context is the first member) and valgrind registration costs
 * a few no-op instructions per fiber creation, none per switch.
 */
#include <stdint.h>

#include "core/fctx.h"

#if defined(__SANITIZE_ADDRESS__)
#define FCTX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FCTX_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define FCTX_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FCTX_TSAN 1
#endif
#endif

#if FCTX_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if FCTX_TSAN
#include <sanitizer/tsan_interface.h>
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define FCTX_VALGRIND 1
#endif
#endif

void usched__fctx_host(usched__fctx_t *h)
{
    *h = (usched__fctx_t){ .is_host = 1 };
#if FCTX_TSAN
    h->tsan_fiber = __tsan_get_current_fiber();
#endif
}

void usched__fctx_make(usched__fctx_t *f, void *lo, size_t size,
                       void (*entry)(void *), void *arg, usched__fpmode_t fp)
{
    *f = (usched__fctx_t){ .stack_lo = lo, .stack_size = size };
#if FCTX_ASAN
    /* A reused stack still carries the redzones of the frames its previous
     * fiber never returned from. Clear them, but only from the lowest
     * poisoned byte up, so the shadow of untouched stack stays untouched
     * (unpoisoning all of it would commit size/8 bytes of shadow). */
    char *bad = __asan_region_is_poisoned(lo, size);
    if (bad)
        __asan_unpoison_memory_region(bad, (size_t)((char *)lo + size - bad));
#endif
    usched__ctx_make(&f->ctx, lo, size, entry, arg, fp);
    f->asan_bottom = lo;
    f->asan_size = size;
#if FCTX_TSAN
    f->tsan_fiber = __tsan_create_fiber(0);
#endif
#if FCTX_VALGRIND
    f->vg_id = VALGRIND_STACK_REGISTER(lo, (char *)lo + size);
#endif
}

/* Tells the tools that `from` is about to switch to `to`. fake: where ASan
 * keeps from's fake stack, NULL when from is finished. */
static inline void tools_leave(usched__fctx_t *from, usched__fctx_t *to, void **fake)
{
#if FCTX_ASAN
    to->asan_from = from;
    __sanitizer_start_switch_fiber(fake, to->asan_bottom, to->asan_size);
#endif
#if FCTX_TSAN
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
    (void)from, (void)to, (void)fake;
}

/* Tells the tools that `self` runs again (fake: its saved fake stack, NULL
 * on first entry); self->asan_from is whoever switched here. */
static inline void tools_arrive(usched__fctx_t *self, void *fake)
{
#if FCTX_ASAN
    usched__fctx_t *prev = self->asan_from;
    __sanitizer_finish_switch_fiber(fake, &prev->asan_bottom, &prev->asan_size);
#endif
    (void)self, (void)fake;
}

void usched__fctx_switch(usched__fctx_t *from, usched__fctx_t *to)
{
    tools_leave(from, to, &from->asan_fake);
    usched__ctx_switch(&from->ctx, &to->ctx);
    tools_arrive(from, from->asan_fake);
}

void usched__fctx_switch_final(usched__fctx_t *from, usched__fctx_t *to)
{
    tools_leave(from, to, NULL);
    usched__ctx_switch(&from->ctx, &to->ctx);
    /* A finished fiber is never resumed: its stack may already be reused. */
    __builtin_trap();
}

void usched__fctx_started(usched__fctx_t *self)
{
    tools_arrive(self, NULL);
}

void usched__fctx_destroy(usched__fctx_t *f)
{
    if (f->is_host)
        return;
#if FCTX_TSAN
    if (f->tsan_fiber)
        __tsan_destroy_fiber(f->tsan_fiber);
    f->tsan_fiber = NULL;
#endif
#if FCTX_VALGRIND
    VALGRIND_STACK_DEREGISTER(f->vg_id);
#endif
}
