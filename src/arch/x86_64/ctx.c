/* x86-64: initial frame of a new context (layout in switch.S). */
#include <stdint.h>
#include <string.h>

#include "arch/arch.h"

void usched__ctx_trampoline(void);

enum { FRAME_WORDS = 8 }; /* fp control, r15, r14, r13, r12, rbx, rbp, ret */

usched__fpmode_t usched__ctx_fpmode(void)
{
    uint32_t mxcsr;
    uint16_t fcw;
    __asm__ __volatile__("stmxcsr %0" : "=m"(mxcsr));
    __asm__ __volatile__("fnstcw %0" : "=m"(fcw));
    /* the exception flags (bits 0-5) are state, not modes */
    return (usched__fpmode_t)(mxcsr & ~0x3fu) | (usched__fpmode_t)fcw << 32;
}

void usched__ctx_make(usched__ctx_t *ctx, void *lo, size_t size,
                      void (*entry)(void *), void *arg, usched__fpmode_t fp)
{
    uintptr_t top = ((uintptr_t)lo + size) & ~(uintptr_t)15;
    /* After `ret` pops the return address, rsp = top - 16 (aligned); the 16
     * bytes above it stay zero as a terminating pseudo-frame. */
    uint64_t *f = (uint64_t *)(top - 16) - FRAME_WORDS;

    memset(f, 0, (FRAME_WORDS + 2) * sizeof *f);
    f[0] = fp & ~(uint64_t)0x3f; /* the MXCSR exception flags start clear */
    f[3] = (uint64_t)(uintptr_t)arg;   /* r13 */
    f[4] = (uint64_t)(uintptr_t)entry; /* r12 */
    f[7] = (uint64_t)(uintptr_t)usched__ctx_trampoline;
    ctx->sp = f;
}
