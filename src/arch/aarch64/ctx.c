/* aarch64: initial frame of a new context (layout in switch.S). */
#include <stdint.h>
#include <string.h>

#include "arch/arch.h"

void usched__ctx_trampoline(void);

enum { FRAME_WORDS = 22 }; /* x19-x30 (12), d8-d15 (8), FPCR, pad */

usched__fpmode_t usched__ctx_fpmode(void)
{
    uint64_t fpcr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
    return fpcr;
}

void usched__ctx_make(usched__ctx_t *ctx, void *lo, size_t size,
                      void (*entry)(void *), void *arg, usched__fpmode_t fp)
{
    uintptr_t top = ((uintptr_t)lo + size) & ~(uintptr_t)15;
    /* After the switch pops the frame, sp = top - 16 (aligned); the 16
     * bytes above it stay zero as a terminating pseudo-frame. */
    uint64_t *f = (uint64_t *)(top - 16) - FRAME_WORDS;

    memset(f, 0, (FRAME_WORDS + 2) * sizeof *f);
    f[0] = (uint64_t)(uintptr_t)entry;                  /* x19 */
    f[1] = (uint64_t)(uintptr_t)arg;                    /* x20 */
    f[11] = (uint64_t)(uintptr_t)usched__ctx_trampoline; /* x30 */
    f[20] = fp;
    ctx->sp = f;
}
